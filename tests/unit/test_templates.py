"""`bench new` by family: every template passes the contract as generated, a defense's reference test passes on
the template and fails on a planted bug, and a family that does not exist is one sentence with exit code 2."""

import importlib.util
import json

import pytest
from typer.testing import CliRunner

from bench.cli.main import app
from bench.engine.contracts import check_file
from bench.engine.templates import ATTACK_RELEASES, DEFENSE_FAMILIES, TASK_FAMILIES

runner = CliRunner()
CHOICES = ([("defense", "--family", f) for f in DEFENSE_FAMILIES]
           + [("attack", "--release", r) for r in ATTACK_RELEASES]
           + [("task", "--family", f) for f in TASK_FAMILIES])
# a bug a contributor could make in each defense family's template, and the reference test must catch it
BUGS = {
    "representation": ("self.sigma * torch.randn", "1.2 * self.sigma * torch.randn"),  # the wrong scale
    "token": ("drawn += drawn >= ", "drawn += drawn > "),  # the input's own token drawn as "another" token
    "span": ("span.end - span.start", "max(1, span.end - span.start - 1)"),  # a span's last word left in place
    "output": ("np.argsort(-p, axis=1", "np.argsort(p, axis=1"),  # the least likely classes kept
}


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def run_reference_tests(path):
    """Import a generated reference test file and call each of its test functions."""
    spec = importlib.util.spec_from_file_location(f"generated_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [getattr(module, name) for name in dir(module) if name.startswith("test_")]
    assert tests
    for test in tests:
        test()


@pytest.mark.parametrize("kind, flag, choice", CHOICES, ids=[f"{k}-{c}" for k, _, c in CHOICES])
def test_every_family_template_passes_the_contract_as_generated(kind, flag, choice, tmp_path):
    name = f"new-{choice.replace('_', '-')}"
    result = invoke("new", kind, name, flag, choice, "--dir", tmp_path)
    assert result.exit_code == 0, result.output
    path = tmp_path / f"{name.replace('-', '_')}.py"
    text = path.read_text()
    fields = ("Paper:", "Threat model:", "Deviations:")
    assert all(field in text for field in fields)
    assert check_file(path) == {f"{kind} {name}": []}
    reference = tmp_path / f"test_{path.stem}_reference.py"
    assert reference.is_file() == (kind == "defense")


@pytest.mark.parametrize("family", list(DEFENSE_FAMILIES))
def test_a_defense_reference_test_passes_on_the_template_and_fails_on_a_planted_bug(family, tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    assert invoke("new", "defense", f"ref-{family}", "--family", family, "--dir", good).exit_code == 0
    run_reference_tests(good / f"test_ref_{family}_reference.py")
    assert invoke("new", "defense", f"bug-{family}", "--family", family, "--dir", bad).exit_code == 0
    component = bad / f"bug_{family}.py"
    before, after = BUGS[family]
    assert before in component.read_text()
    component.write_text(component.read_text().replace(before, after))
    with pytest.raises(AssertionError):
        run_reference_tests(bad / f"test_bug_{family}_reference.py")


def test_a_new_defense_in_a_checkout_puts_its_reference_test_under_tests_unit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    result = invoke("new", "defense", "my-rr", "--family", "token")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "defenses" / "my_rr.py").is_file()
    reference = tmp_path / "tests" / "unit" / "test_my_rr_reference.py"
    assert '"../../defenses/my_rr.py"' in reference.read_text()
    assert not list((tmp_path / "defenses").glob("test_*"))  # discovery imports every module of defenses/


@pytest.mark.parametrize("args, message", [
    (["defense", "dp", "--family", "training"], "the training family"),
    (["defense", "dp", "--family", "noise"], "--family takes representation, token, span, output"),
    (["attack", "weights", "--release", "model"], "attacks/name_generation.py"),
    (["attack", "x", "--release", "pictures"], "--release takes sentence_embeddings, text"),
    (["attack", "x", "--family", "token"], "use --release"),
    (["defense", "x", "--release", "text"], "takes --family"),
    (["task", "x", "--family", "pretraining"], "tasks/clinical.py"),
    (["task", "x", "--family", "regression"], "--family takes classification, tagging, attribute"),
])
def test_a_family_that_does_not_exist_is_one_sentence_and_writes_nothing(args, message, tmp_path):
    result = invoke("new", *args, "--dir", tmp_path)
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) <= 2  # one sentence (wrapped at most once by the console)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_reference_test_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "test_twice_reference.py").write_text("# mine\n")
    result = invoke("new", "defense", "twice", "--family", "output", "--dir", tmp_path)
    assert result.exit_code == 2 and "already exists" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_twice_reference.py"]


def test_the_representation_templates_run_one_check_cell_together(tmp_path, tiny_data, results):
    for kind, choice in (("defense", "representation"), ("attack", "sentence_embeddings"),
                         ("task", "classification")):
        flag = "--release" if kind == "attack" else "--family"
        assert invoke("new", kind, f"rep-{kind}", flag, choice, "--dir", tmp_path).exit_code == 0
    plugins = [a for kind in ("defense", "attack", "task") for a in ("--plugin", tmp_path / f"rep_{kind}.py")]
    result = invoke("run", "--task", "rep-task", "--defense", "rep-defense", "--attack", "rep-attack", "--check",
                    "--encoder", "mock", "--train-args", "epochs=1", *plugins)
    assert result.exit_code == 0, result.output
    assert "utility/accuracy" in result.output and "privacy/rep-attack/identity" in result.output


def test_the_gradients_attack_template_reads_an_undefended_update_exactly(tmp_path, tiny_data, results):
    # an update of one example gives away its representation through the first layer; TextHide's mixing does not
    assert invoke("new", "attack", "grad-attack", "--release", "gradients", "--dir", tmp_path).exit_code == 0
    plugin = ["--plugin", tmp_path / "grad_attack.py", "--encoder", "mock", "--train-args", "epochs=1", "--json"]
    for defense, success in (("none", 1.0), ("texthide", 0.0)):
        result = invoke("run", "--defense", defense, "--attack", "grad-attack", "--check", *plugin)
        assert result.exit_code == 0, result.output
        record = json.loads(result.stdout)
        assert record["metrics"]["privacy/grad-attack/success_rate"] == success


def test_the_output_templates_run_one_check_cell_on_the_attribute_task_template(tmp_path, results):
    for kind, flag, choice in (("defense", "--family", "output"), ("attack", "--release", "predictions"),
                               ("task", "--family", "attribute")):
        assert invoke("new", kind, f"api-{kind}", flag, choice, "--dir", tmp_path).exit_code == 0
    plugins = [a for kind in ("defense", "attack", "task") for a in ("--plugin", tmp_path / f"api_{kind}.py")]
    result = invoke("run", "--task", "api-task", "--defense", "api-defense", "--attack", "api-attack", "--check",
                    "--encoder", "mock", "--json", *plugins)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["metrics"]
    assert 0 <= metrics["privacy/api-attack/attribute_accuracy"] <= 1 and "utility/accuracy" in metrics
