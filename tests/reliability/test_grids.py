"""Grid files: explicitly empty lists, unloadable encoders and non-UTF-8 files are refused before any cell runs."""

from __future__ import annotations

import pytest

from bench import BenchError
from bench.engine.grid import load_grid
from tests.conftest import files_under
from tests.reliability.conftest import invoke, one_sentence

GRID = """
tasks: [sst2]
encoders: [mock]
defenses: [none]
seeds: [0]
settings: {training_args: {epochs: 1}, n_train: 40, n_eval: 20}
"""


def write(tmp_path, text, name="grid.yaml"):
    path = tmp_path / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


@pytest.mark.parametrize("key", ["tasks", "seeds", "encoders", "attacks", "servers"])
def test_explicitly_empty_list_is_an_error(tiny_data, tmp_path, key):
    text = GRID if f"{key}:" in GRID else GRID + f"{key}: [sst2]\n"
    lines = [f"{key}: []" if line.startswith(f"{key}:") else line for line in text.splitlines()]
    with pytest.raises(BenchError, match=f"empty '{key}'"):
        load_grid(write(tmp_path, "\n".join(lines)))


def test_empty_seeds_on_the_command_line_runs_nothing(tiny_data, results, tmp_path):
    path = write(tmp_path, GRID.replace("seeds: [0]", "seeds: []"))
    one_sentence(invoke("run", "--grid", path), "empty 'seeds'")
    assert files_under(results) == []


def test_left_out_keys_still_mean_the_default(tiny_data, tmp_path):
    specs = load_grid(write(tmp_path, GRID.replace("seeds: [0]\n", "")))
    assert [s.seed for s in specs] == [0]


def test_grid_with_an_encoder_that_cannot_load_records_nothing(tiny_data, results, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = write(tmp_path, GRID.replace("encoders: [mock]", "encoders: [mock, no-such-org/no-such-model]"))
    one_sentence(invoke("run", "--grid", path), "names encoder 'no-such-org/no-such-model'", "cannot be found")
    assert files_under(results) == []


def test_grid_with_a_malformed_mock_encoder(tiny_data, tmp_path):
    with pytest.raises(BenchError, match="mock-64"):
        load_grid(write(tmp_path, GRID.replace("encoders: [mock]", "encoders: [mock, mock-x]")))


def test_grid_with_the_offline_default_encoder_loads(tiny_data, tmp_path):
    specs = load_grid(write(tmp_path, GRID.replace("encoders: [mock]", "encoders: [minilm]")))
    assert [s.encoder for s in specs] == ["minilm"]


def test_grid_file_that_is_not_utf8(tiny_data, results, tmp_path):
    path = write(tmp_path, GRID.replace("defenses: [none]", "# caf\xe9\ndefenses: [none]").encode("latin-1"))
    one_sentence(invoke("run", "--grid", path), f"grid file {path} is not UTF-8 text (line 4)")
    assert files_under(results) == []


def test_run_grid_refuses_a_results_file_before_the_first_cell(tiny_data, tmp_path, monkeypatch):
    import bench.engine.grid as grid_module
    from bench.engine.grid import run_grid
    from bench.results.store import ResultStore

    target = tmp_path / "results"
    target.write_text("")
    monkeypatch.setattr(grid_module, "run_cell", lambda spec: pytest.fail("a cell ran"))
    with pytest.raises(BenchError, match="is a file"):
        run_grid(load_grid(write(tmp_path, GRID)), ResultStore(target))
