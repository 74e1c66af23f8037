"""Time ``bench run --check`` on every cell that ``bench list``'s pairs allow, each from an empty cache.

    PYTHONPATH=. BENCH_DATA_DIR=/work/shared/data HF_HUB_OFFLINE=1 python scripts/check_pairs.py [--per-family]
        [--task T ...] [--defense D ...] [--attack A ...] [--timeout 600] [--json out.json]

The cells are every task x defense x attack that ``make_spec`` accepts at ``--check``'s sizes. ``VARIANTS`` adds the
cells whose artefacts differ: mask inference with an MLM adapted to the release, and a server with privacy-adaptive
pretraining. ``--per-family`` keeps one task per task module (glue, ner, ...) for each pair. Each cell runs as its
own ``bench run ... --check`` process with a fresh, empty ``BENCH_CACHE_DIR``, so it pays for all it builds. The
load average is printed before and after each cell: on a shared machine the seconds move with it. The table comes
slowest first, against a target of 60 s per cell on an idle 2-core machine. It is a benchmark to run by hand;
tests/integration/test_check_budget.py times a sample.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from bench.cli.main import main; sys.argv = sys.argv[1:]; main()"
BUDGET = 60.0  # seconds per cell on an idle 2-core machine
# (defense, attack, extra arguments): cells whose artefacts the default arguments do not build
VARIANTS = [
    ("santext", "mask-inference", ["--attack-args", "adapted=denoising"]),
    ("dchi-token", "inversion", ["--server-args", "adapt=denoising"]),
    ("santext", "inversion", ["--server-args", "adapt=prob"]),
]


def cells(per_family: bool, tasks: list[str], defenses: list[str], attacks: list[str]) -> list[list[str]]:
    """``bench run`` arguments of every cell to time (``--check`` added by the caller)."""
    from bench.core.errors import BenchError
    from bench.core.registry import ATTACKS, DEFENSES, TASKS
    from bench.engine.runner import CHECK_SIZES, make_spec

    found, families = [], set()
    for task in tasks or TASKS.names():
        family = TASKS.get(task).__module__
        for defense in defenses or DEFENSES.names():
            for attack in attacks or ATTACKS.names():
                variants = [[]] + [extra for d, a, extra in VARIANTS if (d, a) == (defense, attack)]
                for extra in variants:
                    given = dict(zip(extra[::2], extra[1::2]))
                    try:
                        make_spec(task=task, defense=defense, attack=attack, device="cpu", **CHECK_SIZES,
                                  attack_args=given.get("--attack-args"), server_args=given.get("--server-args"))
                    except BenchError:
                        continue
                    key = (family, defense, attack, tuple(extra))
                    if per_family and key in families:
                        continue
                    families.add(key)
                    found.append(["--task", task, "--defense", defense, "--attack", attack, *extra])
    return found


def time_cell(args: list[str], timeout: float) -> dict:
    """Run one cell under ``--check`` with an empty cache; its seconds, exit code and the load around it."""
    cache = Path(tempfile.mkdtemp(prefix="check-pairs-"))
    env = dict(os.environ, BENCH_CACHE_DIR=str(cache), BENCH_QUIET="1")
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", CLI, "bench", "run", *args, "--check", "--json"], env=env,
                              cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        code, error = done.returncode, (done.stderr.strip().splitlines() or [""])[-1]
        budget = json.loads(done.stdout).get("notes", {}).get("smoke_budget") if code == 0 else None
    except subprocess.TimeoutExpired:
        code, error, budget = None, f"timed out after {timeout:.0f} s", None
    finally:
        seconds = time.perf_counter() - started
        shutil.rmtree(cache, ignore_errors=True)
    return {"command": "bench run " + " ".join(args) + " --check", "seconds": round(seconds, 1), "exit": code,
            "error": "" if code == 0 else error, "smoke_budget": budget, "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    from bench.core.machine import cpu_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-family", action="store_true", help="one task per task module for each pair")
    parser.add_argument("--task", action="append", default=[], help="only this task (repeatable)")
    parser.add_argument("--defense", action="append", default=[], help="only this defense (repeatable)")
    parser.add_argument("--attack", action="append", default=[], help="only this attack (repeatable)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds after which a cell counts as failed")
    parser.add_argument("--json", type=Path, help="also write the rows and the machine to this file")
    options = parser.parse_args()
    todo = cells(options.per_family, options.task, options.defense, options.attack)
    machine = {"cpu": cpu_model(), "cpus": os.cpu_count(), "load_at_start": [round(x, 2) for x in os.getloadavg()]}
    print(f"{len(todo)} cells on {machine['cpu']} ({machine['cpus']} CPUs), load {machine['load_at_start']}",
          flush=True)
    rows = []
    for number, args in enumerate(todo, 1):
        row = time_cell(args, options.timeout)
        rows.append(row)
        status = "ok" if row["exit"] == 0 else f"FAILED ({row['error']})"
        print(f"[{number}/{len(todo)}] {row['seconds']:7.1f} s  load {row['load_before']:.1f}->{row['load_after']:.1f}"
              f"  {row['command']}  {status}", flush=True)
        if options.json:
            options.json.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n", encoding="utf-8")
    print(f"\n{'seconds':>8}  {'load':>9}  command (slowest first)")
    for row in sorted(rows, key=lambda r: -r["seconds"]):
        flag = "" if row["exit"] == 0 else f"  FAILED: {row['error']}"
        over = "  over budget" if row["seconds"] > BUDGET else ""
        load = f"{row['load_before']:4.1f}-{row['load_after']:<4.1f}"
        print(f"{row['seconds']:8.1f}  {load}  {row['command']}{over}{flag}")
    failed = sum(row["exit"] != 0 for row in rows)
    print(f"{len(rows)} cells, {failed} failed, {sum(r['seconds'] > BUDGET for r in rows)} over {BUDGET:.0f} s; "
          f"load at the end {[round(x, 2) for x in os.getloadavg()]}")


if __name__ == "__main__":
    main()
