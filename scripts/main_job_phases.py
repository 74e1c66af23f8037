"""Where the main job's wall time goes: start to the head's training, the training, and the rest (issue 20, item 3).

Runs ``bench run --defense texthide --attack rss --no-save`` in this process, with a timer around
``bench.models.training.train_loop``, and prints the three phases. ``--checkout DIR`` runs another checkout's code
(a worktree of an earlier commit, say) with this environment's packages, so two commits can be timed alternately:

    git worktree add /tmp/base HEAD~1
    for i in 1 2 3; do python scripts/main_job_phases.py; python scripts/main_job_phases.py --checkout /tmp/base; done
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
    args = parser.parse_args()
    if args.checkout:
        use_checkout(args.checkout)
    import bench.models.training as training
    from bench.cli.main import app

    marks = {}
    train_loop = training.train_loop

    def timed(*a, **k):
        marks["start"] = time.perf_counter()
        head = train_loop(*a, **k)
        marks["end"] = time.perf_counter()
        return head

    training.train_loop = timed
    sys.argv = ["bench", "run", "--defense", "texthide", "--attack", "rss", "--no-save"]
    try:
        app()
    except SystemExit as exc:
        if exc.code:
            raise
    ended = time.perf_counter()
    print(f"{bench_source(training)}: start to training {marks['start'] - STARTED:.2f} s, training "
          f"{marks['end'] - marks['start']:.2f} s, after {ended - marks['end']:.2f} s, in all {ended - STARTED:.2f} s",
          file=sys.stderr)


def bench_source(module) -> str:
    """The checkout a module was imported from."""
    return module.__file__.rsplit("/bench/", 1)[0]


if __name__ == "__main__":
    main()
