"""Class 6 of issue 60: plugins that misbehave. A plugin raising in ``__post_init__`` or ``setup()`` is one sentence
naming its file and line; ``bench check-plugin`` fails a mechanism that returns the wrong type, the wrong number of
rows or NaN (what the engine checks as a cell runs); a grid records every other cell past a failing one, reports the
failures at the end with exit code 2, and a second run retries only those."""

from __future__ import annotations

import pytest

from tests.conftest import files_under
from tests.reliability.conftest import MOCK_CHECK, grid_error, invoke, one_sentence

HEADER = '''"""A misbehaving plugin for the reliability tests.

Paper: none.
Threat model: none.
"""

from dataclasses import dataclass

import numpy as np
import torch

from bench import OutputDefense, RepresentationDefense, TokenDefense, register_defense
from bench.privacy.public import IdentityRepresentation, UniformTokens
'''

REPRESENTATION = HEADER + '''

@register_defense("{name}")
@dataclass
class Broken(RepresentationDefense):
    """The identity, broken as the test says."""

    fail: int = 0  # which seed fails (any value; -1: none)

    def representation_mechanism(self):
        """The identity."""
        return IdentityRepresentation()

    def hide_batch(self, reps, targets, generator):
        """The representations, broken."""
{body}
'''

TOKENS = HEADER + '''

class BrokenTokens(UniformTokens):
    """Uniform tokens, broken."""

    def privatize(self, ids, space, rng):
        """Broken as the test says."""
        out = super().privatize(ids, space, rng)
{body}


@register_defense("{name}")
@dataclass
class Broken(TokenDefense):
    """Uniform tokens, broken."""

    def token_mechanism(self):
        """The broken mechanism."""
        return BrokenTokens()
'''

OUTPUT = HEADER + '''

@register_defense("{name}")
@dataclass
class Broken(OutputDefense):
    """Probabilities, broken."""

    def answer(self, logits, rng):
        """Broken as the test says."""
{body}
'''

