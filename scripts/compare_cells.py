"""Run a fixed sample of cells and write their metrics, to show a refactor changes no number.

Usage (one checkout per commit, same machine, same seed, one torch thread):

    python scripts/compare_cells.py run --root /path/to/checkout --out before.json
    python scripts/compare_cells.py run --root . --out after.json
    python scripts/compare_cells.py diff before.json after.json

``run`` calls ``bench run ... --json --no-save`` from ``--root`` (its code on PYTHONPATH) with a fresh
cache directory, so every feature and adapted checkpoint is recomputed by that commit's code. The
sample covers each protocol: TextHide against RSS, dchi-text and SanText+ against inversion,
dchi-token with denoising adaptation against inversion, gradient matching on a mock encoder and
mask-inference with an attacker-adapted MLM. ``diff`` exits 1 unless every metric is identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SMALL = ["--n-train", "300", "--n-eval", "100", "--train-args", "epochs=8"]
# (name, bench run arguments, server arguments: --server-args where the CLI has it, else defense arguments)
CELLS = [
    ("texthide-rss", ["--defense", "texthide", "--defense-args", "m=16,k=4", "--attack", "rss", *SMALL], ""),
    ("dchi-text-inversion", ["--defense", "dchi-text", "--defense-args", "eta=60", "--attack", "inversion",
                             "--attack-args", "trials=5,support=300", *SMALL], ""),
    ("santext-plus-inversion", ["--defense", "santext-plus", "--attack", "inversion", *SMALL], ""),
    ("dchi-token-adapted-inversion", ["--defense", "dchi-token", "--defense-args", "eta=120", "--attack",
                                      "inversion", *SMALL], "adapt=denoising,adapt_steps=6,adapt_batch_size=8"),
    ("gradient-matching-mock", ["--defense", "texthide", "--defense-args", "m=1,k=1", "--attack",
                                "gradient-matching", "--attack-args", "attacks=3,steps=20", "--encoder", "mock-16",
                                *SMALL], ""),
    ("mask-inference-adapted", ["--defense", "dchi-text", "--defense-args", "eta=250", "--attack", "mask-inference",
                                "--attack-args", "mlm=minilm,adapted=denoising,adapted_steps=6,max_sentences=20", *SMALL], ""),
]


def _bench(root: Path, args: list[str], env: dict) -> subprocess.CompletedProcess:
    code = "import sys; from bench.cli.main import main; sys.argv = ['bench', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=root, env=env, capture_output=True, text=True)


def run(root: Path, out: Path) -> None:
    """Run every cell of the sample from ``root`` and write ``{cell: metrics}`` to ``out``."""
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", BENCH_CACHE_DIR=tempfile.mkdtemp(prefix="compare-cache-"))
    server_flag = "--server-args" in _bench(root, ["run", "--help"], env).stdout
    results = {}
    for name, args, server in CELLS:
        if server:
            args = [*args, "--server-args", server] if server_flag else _fold_into_defense(args, server)
        done = _bench(root, ["run", *args, "--json", "--no-save"], env)
        if done.returncode != 0:
            sys.exit(f"{name} failed:\n{done.stderr[-2000:]}")
        record = json.loads(done.stdout[done.stdout.index("{"):])
        results[name] = record["metrics"]
        print(name, json.dumps(record["metrics"]), flush=True)
    out.write_text(json.dumps(results, indent=2, sort_keys=True), encoding="utf-8")


def _fold_into_defense(args: list[str], server: str) -> list[str]:
    args = list(args)
    at = args.index("--defense-args") + 1
    args[at] = f"{args[at]},{server}"
    return args


def diff(before: Path, after: Path) -> int:
    """Print every metric that differs; 0 when all are identical."""
    a, b = (json.loads(p.read_text(encoding="utf-8")) for p in (before, after))
    differences = [(cell, key, a.get(cell, {}).get(key), b.get(cell, {}).get(key))
                   for cell in sorted(set(a) | set(b))
                   for key in sorted(set(a.get(cell, {})) | set(b.get(cell, {})))
                   if a.get(cell, {}).get(key) != b.get(cell, {}).get(key)]
    for row in differences:
        print("DIFFERS", *row)
    count = sum(len(v) for v in b.values())
    print(f"{len(a)} cells, {count} metrics compared, {len(differences)} differ")
    return 1 if differences else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--root", type=Path, default=Path("."))
    run_parser.add_argument("--out", type=Path, required=True)
    diff_parser = sub.add_parser("diff")
    diff_parser.add_argument("before", type=Path)
    diff_parser.add_argument("after", type=Path)
    options = parser.parse_args()
    if options.command == "run":
        run(options.root.resolve(), options.out)
    else:
        sys.exit(diff(options.before, options.after))


if __name__ == "__main__":
    main()
