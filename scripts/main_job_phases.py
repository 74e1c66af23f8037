"""Where the main job's wall time goes: start to the head's training, the training, and the rest.

It runs ``bench run --defense texthide --attack rss --no-save`` in this process, with a timer around
``bench.models.training.train_loop``, and prints the three phases. ``--checkout DIR`` runs another checkout's code
with this environment's packages. So two commits can be timed in turn:

    git worktree add /tmp/base HEAD~1
    for i in 1 2 3; do python scripts/main_job_phases.py; python scripts/main_job_phases.py --checkout /tmp/base; done

It also prints the cell's accuracy and RSS identity. So a setting that makes the job faster can be weighed against
the figures it changes: ``--seed``, ``--train-args`` (e.g. ``batch_size=128,lr=0.004``) and ``--fused-adam``
(Adam's ``fused=True`` path: other rounding, so other weights). ``--encoder``, ``--n-train`` and ``--n-eval`` make
a small run.
"""

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import sys  # noqa: E402


def use_checkout(folder: str) -> None:
    """Import ``bench`` from ``folder`` instead of the installed (editable) checkout."""
    sys.meta_path[:] = [f for f in sys.meta_path if "Editable" not in getattr(f, "__name__", type(f).__name__)]
    sys.path.insert(0, folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", help="another checkout of this repository to run instead of the installed one")
    parser.add_argument("--seed", default="0", help="the cell's seed")
    parser.add_argument("--train-args", default="", help="server training overrides, as bench run takes them")
    parser.add_argument("--fused-adam", action="store_true", help="train the head with Adam's fused path")
    parser.add_argument("--encoder", default="", help="another encoder than the cell's (mock for a smoke run)")
    parser.add_argument("--n-train", default="", help="training examples, if not the task's")
    parser.add_argument("--n-eval", default="", help="evaluation examples, if not the task's")
    args = parser.parse_args()
    if args.checkout:
        use_checkout(args.checkout)
    import bench.engine.runner as runner
    import bench.models.servers as servers
    import bench.models.training as training
    from bench.cli.main import app

    if args.fused_adam:
        use_fused_adam()

    marks = {}
    train_loop = training.train_loop

    def timed(*a, **k):
        marks["start"] = time.perf_counter()
        head = train_loop(*a, **k)
        marks["end"] = time.perf_counter()
        return head

    training.train_loop = servers.train_loop = timed  # the servers call it by the name they import
    run_cell, records = runner.run_cell, []
    runner.run_cell = lambda spec: records.append(run_cell(spec)) or records[-1]
    sys.argv = ["bench", "run", "--defense", "texthide", "--attack", "rss", "--no-save", "--seed", args.seed]
    for option, value in (("--train-args", args.train_args), ("--encoder", args.encoder), ("--n-train", args.n_train),
                          ("--n-eval", args.n_eval)):
        sys.argv += [option, value] if value else []
    try:
        app()
    except SystemExit as exc:
        if exc.code:
            raise
    ended = time.perf_counter()
    print(f"{bench_source(training)}: start to training {marks['start'] - STARTED:.2f} s, training "
          f"{marks['end'] - marks['start']:.2f} s, after {ended - marks['end']:.2f} s, in all {ended - STARTED:.2f} s",
          file=sys.stderr)
    metrics = records[0].metrics
    print(f"seed {args.seed}, train args '{args.train_args}'{', fused Adam' * args.fused_adam}: accuracy "
          f"{metrics['utility/accuracy']:.4f}, RSS identity {metrics['privacy/rss/identity']:.4f}", file=sys.stderr)


def use_fused_adam() -> None:
    """Make the head's optimizer take Adam's fused path (one kernel per step) instead of the foreach one."""
    import torch

    class FusedAdam(torch.optim.Adam):
        def __init__(self, params, lr, foreach=None, **options):
            super().__init__(params, lr=lr, fused=True, **options)

    torch.optim.Adam = FusedAdam


def bench_source(module) -> str:
    """The checkout a module was imported from."""
    return module.__file__.rsplit("/bench/", 1)[0]


if __name__ == "__main__":
    main()
