"""``bench perf``: how fast each privacy mechanism runs, against what the machine allows.

Token-level mechanisms (every registered ``TokenDefense``) are timed in tokens per second on a
fixed batch of SST-2 sentences; representation-level ones (every ``RepresentationDefense`` that
transforms something) in sentences per second on the encoder's features of the same batch.

The yardstick is exact nearest-neighbour search over the vocabulary: one query costs a row of
distances, 2·|V|·n floating-point operations as a matrix product, so the machine's float32 matrix
product throughput bounds it at ``GFLOP/s·1e9 / (2·|V|·n)`` tokens per second. Each token-level
mechanism is reported as ``ceiling / measured`` (how many times slower than that bound) and as
``measured / ceiling`` beside the bf16 and int8 ceilings (bench.privacy.search certifies low-precision
scores, so an exact search can pass the float32 bound). The exponential mechanisms (SanText, SanText+)
are also timed against their floor: one matrix product of the distinct replaced tokens against the
candidates plus one pass over its rows. Each token mechanism's peak extra memory (resident set sampled
during one more call) is reported too.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bench.core import smoke
from bench.core.components import RepresentationDefense, SpanDefense, TokenDefense
from bench.core.errors import BenchError
from bench.core.files import write_text_atomic
from bench.core.jsontext import strict_json
from bench.core.params import build_component, component_args
from bench.core.registry import DEFENSES, TASKS
from bench.core.seeding import numpy_generator
from bench.models.generators import torch_generator
from bench.models.loading import load_encoder
from bench.privacy.mechanisms import cached_build, candidate_rows, candidate_sq_norms
from bench.privacy.search import BACKENDS
from bench.privacy.token_space import space_of, token_space

TARGET_RATIO = 3.0  # a search mechanism within 3x of the float32 ceiling meets the target
QUERY_BLOCKS = (256, 1024)  # queries per matrix product when measuring throughput: the ceiling is the best of them
# best of up to 10 products per dtype, but no more than 3 once they have taken this long together: a dtype the CPU
# only emulates (bf16 without its instructions, 1.4 s a product here) would otherwise take most of a run
CEILING_BUDGET_S = 2.0
WARMUP_SENTENCES = 64  # a short first call loads kernels and allocators before timing
TASK = "sst2"
EXPONENTIAL_CHUNK = 256  # distinct tokens per product, as bench.privacy.mechanisms.exponential_sample


@dataclass
class Timing:
    """One mechanism's measured cost on the fixed batch."""

    defense: str
    args: dict[str, Any]
    level: str  # "token" (items are tokens) or "sentence" (items are sentences)
    items: int
    fit_s: float  # fit (token level) or setup (sentence level), run once
    run_s: list[float]  # each timed privatize / hide call on the whole batch
    search_flops: float | None = None  # 2·|V|·n of the mechanism's token space; None at sentence level
    floor_s: float | None = None  # exponential mechanisms: the product + one pass over its rows (best of 3)
    peak_mb: float | None = None  # resident memory above the call's start, sampled during one more call
    backend: str | None = None  # the nearest-token search's backend, for a search mechanism
    search_s: float | None = None  # median seconds of a timed call spent in the nearest-token search

    @property
    def median_s(self) -> float:
        """Median wall time of the timed calls."""
        return statistics.median(self.run_s)

    @property
    def rate(self) -> float:
        """Items (tokens or sentences) per second at the median time."""
        return self.items / self.median_s if self.median_s > 0 else float("inf")

    @property
    def unit(self) -> str:
        """``tokens/s`` or ``sentences/s``."""
        return f"{self.level}s/s"


