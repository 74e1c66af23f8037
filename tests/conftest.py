"""Shared fixtures: a tiny synthetic GLUE folder for unit tests, quiet progress bars."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("BENCH_QUIET", "1")
os.environ.setdefault("BENCH_RELEASE_STORE_GB", "0")  # no release store shared between tests (a test sets its own)
if os.environ.get("BENCH_DATA_DIR"):  # tests that change folder still find the data a relative path named
    os.environ["BENCH_DATA_DIR"] = str(Path(os.environ["BENCH_DATA_DIR"]).resolve())


def _share_the_cores_between_workers() -> None:
    """Under pytest-xdist (``pytest -n N``), give each worker its share of the cores for torch and BLAS.

    Two workers that each run two-thread torch on two cores lose most of their time to spinning threads (a CI run
    beside one such job took 2.6 times as long), so each worker gets cores // N threads, and the subprocesses it
    starts inherit the setting. Set before torch is imported; a value the user exported is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers > 1:
        threads = str(max(1, (os.cpu_count() or 1) // workers))
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ.setdefault(name, threads)


_share_the_cores_between_workers()

COMMITTED_RESULTS = Path(__file__).resolve().parents[1] / "results"
CELL_FOLDERS = ("integration", "browser")  # their files run real cells: tens of seconds to minutes each


def pytest_configure(config):
    """Under pytest-xdist, files are handed to workers in collection order (``pytest_collection_modifyitems``), not
    xdist's default of files with the most tests first: that default leaves a file of one long cell test for the
    end, one worker running it while the other waits."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """The files that run cells first, the many short files after them, so a parallel run ends on short files."""
    tests = Path(__file__).resolve().parent

    def folder(item) -> str:
        try:
            return item.path.resolve().relative_to(tests).parts[0]
        except ValueError:
            return ""

    items.sort(key=lambda item: folder(item) not in CELL_FOLDERS)  # stable: file and test order kept otherwise


@pytest.fixture(autouse=True)
def _registries_as_the_test_module_sees_them(request):
    """Each test sees the shipped components and those its own module and its folders' conftest files define, and
    what it registers goes with it. Collection imports every test module into each worker, and a module that
    registers a component at import would otherwise show it to the tests of every other file (a "missing attack"
    in a worst-case table, a name in bench list)."""
    from bench.core.registry import ATTACKS, DEFENSES, TASKS

    own = request.module.__name__
    folders = [own.rsplit(".", depth)[0] + ".conftest" for depth in range(1, own.count(".") + 1)]

    def visible(cls) -> bool:
        module = cls.__module__
        return not module.startswith("tests.") or module == own or module in folders

    saved = []
    for registry in (DEFENSES, ATTACKS, TASKS):
        registry.discover()
        saved.append((registry, dict(registry._items)))
        registry._items = {name: cls for name, cls in registry._items.items() if visible(cls)}
    yield
    for registry, items in saved:
        registry._items = items


TEST_MLM_STEPS = 200  # the most optimizer steps a test may train the offline MLM for (its full recipe: minutes)


@pytest.fixture(autouse=True)
def _offline_mlm_at_a_test_budget(monkeypatch):
    """A test builds the offline MLM (``minilm-mlm``, NDD's, DP-MLM's, span recovery's) only at a test's budget: the
    smoke budget (``make_spec(smoke=True)``, ``bench.core.smoke.smoke_budget()``) or ``minilm-mlm@N`` with a small N.
    The full recipe takes minutes on two cores, so a test that reaches it fails at once, naming the fix. Set
    ``BENCH_TEST_FULL_MLM=1`` to allow it. Builds in subprocesses are not watched."""
    if os.environ.get("BENCH_TEST_FULL_MLM"):
        return
    from bench.models import offline_mlm

    build = offline_mlm._build

    def at_a_test_budget(recipe, *args, **kwargs):
        if not recipe.smoke and not 0 < recipe.steps <= TEST_MLM_STEPS:
            pytest.fail(f"this test trains the offline MLM at its full budget ({recipe.steps or 'time-capped'} steps, "
                        f"minutes): run it at the smoke budget or name minilm-mlm@N with N <= {TEST_MLM_STEPS}",
                        pytrace=False)
        return build(recipe, *args, **kwargs)

    monkeypatch.setattr(offline_mlm, "_build", at_a_test_budget)


@pytest.fixture(scope="session")
def committed_records() -> tuple:
    """Every committed record under ``results/``, read once per session (once per pytest-xdist worker).

    A tuple, and shared: a test that needs to change a record copies it first. The read must find no corrupt
    line, since the committed files are written only by the harness."""
    from bench.results.store import ResultStore

    records, problems = ResultStore(COMMITTED_RESULTS).read()
    assert records and not problems, problems
    return tuple(records)

POSITIVE = ["great", "wonderful", "moving", "funny", "brilliant", "charming", "sharp", "warm"]
NEGATIVE = ["dull", "boring", "clumsy", "tedious", "flat", "awful", "stale", "weak"]
NOUNS = ["film", "movie", "story", "script", "cast", "ending", "plot", "score", "director", "scene"]
FILLER = ["really", "quite", "truly", "so", "very", "rather", "oddly", "simply"]


def synthetic_sentences(n: int, seed: int) -> list[tuple[int, str]]:
    """Distinct labelled sentences whose label is carried by one sentiment word."""
    rng = np.random.default_rng(seed)
    rows, seen = [], set()
    while len(rows) < n:
        label = int(rng.integers(0, 2))
        words = [
            "the", rng.choice(NOUNS), "is", rng.choice(FILLER),
            rng.choice(POSITIVE if label else NEGATIVE), "and", rng.choice(FILLER), rng.choice(NOUNS),
            str(len(rows)),  # keeps every sentence distinct
        ]
        text = " ".join(str(w) for w in words)
        if text not in seen:
            seen.add(text)
            rows.append((label, text))
    return rows


def write_tiny_glue(root: Path) -> Path:
    """SST-2 and CoLA files in the shared/data layout, with synthetic sentences."""
    sst = root / "glue" / "SST-2"
    sst.mkdir(parents=True)
    for name, header, n, seed in (("train.tsv", "sentence", 400, 0), ("dev.tsv", "content", 120, 1)):
        lines = [f"label\t{header}"] + [f"{y}\t{t}" for y, t in synthetic_sentences(n, seed)]
        (sst / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    cola = root / "glue" / "CoLA"
    cola.mkdir(parents=True)
    for name, n, seed in (("in_domain_train.tsv", 300, 2), ("in_domain_dev.tsv", 100, 3)):
        lines = [f"src\t{y}\t\t{t}" for y, t in synthetic_sentences(n, seed)]
        (cola / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_tiny_pairs(root)
    return root


def synthetic_pairs(n: int, seed: int) -> list[tuple[int, str, str]]:
    """Sentence pairs whose label says whether both carry the same sentiment."""
    first, second = synthetic_sentences(n, seed), synthetic_sentences(n, seed + 100)
    return [(int(a == b), s, t) for (a, s), (b, t) in zip(first, second)]


def write_tiny_pairs(root: Path) -> None:
    """MRPC, STS-B, QQP, QNLI and RTE files in their shared/data formats, with synthetic pairs."""
    glue = root / "glue"
    for folder in ("MRPC", "STS-B", "QQP", "QNLI", "RTE"):
        (glue / folder).mkdir(parents=True)
    for name, n, seed in (("train.tsv", 200, 10), ("dev.tsv", 60, 11)):  # BOM and a header, as MSR ships it
        lines = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        lines += [f"{y}\t{i}\t{i + 1}\t{a}\t{b}" for i, (y, a, b) in enumerate(synthetic_pairs(n, seed))]
        (glue / "MRPC" / name).write_text("\ufeff" + "\n".join(lines) + "\n", encoding="utf-8")
    for name, n, seed in (("sts-train.csv", 200, 12), ("sts-dev.csv", 60, 13)):
        lines = [f"main\tsrc\t2012\t{i:04d}\t{5.0 * y:.3f}\t{a}\t{b}" + ("\tx\ty" if i % 7 == 0 else "")
                 for i, (y, a, b) in enumerate(synthetic_pairs(n, seed))]
        (glue / "STS-B" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [f"{i}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}\t{y}" for i, (y, a, b) in enumerate(synthetic_pairs(250, 14))]
    lines.insert(3, "999\t1\t2\tis the film dull?\tis the plot tedious? 0")  # label glued on, as in the real subset
    (glue / "QQP" / "qqp_subset.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = ["index\tquestion\tsentence\tlabel"] + [
        f"{i}\t{a}\t{b}\t{'entailment' if y else 'not_entailment'}"
        for i, (y, a, b) in enumerate(synthetic_pairs(250, 15))]
    (glue / "QNLI" / "dev.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_tiny_rte(glue / "RTE" / "rte.zip", synthetic_pairs(250, 16))


def write_tiny_rte(path: Path, pairs) -> None:
    """An rte.zip laid out like NLTK's (rte/rte1_dev.xml: value=TRUE/FALSE; rte2_dev.xml: entailment=YES/NO)."""
    import zipfile
    from xml.sax.saxutils import escape

    half = len(pairs) // 2
    rte1 = "".join(f'<pair id="{i}" value="{"TRUE" if y else "FALSE"}" task="IR"><t>{escape(a)}</t>'
                   f"<h>{escape(b)}</h></pair>" for i, (y, a, b) in enumerate(pairs[:half]))
    rte2 = "".join(f'<pair id="{i}" entailment="{"YES" if y else "NO"}" task="QA"><t>{escape(a)}</t>'
                   f"<h>{escape(b)}</h></pair>" for i, (y, a, b) in enumerate(pairs[half:]))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("rte/rte1_dev.xml", f'<?xml version="1.0"?><entailment-corpus>{rte1}</entailment-corpus>')
        archive.writestr("rte/rte2_dev.xml", f'<?xml version="1.0"?><entailment-corpus>{rte2}</entailment-corpus>')


@pytest.fixture(autouse=True)
def hub_answers(monkeypatch):
    """No hub probe in tests (as if the hub answered): a test that unsets the offline variables fakes the hub itself,
    and no test switches offline mode on for the tests after it. Tests of the probe reset ``_state`` themselves."""
    import bench.core.hub as hub

    monkeypatch.setattr(hub, "_state", {"reachable": True})


@pytest.fixture
def tiny_data(tmp_path, monkeypatch) -> Path:
    """BENCH_DATA_DIR pointing at a tiny synthetic GLUE folder."""
    root = write_tiny_glue(tmp_path / "data")
    monkeypatch.setenv("BENCH_DATA_DIR", str(root))
    return root


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    """An empty results folder used as the default store."""
    path = tmp_path / "results"
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(path))
    return path


def files_under(path: Path) -> list[Path]:
    """Every file below ``path`` (empty when it does not exist)."""
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.exists() else []
