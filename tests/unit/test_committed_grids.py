"""Every committed grid still names the cells of its committed records.

A component that gains a parameter without ``added_later`` changes the configuration hash of every cell that uses
it, so ``bench run --grid`` would silently rerun a whole committed grid and the board would hold two groups of
the same cells. This reads the grids and ``results/records`` only (a dry run: nothing is computed).
"""

from pathlib import Path

import pytest

from bench.engine.grid import estimate_cells, load_grid

ROOT = Path(__file__).resolve().parents[2]
# grids whose cells are not all in results/records, and why
INCOMPLETE = {
    "gpu_texthide_bert.yaml": "bert-base fine-tuning on a GPU, never run offline",
    "aia_li_table4.yaml": "Blog's NDD cell (seed 0) awaits its re-run on the split by author (task blog version 2): "
                          "a rewrite of about 35 min of CPU",
}
GRIDS = sorted(p.name for p in (ROOT / "grids").glob("*.yaml"))


@pytest.mark.parametrize("grid", [g for g in GRIDS if g not in INCOMPLETE])
def test_committed_grid_has_every_cell_recorded(grid, committed_records):
    missing = [f"{c.spec.task}/{c.spec.defense}{c.spec.defense_args}/{c.spec.attack}/seed {c.spec.seed}"
               for c in estimate_cells(load_grid(ROOT / "grids" / grid), committed_records) if c.status != "recorded"]
    assert not missing, f"{grid}: {len(missing)} cells would run again, e.g. {missing[:3]}"


def test_the_incomplete_list_names_existing_grids():
    assert set(INCOMPLETE) <= set(GRIDS)
