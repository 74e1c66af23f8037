"""Plugins and names: a plugin never silently replaces or is replaced by a built-in, hostile names are refused at
registration, record paths never leave records/, a plugin that exits is reported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import BenchError
from bench.core.registry import DEFENSES, load_plugin
from bench.results.store import ResultStore
from tests.conftest import files_under
from tests.reliability.conftest import MOCK_CHECK, invoke, one_sentence

ROOT = Path(__file__).resolve().parents[2]
SHADOW = '''
from dataclasses import dataclass
from bench import RepresentationDefense, register_defense


@register_defense("texthide")
@dataclass
class TextHide(RepresentationDefense):
    """Same qualified name as the built-in."""
'''


def test_plugin_with_a_builtin_name_and_qualname_is_refused(tiny_data, results, tmp_path):
    plugin = tmp_path / "my_texthide.py"
    plugin.write_text(SHADOW)
    # a fresh process, where the plugin loads before anything discovered the built-ins
    code = "import sys; from bench.cli.main import main; sys.argv = sys.argv[1:]; main()"
    done = subprocess.run([sys.executable, "-c", code, "bench", "run", "--defense", "texthide", "--plugin",
                           str(plugin), *MOCK_CHECK], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "1000"})
    assert done.returncode == 2, done.stderr
    text = done.stderr.strip()
    assert len(text.splitlines()) == 1 and "Traceback" not in text, text
    assert "registered twice" in text and f"rename the one in {plugin}" in text
    assert str(ROOT / "defenses" / "texthide.py") in text
    assert files_under(results) == []


def test_plugin_clash_in_process_keeps_the_builtin(tmp_path):
    plugin = tmp_path / "other_texthide.py"
    plugin.write_text(SHADOW)
    builtin = DEFENSES.get("texthide")
    with pytest.raises(BenchError, match=f"rename the one in {plugin}"):
        load_plugin(plugin)
    assert DEFENSES.get("texthide") is builtin


def test_loading_the_same_plugin_twice_is_fine(tmp_path):
    plugin = tmp_path / "twice.py"
    plugin.write_text(SHADOW.replace('"texthide"', '"twice-defense"'))
    load_plugin(plugin)
    load_plugin(plugin)
    assert DEFENSES.get("twice-defense").__module__ == "bench_plugins.twice"


@pytest.mark.parametrize("name", ["my defense", "a/b", "../escape", "../../etc/passwd", "Upper", "x--y"])
def test_hostile_registry_names_are_refused_at_registration(tmp_path, name):
    plugin = tmp_path / "hostile.py"
    plugin.write_text(SHADOW.replace('"texthide"', repr(name)))
    with pytest.raises(BenchError) as caught:
        load_plugin(plugin)
    message = str(caught.value)
    assert "must be lower-case letters and digits" in message and len(message.splitlines()) == 1
    assert name not in DEFENSES.names()


def test_hostile_name_on_the_command_line(tiny_data, results, tmp_path):
    plugin = tmp_path / "slash.py"
    plugin.write_text(SHADOW.replace('"texthide"', '"a/b"'))
    one_sentence(invoke("run", "--plugin", plugin, *MOCK_CHECK), "defense name 'a/b'", "rename it")


@pytest.mark.parametrize("name", ["../escape", "a/b", "/etc/passwd", "..", "x y", "", "ok\x00"])
def test_record_paths_never_leave_records(tmp_path, name):
    store = ResultStore(tmp_path)
    with pytest.raises(BenchError, match="cannot name a records file"):
        store.path_for(name)


def test_record_path_of_a_valid_name(tmp_path):
    store = ResultStore(tmp_path)
    assert store.path_for("santext-plus") == tmp_path / "records" / "santext-plus.jsonl"


def test_plugin_calling_sys_exit(tiny_data, results, tmp_path):
    plugin = tmp_path / "quitter.py"
    plugin.write_text("import sys\nsys.exit(3)\n")
    one_sentence(invoke("run", "--plugin", plugin, *MOCK_CHECK), f"plugin {plugin} exited (sys.exit(3))")
    assert "bench_plugins.quitter" not in __import__("sys").modules
