"""The component contract: every shipped component passes it; `bench new` templates pass it and run;
`bench check-plugin` names what a file gets wrong."""

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.engine.contracts import check_component, check_file

runner = CliRunner()
MOCK = ["--encoder", "mock", "--train-args", "epochs=1"]
# the repository's components (collection imports every test module, and some register components of their own)
SHIPPED = [(r.kind, name) for r in (DEFENSES, ATTACKS, TASKS) for name in r.names()
           if r.get(name).__module__.startswith("bench.")]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("kind, name", SHIPPED, ids=[f"{k}-{n}" for k, n in SHIPPED])
def test_shipped_component_meets_the_contract(kind, name):
    registry = {"defense": DEFENSES, "attack": ATTACKS, "task": TASKS}[kind]
    assert check_component(kind, registry.get(name)) == []


@pytest.mark.parametrize("kind", ["defense", "attack", "task"])
def test_new_writes_a_template_that_loads_and_passes(kind, tmp_path):
    name = f"tpl-{kind}"
    result = invoke("new", kind, name, "--dir", tmp_path)
    assert result.exit_code == 0, result.output
    path = tmp_path / f"tpl_{kind}.py"
    text = path.read_text()
    assert all(field in text for field in ("Paper:", "Threat model:", "Deviations:"))
    assert check_file(path) == {f"{kind} {name}": []}
    assert invoke("check-plugin", path).exit_code == 0
    listed = invoke("list", "--plugin", path)
    assert listed.exit_code == 0 and name in listed.output


def test_new_defaults_to_the_kind_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("new", "attack", "my-attack")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "attacks" / "my_attack.py").is_file()


def test_new_templates_run_a_cell(tmp_path, tiny_data, results):
    for kind in ("defense", "attack", "task"):
        assert invoke("new", kind, f"cell-{kind}", "--dir", tmp_path).exit_code == 0
    plugins = [a for kind in ("defense", "attack", "task") for a in ("--plugin", tmp_path / f"cell_{kind}.py")]
    result = invoke("run", "--task", "cell-task", "--defense", "cell-defense", "--attack", "cell-attack", "--check",
                    *MOCK, *plugins)
    assert result.exit_code == 0, result.output
    assert "utility/accuracy" in result.output and "privacy/cell-attack/identity" in result.output


def test_new_refuses_to_overwrite(tmp_path):
    assert invoke("new", "task", "twice", "--dir", tmp_path).exit_code == 0
    before = (tmp_path / "twice.py").read_text()
    result = invoke("new", "task", "twice", "--dir", tmp_path)
    assert result.exit_code == 2 and "already exists" in result.output
    assert (tmp_path / "twice.py").read_text() == before


@pytest.mark.parametrize("args, message", [
    (["defense", "My Defense"], "must be lower-case"),
    (["defense", "bad--name"], "must be lower-case"),
    (["model", "thing"], "not 'model'"),
])
def test_new_refuses_bad_input(args, message, tmp_path):
    result = invoke("new", *args, "--dir", tmp_path)
    assert result.exit_code == 2 and message in result.output
    assert list(tmp_path.iterdir()) == []


BAD = '''"""A defense whose parameters break the contract.

Paper: none.
Threat model: none.
"""

from dataclasses import dataclass

from bench import RepresentationDefense, register_defense


@register_defense("{name}")
@dataclass
class Broken(RepresentationDefense):
    {field}
'''


@pytest.mark.parametrize("field, message", [
    ("sigma: float  # noise scale", "parameter 'sigma' has no default"),
    ("sigma: float = 0.5", "parameter 'sigma' has no one-line comment"),
])
def test_check_plugin_names_the_bad_field(field, message, tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(BAD.format(name="broken", field=field))
    result = invoke("check-plugin", path)
    assert result.exit_code == 2, result.output
    assert message in result.output and "fail the contract" in result.output


def test_check_plugin_missing_docstring_field_and_unrefused_value(tmp_path):
    path = tmp_path / "lax.py"
    path.write_text(BAD.format(name="lax", field="sigma: float = 0.5  # noise scale").replace("Paper: none.\n", ""))
    warnings = {}
    expected = {"defense lax": ["module bench_plugins.lax docstring lacks the field 'Paper:'"]}
    assert check_file(path, warnings) == expected
    assert any("sigma" in w for w in warnings["defense lax"])


def test_check_plugin_file_without_components(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text('"""Nothing."""\n')
    result = invoke("check-plugin", path)
    assert result.exit_code == 2 and "registers no" in result.output


@pytest.mark.parametrize("relative", [True, False], ids=["relative", "absolute"])
def test_check_plugin_accepts_a_file_of_the_shipped_folders(relative, monkeypatch):
    # `bench new` writes into defenses/ and prints `bench check-plugin defenses/<file>.py`: discovery has already
    # imported that file, which must not count as a second registration of its components
    import sys
    from pathlib import Path

    source = Path(sys.modules[DEFENSES.get("texthide").__module__].__file__)
    monkeypatch.chdir(source.parent.parent)
    path = Path("defenses") / source.name if relative else source
    result = invoke("check-plugin", path)
    assert result.exit_code == 0, result.output
    assert "defense texthide: passes" in " ".join(result.output.split())
    assert check_file(path) == {"defense texthide": []}
    listed = invoke("list", "--plugin", path)
    assert listed.exit_code == 0 and "texthide" in listed.output


def test_check_plugin_names_a_note_its_defense_describes_without_declaring(tmp_path):
    # a defense written before the notes schema: the engine would stop its cell after the server trained
    path = tmp_path / "noted.py"
    path.write_text(BAD.format(name="noted", field="sigma: float = 0.5  # noise scale") + '''
    def describe(self, dim):
        """The noise norm."""
        return {"noise_norm": self.sigma * dim ** 0.5}
''')
    problems = check_file(path)["defense noted"]
    assert any("noise_norm" in p and "representations" in p and "declare" in p for p in problems), problems
