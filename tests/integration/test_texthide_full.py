"""TextHide-inter, federated TextHide and RepRecon with all-MiniLM-L6-v2 on real SST-2 slices.

These check the pattern of TextHide Table 8 (RepRecon), not its numbers: the offline encoder is a
frozen 384-dimensional MiniLM, and the slices are small.
"""

import json

from bench.engine.runner import make_spec, run_cell
from tests.integration.conftest import bench_run as run_cli

SLICE = ["--n-train", "1500", "--n-eval", "300", "--train-args", "epochs=2"]


def bench_run(*args, results):
    return run_cli(*args, *SLICE, results=results)


def test_inter_texthide_against_reprecon_writes_a_record(tmp_path):
    # RepRecon at 5 epochs, as in test_reprecon_pattern, where the same budget recovers undefended rows
    record = bench_run("--defense", "texthide", "--defense-args", "m=256,k=4,scheme=inter",
                       "--attack", "reprecon", "--attack-args", "epochs=5", results=tmp_path)
    metrics = record["metrics"]
    assert record["notes"]["public_corpus"] == "cola" and record["notes"]["public_corpus_size"] == 1500
    for metric in ("identity", "jcdist", "tfidf"):  # RepRecon learns nothing it can search with
        assert abs(metrics[f"privacy/reprecon/{metric}"] - metrics[f"random/reprecon/{metric}"]) <= 0.03
    lines = (tmp_path / "records" / "texthide.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["run_id"] == record["run_id"]


def test_federated_texthide_writes_a_record(tmp_path):
    record = bench_run("--defense", "texthide", "--defense-args", "m=16,k=4,clients=4", results=tmp_path)
    assert record["notes"]["clients"] == 4 and record["notes"]["masks_per_client"] == [4, 4, 4, 4]
    assert 0.5 < record["metrics"]["utility/accuracy"] <= 1.0


def reprecon(**defense):
    spec = make_spec(task="sst2", defense="texthide" if defense else "none", defense_args=defense,
                     attack="reprecon", attack_args="epochs=5", n_train=1500, n_eval=300, training_args="epochs=1")
    return run_cell(spec).metrics["privacy/reprecon/identity"]


def test_reprecon_pattern():
    """Undefended rows are recovered; mixing alone leaks some; TextHide's masks leave nothing."""
    baseline, mix_only, texthide = reprecon(), reprecon(m=0, k=4), reprecon(m=256, k=4)
    assert baseline >= 0.9
    assert texthide < 0.02 < mix_only < baseline
