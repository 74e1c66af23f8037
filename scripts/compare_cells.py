"""Run a fixed sample of cells and write their metrics, to show a refactor changes no number.

Usage (one checkout per commit, same machine, same seed, one torch thread):

    python scripts/compare_cells.py run --root /path/to/checkout --out before.json
    python scripts/compare_cells.py run --root . --out after.json
    python scripts/compare_cells.py diff before.json after.json

``run`` calls ``bench run ... --json --no-save`` from ``--root`` (its code on PYTHONPATH) with a fresh
cache directory, so every feature and adapted checkpoint is recomputed by that commit's code.
``--only a,b`` runs those cells alone. Each cell's metrics are kept with the attacked release's digest
(``notes/release_digest``; none for a model release, whose folder records its build time). ``diff`` exits 1 unless
every value is identical.

The sample has a cell of every release path:

- tokens: dchi-text and SanText+ against inversion, dchi-token with denoising adaptation against
  inversion, mask-inference with an attacker-adapted MLM;
- tokens with a span rewrite: NDD on CoNLL-03 against span-recovery;
- representations: TextHide against RSS, gradient matching on a mock encoder;
- pretraining: NDD and none on a clinical task against name-generation and condition-probe;
- prediction API: an output defense and a text defense of the victim's data against attribute inference.

A cell that would build the offline MLM (``minilm-mlm``, minutes) runs with ``--check``, at the smoke
budget: its metrics are as deterministic as a full run's.
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
    # a span rewrite on the tokens path; NDD's MLM is minilm-mlm, so at the smoke budget
    ("ndd-span-recovery-check", ["--task", "conll2003", "--defense", "ndd", "--defense-args",
                                 "mode=substitutive,select=ndd", "--attack", "span-recovery", "--check"], ""),
    # pretraining: the weights a hospital releases after further pretraining on its (rewritten) notes
    ("ndd-name-generation-check", ["--task", "clinical-deid", "--defense", "ndd", "--defense-args",
                                   "mode=substitutive,select=ndd,kinds=NAME", "--attack", "name-generation",
                                   "--attack-args", "samples=30,length=12,max_samples=60", "--check"], ""),
    ("none-condition-probe-check", ["--task", "clinical-spl", "--defense", "none", "--attack", "condition-probe",
                                    "--check"], ""),
    # the prediction API: an output defense, and a text defense of the victim's training data
    ("reverse-sigmoid-aia", ["--task", "trustpilot", "--defense", "reverse-sigmoid", "--attack", "aia",
                             "--attack-args", "epochs=10", "--n-train", "150", "--n-eval", "80",
                             "--train-args", "epochs=8"], ""),
    ("dchi-text-aia-check", ["--task", "blog", "--defense", "dchi-text", "--defense-args", "eta=60", "--attack",
                             "aia", "--check"], ""),
]


def _bench(root: Path, args: list[str], env: dict) -> subprocess.CompletedProcess:
    code = "import sys; from bench.cli.main import main; sys.argv = ['bench', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=root, env=env, capture_output=True, text=True)


def run(root: Path, out: Path, only: str = "") -> None:
    """Run every cell of the sample (or those ``only`` names) from ``root`` and write ``{cell: metrics}`` to
    ``out``."""
    chosen = [name.strip() for name in only.split(",") if name.strip()]
    unknown = sorted(set(chosen) - {name for name, _, _ in CELLS})
    if unknown:
        sys.exit(f"no cell named {', '.join(unknown)}; the cells: {', '.join(name for name, _, _ in CELLS)}")
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", BENCH_CACHE_DIR=tempfile.mkdtemp(prefix="compare-cache-"))
    server_flag = "--server-args" in _bench(root, ["run", "--help"], env).stdout
    results = {}
    for name, args, server in CELLS:
        if chosen and name not in chosen:
            continue
        if server:
            args = [*args, "--server-args", server] if server_flag else _fold_into_defense(args, server)
        done = _bench(root, ["run", *args, "--json", "--no-save"], env)
        if done.returncode != 0:
            sys.exit(f"{name} failed:\n{done.stderr[-2000:]}")
        record = json.loads(done.stdout[done.stdout.index("{"):])
        # the attacked release's digest beside the metrics: a refactor must not change what the adversary sees; a
        # model release's digest reads its folder, whose pretraining.json holds the build's seconds, so it differs
        # from run to run and is left out
        digest = None if record["notes"].get("protocol") == "pretraining" else record["notes"].get("release_digest")
        results[name] = {**record["metrics"], "notes/release_digest": digest}
        print(name, json.dumps(results[name]), flush=True)
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
    run_parser.add_argument("--only", default="", help="run only these cells (names joined by commas)")
    diff_parser = sub.add_parser("diff")
    diff_parser.add_argument("before", type=Path)
    diff_parser.add_argument("after", type=Path)
    options = parser.parse_args()
    if options.command == "run":
        run(options.root.resolve(), options.out, options.only)
    else:
        sys.exit(diff(options.before, options.after))


if __name__ == "__main__":
    main()