@dataclass
class PerfReport:
    """Everything ``bench perf`` measured, with the setting it was measured in."""

    settings: dict[str, Any]  # sentences, tokens, encoder, vocabulary, dim, repeats, seed
    gflops: dict[str, float | None]  # matrix product throughput per dtype ("float32", "bfloat16")
    timings: list[Timing]
    machine: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def ceiling(self, timing: Timing) -> float | None:
        """Exact-search tokens/s that float32 throughput allows in ``timing``'s token space."""
        if timing.search_flops is None or not self.gflops.get("float32"):
            return None
        return search_ceiling(self.gflops["float32"], timing.search_flops)

    def ceilings(self, timing: Timing) -> dict[str, float]:
        """Exact-search tokens/s that each dtype's throughput allows in ``timing``'s token space."""
        if timing.search_flops is None:
            return {}
        return {dtype: search_ceiling(g, timing.search_flops) for dtype, g in self.gflops.items() if g}

    def ratio(self, timing: Timing) -> float | None:
        """``ceiling / measured``: how many times slower than the float32 bound (None at sentence level)."""
        ceiling = self.ceiling(timing)
        return None if ceiling is None else ceiling / timing.rate


def search_flops(vocabulary: int, dim: int) -> float:
    """Floating-point operations of one exact nearest-neighbour query: 2·|V|·n."""
    return 2.0 * vocabulary * dim


def search_ceiling(gflops: float, flops_per_query: float) -> float:
    """Queries per second that ``gflops`` allows when one query costs ``flops_per_query``."""
    return gflops * 1e9 / flops_per_query


def time_calls(call: Callable[[], Any], repeats: int, warmup: Callable[[], Any] | None = None,
               budget_s: float | None = None, least: int = 3) -> list[float]:
    """Wall times of ``repeats`` calls of ``call``, after one untimed ``warmup`` call (default: ``call``).

    With ``budget_s``, stops early once at least ``least`` calls have taken ``budget_s`` seconds together.
    """
    (warmup or call)()
    times: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
        if budget_s is not None and len(times) >= least and sum(times) >= budget_s:
            break
    return times


def matmul_gflops(rows: int, inner: int, cols: int, dtype: str = "float32", repeats: int = 10) -> float | None:
    """Best GFLOP/s of ``(rows × inner) @ (inner × cols)`` over ``repeats`` products, torch default threads.

    The right operand is stored ``(cols, inner)``, as a vocabulary table is, and the product is taken both
    ways (``left @ right.T`` and ``right @ left.T``): the ceiling is the faster, since a search may use either
    (on AMX the two differ about 2x in bfloat16). Returns None when torch cannot multiply in ``dtype`` here.
    """
    import torch

    generator = torch.Generator().manual_seed(0)
    try:
        left = torch.randn(rows, inner, generator=generator).to(getattr(torch, dtype))
        right = torch.randn(cols, inner, generator=generator).to(getattr(torch, dtype))
        times = [t for call in (lambda: left @ right.T, lambda: right @ left.T)
                 for t in time_calls(call, **_ceiling_calls(repeats))]
    except (RuntimeError, TypeError):
        return None
    # the fastest product, not the median: the ceiling is an upper bound, and on a shared machine the
    # least disturbed run estimates it best (so contention never makes a mechanism look closer to it)
    return 2.0 * rows * inner * cols / min(times) / 1e9


def _ceiling_calls(repeats: int) -> dict:
    """``time_calls``'s arguments for a ceiling: at the smoke budget (``bench.core.smoke``, a check of the figures,
    not of the speed) one product, without a warm-up."""
    if smoke.active():
        return {"repeats": 1, "warmup": lambda: None, "least": 1}
    return {"repeats": repeats, "budget_s": CEILING_BUDGET_S}


def mechanism_classes() -> dict[str, type]:
    """Every registered defense that is a privacy mechanism bench perf can time, by name.

    Token level: subclasses of ``TokenDefense`` but not of ``SpanDefense`` (a span defense's cost is its rewrite,
    which ``bench perf --ndd`` measures). Sentence level: subclasses of
    ``RepresentationDefense`` that override a hide method (the identity ``none`` is left out).
    """
    return {name: DEFENSES.get(name) for name in DEFENSES.names() if _default_mechanism(DEFENSES.get(name))}


def _level(cls: type) -> str | None:
    if issubclass(cls, SpanDefense):  # rewrites declared spans, then releases tokens as they are (perf --ndd)
        return None
    if issubclass(cls, TokenDefense) and not issubclass(cls, RepresentationDefense):
        return "token"
    if issubclass(cls, RepresentationDefense):
        return "sentence"
    return None