BROKEN = {
    "rep-string": (REPRESENTATION, '        return "hidden", targets'),
    "rep-half": (REPRESENTATION, '        return reps[: len(reps) // 2], targets'),
    "rep-nan": (REPRESENTATION, '        return reps * float("nan"), targets'),
    "tok-string": (TOKENS, '        return "released"'),
    "tok-half": (TOKENS, '        return out[: len(out) // 2]'),
    "tok-nan": (TOKENS, '        return [row.astype(float) * np.nan for row in out]'),
    "out-half": (OUTPUT, '        from bench.privacy.outputs import softmax\n\n'
                         '        return softmax(logits)[: len(logits) // 2]'),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_check_plugin_fails_a_mechanism_that_breaks_the_contract(tmp_path, name):
    template, body = BROKEN[name]
    plugin = tmp_path / f"broken_{name.replace('-', '_')}.py"
    plugin.write_text(template.format(name=f"broken-{name}", body=body))
    result = invoke("check-plugin", plugin)
    assert result.exit_code == 2, result.output
    assert "fail the contract" in result.stderr
    said = " ".join((result.output + result.stderr).split())
    assert any(word in said for word in ("rows", "sentences", "NaN", "returned str")), said


def _plugin(tmp_path, where: str):
    plugin = tmp_path / "raising.py"
    post_init = "raise ValueError('boom in post_init')" if where == "post_init" else "pass"
    setup = "raise RuntimeError('boom in setup')" if where == "setup" else "pass"
    plugin.write_text(HEADER + f'''

@register_defense("raising")
@dataclass
class Raising(RepresentationDefense):
    """The identity, raising where the test says."""

    fail: int = 0  # unused (any value)

    def __post_init__(self):
        {post_init}

    def representation_mechanism(self):
        """The identity."""
        return IdentityRepresentation()

    def setup(self, dim, generator):
        """Raise, or nothing."""
        {setup}
''')
    return plugin


@pytest.mark.parametrize("where", ["post_init", "setup"])
def test_a_plugin_raising_is_one_sentence_naming_its_file(tiny_data, results, tmp_path, where):
    plugin = _plugin(tmp_path, where)
    text = one_sentence(invoke("run", "--plugin", plugin, "--defense", "raising", *MOCK_CHECK), f"plugin {plugin}:",
                        f"boom in {where}", "bench check-plugin")
    assert ("__post_init__()" if where == "post_init" else "setup()") in text
    assert files_under(results) == []


GRID = ("tasks: [sst2]\nencoders: [mock]\ndefenses: [{name: broken-grid, args: {fail: 0}}, {name: broken-grid, "
        "args: {fail: 1}}, {name: broken-grid, args: {fail: 2}}]\nseeds: [0]\n"
        "settings: {training_args: {epochs: 1}, n_train: 40, n_eval: 20}\n")
SETUP = """    def setup(self, dim, generator):
        \"\"\"Raise for fail=1 while BROKEN_GRID_FAIL is set.\"\"\"
        import os

        if self.fail == 1 and os.environ.get("BROKEN_GRID_FAIL"):
            raise RuntimeError("the plugin broke")

"""


def test_a_grid_goes_on_past_a_failing_cell_and_retries_it_alone(tiny_data, tmp_path, monkeypatch):
    """The middle cell raises inside the plugin: the other two are recorded, the failure is reported at the end
    with exit code 2, and the next run (the fault gone) runs the failed cell alone."""
    from bench.results.store import ResultStore

    plugin = tmp_path / "broken_grid.py"
    plugin.write_text(REPRESENTATION.format(name="broken-grid", body="        return reps, targets").replace(
        "    def hide_batch(", SETUP + "    def hide_batch("))
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    results = tmp_path / "out"

    def recorded() -> list[int]:
        records, problems = ResultStore(results).read()
        assert problems == []
        return sorted(r.spec["defense_args"]["fail"] for r in records)

    monkeypatch.setenv("BROKEN_GRID_FAIL", "1")
    first = invoke("run", "--grid", grid, "--plugin", plugin, "--results-dir", results)
    grid_error(first, "1 of 3 cells failed", "the plugin broke", f"plugin {plugin}:", "2 ran",
               "run the grid again")
    assert recorded() == [0, 2]
    monkeypatch.delenv("BROKEN_GRID_FAIL")
    second = invoke("run", "--grid", grid, "--plugin", plugin, "--results-dir", results)
    assert second.exit_code == 0, second.output
    assert "ran 1 cells, skipped 2" in second.stdout
    assert recorded() == [0, 1, 2]


DESCRIBED = HEADER + '''
from bench.results.notes import Note, declare

{declare}


@register_defense("described-{suffix}")
@dataclass
class Described(RepresentationDefense):
    """The identity, describing a note of its own."""

    def representation_mechanism(self):
        """The identity."""
        return IdentityRepresentation()

    def describe(self, dim):
        """A key of its own."""
        return {{"my_scale_{suffix}": 1.0}}
'''


@pytest.mark.parametrize("declared", [False, True])
def test_check_plugin_asks_a_defense_to_declare_the_notes_it_describes(tmp_path, declared, monkeypatch):
    from bench.results import notes

    monkeypatch.setattr(notes, "SCHEMA", dict(notes.SCHEMA))  # the plugin's declaration stays in this test
    suffix = "yes" if declared else "no"
    declaration = f'declare(Note("my_scale_{suffix}", (float,), "mechanism", "its scale", ("representations",)))'
    plugin = tmp_path / f"described_{suffix}.py"
    plugin.write_text(DESCRIBED.format(suffix=suffix, declare=declaration if declared else ""))
    result = invoke("check-plugin", plugin)
    said = " ".join((result.output + result.stderr).split())
    if declared:
        assert result.exit_code == 0, said
    else:
        assert result.exit_code == 2 and f"note 'my_scale_{suffix}' is not declared" in said, said
