"""Registry: discovery, default names, suggestions, plugins."""

import textwrap

import pytest

from bench import ATTACKS, DEFENSES, TASKS, BenchError, load_plugin


def test_builtins_are_discovered():
    assert {"none", "texthide"} <= set(DEFENSES.names())
    assert "rss" in ATTACKS.names()
    assert {"sst2", "cola"} <= set(TASKS.names())


def test_registry_name_is_the_module_stem():
    assert DEFENSES.get("texthide").__module__ == "bench.defenses.texthide"


def test_unknown_name_suggests_the_closest():
    with pytest.raises(BenchError, match="unknown defense 'texthid'.*Did you mean 'texthide'"):
        DEFENSES.get("texthid")


def test_plugin_file_registers_its_component(tmp_path):
    plugin = tmp_path / "loud_noise.py"
    plugin.write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass
            from bench import RepresentationDefense, register_defense

            @register_defense()
            @dataclass
            class LoudNoise(RepresentationDefense):
                scale: float = 2.0  # multiplier
                def hide(self, reps, generator):
                    return reps * self.scale
            """
        )
    )
    load_plugin(plugin)
    assert DEFENSES.get("loud_noise").__name__ == "LoudNoise"


def test_plugin_that_fails_to_import_is_one_clear_error(tmp_path):
    plugin = tmp_path / "broken.py"
    plugin.write_text("import not_a_module_anywhere\n")
    with pytest.raises(BenchError, match="plugin .*broken.py failed to import"):
        load_plugin(plugin)


def test_missing_plugin_file_is_an_error(tmp_path):
    with pytest.raises(BenchError, match="does not exist"):
        load_plugin(tmp_path / "absent.py")


def test_a_plugin_importing_a_moved_module_is_told_where_it_went(tmp_path):
    plugin = tmp_path / "old_task.py"
    plugin.write_text("from bench.data.examples import sample_indices\n")
    with pytest.raises(BenchError, match="bench.data.examples.*now bench.core.examples"):
        load_plugin(plugin)