def _default_mechanism(cls: type) -> bool:
    level = _level(cls)
    if level == "sentence":
        hides = ("hide", "hide_batch", "hide_inference")
        return any(getattr(cls, h) is not getattr(RepresentationDefense, h) for h in hides)
    return level == "token"


def build_mechanisms(names: Sequence[str] | None, defense_args: str = "") -> list[tuple[str, Any]]:
    """The defenses to time, built with their defaults (or ``defense_args`` for a single one).

    Raises ``BenchError`` for an unknown name, bad arguments, or a defense that is no mechanism.
    """
    names = list(dict.fromkeys(names)) if names else list(mechanism_classes())
    if defense_args and len(names) != 1:
        raise BenchError(f"--defense-args applies to one defense; name exactly one with --defense "
                         f"(got {len(names)}).")
    built = []
    for name in names:
        cls = DEFENSES.get(name)
        if _level(cls) is None:
            raise BenchError(f"defense '{name}' is neither a token-level nor a representation-level mechanism, "
                             f"so bench perf cannot time it; choose from {', '.join(mechanism_classes())}.")
        built.append((name, build_component(cls, defense_args or None)))
    return sorted(built, key=lambda item: _level(type(item[1])) != "token")  # token level first, names kept in order


def fixed_batch(sentences: int, seed: int = 0) -> list[str]:
    """The first ``sentences`` of SST-2's training split, sampled by the task with ``seed``."""
    if sentences < 1:
        raise BenchError(f"--sentences must be at least 1, got {sentences}.")
    task = build_component(TASKS.get(TASK), {})
    return list(task.load(sentences, 2, seed).train.texts)


def time_token_mechanism(defense, ids: list[np.ndarray], space, repeats: int, seed: int = 0) -> Timing:
    """Time the defense's mechanism: ``fit`` once and ``privatize`` on every sentence of ``ids`` (tokens/s)."""
    mechanism = defense.token_mechanism()
    searched_before = _search_counts(space)
    start = time.perf_counter()
    mechanism.fit(ids, space)
    fit_s = time.perf_counter() - start
    name = type(defense).registry_name
    searched: list[float] = []

    def call() -> None:  # the same generator seed on every call, so every timed call does the same work
        before = _search_seconds(space)
        mechanism.privatize(ids, space, numpy_generator(seed, "perf", name))
        searched.append(_search_seconds(space) - before)

    times = time_calls(
        call,
        repeats,
        warmup=lambda: mechanism.privatize(ids[:WARMUP_SENTENCES], space, numpy_generator(seed, "perf-warmup", name)),
    )
    _, peak = peak_memory(lambda: mechanism.privatize(ids, space, numpy_generator(seed, "perf", name)))
    floor = exponential_floor(mechanism, ids, space, numpy_generator(seed, "perf", name))
    return Timing(name, component_args(defense), "token", int(sum(len(x) for x in ids)), fit_s, times,
                  search_flops(len(space.candidates), space.table.shape[1]), floor, peak,
                  _search_backend(searched_before, _search_counts(space)),
                  statistics.median(searched) if any(searched) else None)


def _search_counts(space) -> dict[str, int]:
    """Answers so far per stage of the nearest-token search built for ``space`` (empty if none was built)."""
    search = cached_build("search", space.table, space.candidates)
    return dict(search.stats.by_stage) if search is not None else {}


def _search_seconds(space) -> float:
    """Seconds spent so far in the nearest-token search built for ``space`` (0 if none was built)."""
    search = cached_build("search", space.table, space.candidates)
    return search.stats.seconds if search is not None else 0.0


def _search_backend(before: dict[str, int], after: dict[str, int]) -> str | None:
    """The search stage that answered most queries between two ``_search_counts``.

    None if no search ran: a mechanism timed after another that searched the same space does not search again.
    """
    answered = {stage: count - before.get(stage, 0) for stage, count in after.items()}
    answered = {stage: count for stage, count in answered.items() if count > 0}
    return max(answered, key=answered.get) if answered else None


def peak_memory(call: Callable[[], Any], interval: float = 0.002) -> tuple[Any, float | None]:
    """``call()`` and its peak resident memory above the start, in MB (sampled; None off Linux)."""
    import threading

    statm = Path("/proc/self/statm")
    if not statm.exists():
        return call(), None
    page = os.sysconf("SC_PAGE_SIZE")

    def resident() -> int:
        return int(statm.read_text().split()[1]) * page

    start = resident()
    peak = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], resident())
            done.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = call()
    finally:
        done.set()
        sampler.join()
    return result, (max(peak[0], resident()) - start) / 1e6


def exponential_floor(mechanism, ids: list[np.ndarray], space, rng: np.random.Generator,
                      repeats: int = 3) -> float | None:
    """Seconds of the exponential mechanism's floor on ``ids`` (None for other mechanisms).

    The floor is one distance row per distinct replaced token, plus one pass over the rows (an in-place exp). The
    rows are the matrix product of those tokens' embeddings with the candidates', ``CHUNK`` rows at a time, as the
    mechanism works. No sampler of these distributions can do less. The replaced tokens are those of the timed call
    (``rng`` seeded as it was).
    """
    import torch

    sensitive = getattr(mechanism, "sensitive", None)
    if sensitive is None or not hasattr(mechanism, "eps"):
        return None
    flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    replace = np.isin(flat, sensitive) | (rng.random(len(flat)) < mechanism.p)
    distinct = np.unique(flat[replace])
    rows = candidate_rows(space.table, sensitive).float()
    norms = candidate_sq_norms(space.table, sensitive).float()

    def floor() -> None:
        for first in range(0, len(distinct), EXPONENTIAL_CHUNK):
            x = torch.from_numpy(np.ascontiguousarray(space.table[distinct[first : first + EXPONENTIAL_CHUNK]],
                                                      dtype=np.float32))
            product = norms.addmm(x, rows.T, alpha=-2).numpy()
            np.exp(product, out=product)

    return min(time_calls(floor, repeats))


def time_sentence_mechanism(defense, features: np.ndarray, repeats: int, seed: int = 0) -> Timing:
    """Time ``defense.setup`` once and ``defense.hide_inference`` on all ``features`` (sentences/s)."""
    import torch

    name = type(defense).registry_name
    reps = torch.from_numpy(features)
    start = time.perf_counter()
    defense.setup(reps.shape[1], torch_generator(seed, "perf-secrets", name))
    fit_s = time.perf_counter() - start
    times = time_calls(lambda: defense.hide_inference(reps, torch_generator(seed, "perf", name)), repeats)
    return Timing(name, component_args(defense), "sentence", len(features), fit_s, times)


def run_perf(
    sentences: int = 2000,
    repeats: int = 3,
    defenses: Sequence[str] | None = None,
    defense_args: str = "",
    encoder_name: str = "minilm",
    seed: int = 0,
    progress: Callable[[str], None] = lambda message: None,
) -> PerfReport:
    """Measure matrix-product throughput and time every selected mechanism on the fixed batch."""
    if sentences < 1 or repeats < 1:
        raise BenchError(f"--sentences and --repeats must be at least 1, got {sentences} and {repeats}.")
    mechanisms = build_mechanisms(defenses, defense_args)
    texts = fixed_batch(sentences, seed)
    progress(f"loading encoder {encoder_name}")
    encoder = load_encoder(encoder_name)
    wordpieces = token_space(encoder)
    vocabulary, dim = len(wordpieces.candidates), int(wordpieces.table.shape[1])
    spaces: dict[str, tuple[Any, list[np.ndarray]]] = {"": (wordpieces, wordpieces.client_ids(texts))}
    progress("measuring matrix-product throughput")
    before = throughput(vocabulary, dim)
    features = None
    timings = []
    for name, defense in mechanisms:
        progress(f"timing {name}")
        if _level(type(defense)) == "token":
            key = defense.token_space().vectors  # a word-vector file is its own token space
            if key not in spaces:
                space = space_of(defense.token_space(), encoder)
                spaces[key] = space, space.client_ids(texts, numpy_generator(seed, "perf-oov"))
            timings.append(time_token_mechanism(defense, spaces[key][1], spaces[key][0], repeats, seed))
        else:
            features = encoder.encode(texts) if features is None else features
            timings.append(time_sentence_mechanism(defense, features, repeats, seed))
    progress("measuring matrix-product throughput again")
    after = throughput(vocabulary, dim)
    # before and after the mechanisms, keeping the better: a burst of load on a shared machine at one moment
    # should not lower the ceiling
    gflops = {dtype: max(filter(None, (before[dtype], after[dtype])), default=None) for dtype in before}
    wordpiece_ids = spaces[""][1]
    settings = {
        "task": TASK, "split": "train", "sentences": len(texts), "tokens": int(sum(len(x) for x in wordpiece_ids)),
        "distinct_tokens": int(len(np.unique(np.concatenate(wordpiece_ids)))) if wordpiece_ids else 0,
        "encoder": encoder_name, "vocabulary": vocabulary, "dim": dim, "query_blocks": list(QUERY_BLOCKS),
        "repeats": repeats, "seed": seed,
    }
    return PerfReport(settings, gflops, timings, machine_info(), versions())


def throughput(vocabulary: int, dim: int) -> dict[str, float | None]:
    """GFLOP/s of float32, bfloat16 and int8 products at the search's shape (a query block against the table), the
    best over the block sizes of ``QUERY_BLOCKS`` (a search may use any of them)."""
    rates = {}
    for dtype in ("float32", "bfloat16", "int8"):
        measured = [int8_gflops(block, dim, vocabulary) if dtype == "int8" else
                    matmul_gflops(block, dim, vocabulary, dtype) for block in QUERY_BLOCKS]
        rates[dtype] = max((r for r in measured if r is not None), default=None)
    return rates


def int8_gflops(rows: int, inner: int, cols: int, repeats: int = 10) -> float | None:
    """Best GFLOP/s of the certified search's int8 product (fbgemm, bench.privacy.search), None if unusable."""
    generator = np.random.default_rng(0)
    try:
        backend = BACKENDS["int8"](generator.standard_normal((cols, inner)).astype(np.float32))
        left = generator.standard_normal((rows, inner)).astype(np.float32)
        times = time_calls(lambda: backend.products(left), **_ceiling_calls(repeats))
    except (RuntimeError, ValueError, TypeError, AttributeError):
        return None
    return 2.0 * rows * inner * cols / min(times) / 1e9


def machine_info() -> dict[str, Any]:
    """CPU count, thread counts, platform and load average at the time of measurement."""
    import torch

    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }
    try:
        import faiss

        info["faiss_threads"] = faiss.omp_get_max_threads()
    except ImportError:
        pass
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return info


def versions() -> dict[str, str]:
    """Versions of the packages whose kernels are timed."""
    import torch

    import bench

    found = {"bench": bench.__version__, "torch": torch.__version__, "numpy": np.__version__}
    try:
        import faiss

        found["faiss"] = faiss.__version__
    except ImportError:
        pass
    return found


def report_dict(report: PerfReport) -> dict[str, Any]:
    """The report as plain JSON-ready data (the figures the README quotes)."""
    f32 = report.gflops.get("float32")
    flops = search_flops(report.settings["vocabulary"], report.settings["dim"])
    return {
        "settings": report.settings,
        "gflops": report.gflops,
        "ceiling_tokens_per_s": None if not f32 else search_ceiling(f32, flops),
        "ceilings_tokens_per_s": {dtype: search_ceiling(g, flops) for dtype, g in report.gflops.items() if g},
        "target_ratio": TARGET_RATIO,
        "mechanisms": [_timing_dict(report, t) for t in report.timings],
        "machine": report.machine,
        "versions": report.versions,
    }


def _timing_dict(report: PerfReport, timing: Timing) -> dict[str, Any]:
    ratio = report.ratio(timing)
    ceilings = report.ceilings(timing)
    best = max(ceilings, key=ceilings.get) if ceilings else None  # the fastest dtype's exact-search ceiling
    return {
        "defense": timing.defense, "args": timing.args, "level": timing.level, "items": timing.items,
        "fit_s": timing.fit_s, "run_s": timing.run_s, "median_s": timing.median_s, "rate": timing.rate,
        "unit": timing.unit, "ceiling": report.ceiling(timing), "ratio": ratio,
        "within_target": None if ratio is None else ratio <= TARGET_RATIO,
        "over_fp32_ceiling": None if ratio is None else 1.0 / ratio,
        "ceilings": ceilings, "search_backend": timing.backend,
        "best_ceiling_dtype": best, "over_best_ceiling": None if best is None else timing.rate / ceilings[best],
        "search_s": timing.search_s,
        "search_over_best_ceiling": None if best is None or not timing.search_s
        else timing.items / timing.search_s / ceilings[best],
        "floor_s": timing.floor_s,
        "floor_ratio": None if not timing.floor_s else timing.median_s / timing.floor_s,
        "peak_mb": timing.peak_mb,
    }


def write_json(report: PerfReport, path: Path) -> None:
    """Write ``report_dict(report)`` to ``path`` (parents created; atomically)."""
    write_text_atomic(path, strict_json(report_dict(report), indent=2) + "\n")  # NaN and infinity as null


def perf_table(report: PerfReport):
    """A rich table: one row per mechanism, with the ceiling ratio flagged beyond the target."""
    from rich.table import Table

    data = report_dict(report)
    settings = data["settings"]
    ceilings = data["ceilings_tokens_per_s"]
    title = (
        f"{settings['sentences']:,} SST-2 sentences, {settings['tokens']:,} tokens · matmul GFLOP/s "
        + ", ".join(f"{dtype} {_number(g)}" for dtype, g in report.gflops.items() if g)
        + f" · exact-search ceiling {_number(data['ceiling_tokens_per_s'])} tokens/s "
        + "".join(f", {dtype} {_number(c)}" for dtype, c in ceilings.items() if dtype != "float32")
        + f" (|V| {settings['vocabulary']:,}, n {settings['dim']})"
    )
    table = Table(title=title, title_justify="left")
    for column in ("mechanism", "fit s", f"run s (median of {settings['repeats']})", "rate", "ceiling / measured",
                   "measured / fp32 ceiling", "measured / best ceiling", "search", "search s",
                   "search / best ceiling", "floor s", "run / floor", "peak MB"):
        table.add_column(column, justify="left" if column == "mechanism" else "right")
    for row in data["mechanisms"]:
        ratio = row["ratio"]
        verdict = "" if ratio is None else f"{ratio:.2f}×" + ("" if row["within_target"] else f"  > {TARGET_RATIO:g}×")
        table.add_row(row["defense"], f"{row['fit_s']:.3f}", f"{row['median_s']:.3f}",
                      f"{_number(row['rate'])} {row['unit']}", verdict,
                      "" if ratio is None else f"{1 / ratio:.2f}×", _share(row["over_best_ceiling"], row),
                      row.get("search_backend") or "", "" if not row["search_s"] else f"{row['search_s']:.3f}",
                      _share(row["search_over_best_ceiling"], row),
                      "" if not row.get("floor_s") else f"{row['floor_s']:.3f}",
                      "" if not row.get("floor_ratio") else f"{row['floor_ratio']:.2f}×",
                      "" if row.get("peak_mb") is None else f"{row['peak_mb']:,.0f}",
                      style=None if ratio is None or row["within_target"] else "red")
    machine = report.machine
    notes = []
    if "torch_threads" in machine:
        notes.append(f"torch threads {machine['torch_threads']} of {machine.get('cpu_count')} CPUs")
    if "load_average" in machine:
        notes.append(f"load average {machine['load_average'][0]}")
    table.caption = ", ".join(notes) or None
    return table


def _share(value: float | None, row: dict) -> str:
    """``0.42× (bfloat16)``: a rate over the fastest dtype's ceiling, named."""
    return "" if value is None else f"{value:.2f}× ({row['best_ceiling_dtype']})"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
