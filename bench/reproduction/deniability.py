"""Plausible deniability statistics of a token-level text mechanism (``bench analyze deniability``).

Papers: Oluwaseyi Feyisetan, Borja Balle, Thomas Drake, Tom Diethe. "Privacy- and Utility-Preserving
Textual Analysis via Calibrated Multivariate Perturbations." WSDM 2020 (choosing the privacy parameter
from plausible deniability statistics); Chen Qu, Weize Kong, Liu Yang, Mingyang Zhang, Michael
Bendersky, Marc Najork. "Natural Language Understanding with Privacy-Preserving BERT." CIKM 2021,
§5.3 and Fig. 4 (the same statistics for the text-to-text mechanism over BERT's WordPiece table).

Each sampled vocabulary token w is perturbed T times at each eta. Two counts are kept per token:

- ``N_w``: how many of the T outputs equal w, an estimate of T·Pr[M(w) = w]. Small is deniable.
- ``S_w``: how many distinct tokens the T outputs hold, w included when it came back. It estimates the effective
  support of M(w). Large is deniable.

Their distributions over tokens are reported per eta as quantiles. Two rules choose eta; the thresholds are options.

- Worst case: the largest eta at which every token (``quantile`` 1) has N_w/T at most ``max_unchanged`` (0.5).
  So every token is modified at least 500 times in 1,000. Qu et al. put no bound on S_w (``min_support`` 1). These
  defaults are Qu et al.'s (§5.3, after Feyisetan et al.). A ``quantile`` below 1 and a ``min_support`` above 1
  give a looser rule: 0.95 and 10 leave out the 5% least protected tokens and ask for 10 distinct outputs.
- Average case: the same bounds on the mean of N_w/T and of S_w over the vocabulary tokens. This is our reading.
  Qu et al.'s "average case" weighs tokens by their frequency in a corpus (§5.4: the share of a dataset's tokens
  that the mechanism changes). The dchi-text sweep's records report that share.

Qu et al. §5.3 (``../shared/papers/qu2021_privacy_preserving_bert.txt``) perturb each regular token 1,000 times
per eta. Regular tokens exclude [PAD], [CLS], [SEP], [MASK], [UNK] and [unused...]. N_w counts the outputs equal to
the input; S_w counts the unique outputs, the input among them when it comes back. Both are computed as here.

Deviation: Qu et al. perturb *every* regular token. The default here is a seeded sample of 200. ``--tokens all`` is
their setting, and resumable (docs/analyses.md gives its cost). On a sample, "every token" means every *sampled* token.
Its largest N_w can only fall short of the vocabulary's, so the eta it selects is at least the vocabulary's.

Expected N_w grows with eta: the token's Voronoi cell is convex and the noise radius shrinks. S_w falls with eta.
It also shrinks at very small eta, where the noise dwarfs the table and only tokens on its convex hull come out.
So a rule selects the upper end of the first run of grid etas that meet it, scanning upwards. A sampling blip
above a failing eta is never selected.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bench.core.errors import BenchError
from bench.core.files import atomic_writer
from bench.core.journal import Journal
from bench.core.jsontext import readable_json
from bench.core.params import build_component
from bench.core.progress import track
from bench.core.registry import DEFENSES
from bench.core.seeding import numpy_generator
from bench.engine.provenance import git_sha
from bench.models.loading import load_encoder
from bench.privacy.mechanisms import dchi_token_text, exponential_sample
from bench.privacy.token_space import WordPieceSpace

DEFAULT_TOKENS = 200  # a seeded vocabulary sample: every regular token (--tokens all) costs ~150x more
DEFAULT_TRIALS = 1000  # perturbations of each token at each eta (T)
# all-MiniLM-L6-v2 (384 dims): the committed dchi-text sweep on SST-2 leaves 1% of the tokens unchanged
# at eta 30, a quarter at 60 and 96% at 120; the grid spans that transition.
DEFAULT_ETAS = (30.0, 45.0, 60.0, 80.0, 100.0, 120.0, 160.0)
DEFAULT_MECHANISM = "dchi-text"
CHUNK_QUERIES = 16_384  # queries per mechanism call; the float64 noise of one call is ~50 MB at 384 dims
CALIBRATION_QUERIES = 4_096  # timed before the run to estimate its duration
SCHEMA_VERSION = 1

# One perturbation function per mechanism: (tokens (k,), trials T, table, candidates, parameter, rng)
# -> outputs (k, T), each row T independent releases of one token.
Perturb = Callable[[np.ndarray, int, np.ndarray, np.ndarray, float, np.random.Generator], np.ndarray]


def dchi_text_trials(
    tokens: np.ndarray, trials: int, table: np.ndarray, candidates: np.ndarray, eta: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """d_chi text-to-text (M_txt): ``trials`` releases of every token, ``(len(tokens), trials)``."""
    repeated = np.repeat(np.asarray(tokens, dtype=np.int64), trials)
    return dchi_token_text([repeated], table, candidates, eta, rng)[0].reshape(len(tokens), trials)


def santext_trials(
    tokens: np.ndarray, trials: int, table: np.ndarray, candidates: np.ndarray, eps: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """SanText's exponential mechanism (parameter eps): ``trials`` releases of every token."""
    repeated = np.repeat(np.asarray(tokens, dtype=np.int64), trials)
    return exponential_sample(repeated, table, candidates, eps, rng).reshape(len(tokens), trials)


MECHANISMS: dict[str, Perturb] = {"dchi-text": dchi_text_trials, "santext": santext_trials}
# The default parameter grid of each mechanism (eta for d_chi, eps for SanText); the SanText grid spans
# the committed SST-2 sweep, from almost every token replaced (eps 4) to almost none (eps 40).
DEFAULT_PARAMETERS = {"dchi-text": DEFAULT_ETAS, "santext": (4.0, 7.0, 10.0, 14.0, 20.0, 30.0, 40.0)}
PARAMETER_NAMES = {"dchi-text": "eta", "santext": "eps"}


@dataclass(frozen=True)
class Thresholds:
    """The bounds a privacy parameter must meet to be selected.

    The defaults are Qu et al.'s worst case (§5.3): every token modified at least 500 times in 1,000, and no bound
    on S_w.
    """

    max_unchanged: float = 0.5  # N_w / T at most this: a token comes back unchanged at most this often
    min_support: int = 1  # S_w at least this: distinct outputs among the T releases of a token (1 = no bound)
    quantile: float = 1.0  # worst case: this quantile of N_w/T and the (1 - quantile) quantile of S_w (1 = every token)


def parse_token_count(text: str | int) -> int | None:
    """``"200"`` -> 200, ``"all"`` -> None (every regular token); anything else is a BenchError."""
    if isinstance(text, int):
        count = text
    elif str(text).strip().lower() == "all":
        return None
    else:
        try:
            count = int(str(text).strip())
        except ValueError:
            raise BenchError(f"--tokens must be a positive number or 'all', got '{text}'.") from None
    if count < 1:
        raise BenchError(f"--tokens must be >= 1 (or 'all'), got {count}.")
    return count


def validate(etas: Sequence[float], trials: int, mechanism: str, thresholds: Thresholds) -> None:
    """Check every parameter before anything is loaded; a bad one is one BenchError sentence."""
    import difflib

    if mechanism not in MECHANISMS:
        close = difflib.get_close_matches(mechanism, list(MECHANISMS), n=3, cutoff=0.4)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise BenchError(f"unknown mechanism '{mechanism}'; known: {', '.join(MECHANISMS)}.{hint}")
    if not etas:
        raise BenchError("give at least one --eta.")
    bad = [e for e in etas if not (math.isfinite(e) and e > 0)]
    if bad:
        raise BenchError(f"eta must be > 0 and finite, got {bad[0]}.")
    for value in etas:  # the range declared beside the defense's parameter (bench.core.params.within)
        build_component(DEFENSES.get(mechanism), {PARAMETER_NAMES[mechanism]: float(value)})
    if trials < 1:
        raise BenchError(f"--trials must be >= 1, got {trials}.")
    if not 0 <= thresholds.max_unchanged <= 1:
        raise BenchError(f"--max-unchanged must be in [0, 1], got {thresholds.max_unchanged}.")
    if thresholds.min_support < 1:
        raise BenchError(f"--min-support must be >= 1, got {thresholds.min_support}.")
    if not 0 < thresholds.quantile <= 1:
        raise BenchError(f"--quantile must be in (0, 1], got {thresholds.quantile}.")


def sample_tokens(candidates: np.ndarray, count: int | None, seed: int) -> np.ndarray:
    """``count`` distinct candidate ids drawn with the seed (all of them for None), sorted."""
    candidates = np.asarray(candidates, dtype=np.int64)
    if count is None:
        return np.sort(candidates)
    if count > len(candidates):
        raise BenchError(f"--tokens {count} exceeds the {len(candidates)} regular vocabulary tokens; "
                         f"use --tokens all.")
    order = numpy_generator(seed, "deniability", "token-sample").permutation(len(candidates))
    return np.sort(candidates[order[:count]])


def token_statistics(outputs: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per token (row): N_w, the outputs equal to the token, and S_w, the distinct outputs."""
    unchanged = (outputs == np.asarray(tokens)[:, None]).sum(axis=1)
    ordered = np.sort(outputs, axis=1)
    distinct = 1 + (np.diff(ordered, axis=1) != 0).sum(axis=1)
    return unchanged.astype(np.int64), distinct.astype(np.int64)


def perturbation_statistics(
    tokens: np.ndarray, table: np.ndarray, candidates: np.ndarray, etas: Sequence[float], trials: int,
    seed: int, mechanism: str = DEFAULT_MECHANISM, chunk_queries: int = CHUNK_QUERIES,
    log: Callable[[str], None] = lambda message: None, tally: dict[str, int] | None = None,
) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """N_w and S_w of every token at every eta: ``{eta: (n_w, s_w)}``, arrays aligned with ``tokens``.

    Tokens are perturbed ``chunk_queries // trials`` at a time, all T copies in one mechanism call. Each (eta,
    chunk) draws from its own generator. So an eta's figures depend neither on the other etas nor on the order of
    the work. That makes a long run (``--tokens all``) resumable. Each finished chunk is checkpointed per eta
    (``bench.core.journal``, keyed by the mechanism, the table, the tokens, T, the seed and eta). A rerun computes
    only the chunks left, with the figures one uninterrupted run gives. ``tally``, if given, receives the number of
    chunks (``chunks``) and how many an earlier run had finished (``resumed_chunks``). So a report can say that its
    runtime is not the whole computation's.
    """
    import hashlib

    perturb = MECHANISMS[mechanism]
    per_call = max(1, chunk_queries // trials)
    tokens = np.asarray(tokens, dtype=np.int64)
    digest = hashlib.sha256(np.ascontiguousarray(table).tobytes())
    digest.update(np.asarray(candidates, dtype=np.int64).tobytes())
    digest.update(tokens.tobytes())
    journals = {float(eta): Journal("deniability", (mechanism, digest.hexdigest(), trials, seed, per_call,
                                                    float(eta))) for eta in etas}
    resumed = sum(j.resumed for j in journals.values())
    if resumed:
        log(f"resuming: {resumed:,} token chunks were finished by an earlier run")
    if tally is not None:
        tally.update(chunks=len(etas) * len(range(0, len(tokens), per_call)), resumed_chunks=resumed)
    jobs = [(float(eta), start) for eta in etas for start in range(0, len(tokens), per_call)
            if start not in journals[float(eta)].done]
    finished = False
    try:
        for eta, start in track(jobs, description=f"perturbing {len(tokens)} tokens × {trials}", total=len(jobs)):
            chunk = tokens[start : start + per_call]
            rng = numpy_generator(seed, "deniability", mechanism, repr(eta), str(start))
            unchanged, distinct = token_statistics(perturb(chunk, trials, table, candidates, eta, rng), chunk)
            journals[eta].record(start, [unchanged.tolist(), distinct.tolist()])
        finished = True
    finally:
        for journal in journals.values():
            journal.close(finished)
    found = {}
    for eta, journal in journals.items():
        unchanged, distinct = np.zeros(len(tokens), np.int64), np.zeros(len(tokens), np.int64)
        for start, (n_w, s_w) in journal.done.items():
            unchanged[start : start + len(n_w)] = n_w
            distinct[start : start + len(s_w)] = s_w
        found[eta] = (unchanged, distinct)
    return found


def summarize(unchanged: np.ndarray, distinct: np.ndarray, trials: int) -> dict[str, float]:
    """Mean, median, 5% and 95% quantiles of N_w and S_w, and the share of tokens never changed."""
    summary: dict[str, float] = {}
    for name, values in (("n_w", unchanged), ("s_w", distinct)):
        summary[f"{name}_mean"] = float(np.mean(values))
        summary[f"{name}_median"] = float(np.median(values))
        summary[f"{name}_q05"] = float(np.quantile(values, 0.05))
        summary[f"{name}_q95"] = float(np.quantile(values, 0.95))
    summary["always_unchanged"] = float(np.mean(unchanged == trials))
    return summary


def _worst_case(unchanged: np.ndarray, distinct: np.ndarray, trials: int, bounds: Thresholds) -> dict[str, bool]:
    return {
        "n_w": float(np.quantile(unchanged / trials, bounds.quantile)) <= bounds.max_unchanged,
        "s_w": float(np.quantile(distinct, 1 - bounds.quantile)) >= bounds.min_support,
    }


def _average_case(unchanged: np.ndarray, distinct: np.ndarray, trials: int, bounds: Thresholds) -> dict[str, bool]:
    return {
        "n_w": float(np.mean(unchanged / trials)) <= bounds.max_unchanged,
        "s_w": float(np.mean(distinct)) >= bounds.min_support,
    }


RULES = {"worst_case": _worst_case, "average_case": _average_case}


def rule_text(rule: str, bounds: Thresholds) -> str:
    """The condition of a selection rule in words, for tables and the JSON file."""
    support = f" and {{}} S_w >= {bounds.min_support}" if bounds.min_support > 1 else ""
    if rule == "worst_case":
        q = bounds.quantile
        if q == 1.0:
            return f"every token's N_w/T <= {bounds.max_unchanged:g}" + support.format("every token's")
        return f"{q:g} quantile of N_w/T <= {bounds.max_unchanged:g}" + support.format(f"{1 - q:.2g} quantile of")
    return f"mean N_w/T <= {bounds.max_unchanged:g}" + support.format("mean")


def _largest_passing(etas: list[float], passed: list[bool]) -> float | None:
    """The upper end of the first run of passing etas, scanning the grid upwards (None if none passes)."""
    chosen = None
    for eta, ok in zip(etas, passed):
        if ok:
            chosen = eta
        elif chosen is not None:
            break
    return chosen


def select_etas(
    stats: dict[float, tuple[np.ndarray, np.ndarray]], trials: int, bounds: Thresholds
) -> dict[str, dict[str, Any]]:
    """The eta each rule selects, overall and per statistic (None when even the smallest eta fails)."""
    etas = sorted(stats)
    selections: dict[str, dict[str, Any]] = {}
    for rule, check in RULES.items():
        verdicts = [check(*stats[eta], trials, bounds) for eta in etas]
        selections[rule] = {
            "eta": _largest_passing(etas, [all(v.values()) for v in verdicts]),
            "by_statistic": {s: _largest_passing(etas, [v[s] for v in verdicts]) for s in ("n_w", "s_w")},
            "rule": rule_text(rule, bounds),
        }
    return selections


@dataclass
class TokenSpace:
    """What the analysis needs from an encoder: its regular vocabulary and input embedding table."""

    table: np.ndarray
    candidates: np.ndarray
    revision: str
    token_names: Callable[[np.ndarray], list[str]]


def load_space(encoder_name: str) -> TokenSpace:
    """The encoder's WordPiece table and regular token ids (special tokens are never inputs or outputs)."""
    encoder = load_encoder(encoder_name)
    space = WordPieceSpace(encoder)
    return TokenSpace(space.table, space.candidates, str(encoder.revision),
                      lambda ids: encoder.tokenizer.convert_ids_to_tokens([int(i) for i in ids]))


def calibrate(space: TokenSpace, mechanism: str, eta: float, trials: int, seed: int) -> float:
    """Queries per second of the mechanism on this machine (one short warm-up call, one timed call)."""
    perturb = MECHANISMS[mechanism]
    rng = numpy_generator(seed, "deniability", "calibration")
    tokens = space.candidates[:2]
    perturb(tokens, 8, space.table, space.candidates, eta, rng)  # loads kernels and the index code
    count = max(1, min(CALIBRATION_QUERIES // trials, 64))
    per_token = max(1, CALIBRATION_QUERIES // count)
    start = time.perf_counter()
    perturb(space.candidates[:count], per_token, space.table, space.candidates, eta, rng)
    return count * per_token / max(time.perf_counter() - start, 1e-9)


def command_line(encoder: str, mechanism: str, tokens: int | None, trials: int, etas: Sequence[float],
                 seed: int, bounds: Thresholds) -> str:
    """The ``bench analyze deniability`` call that reproduces a run, every option spelled out."""
    parts = ["bench analyze deniability", f"--encoder {encoder}", f"--mechanism {mechanism}",
             f"--tokens {'all' if tokens is None else tokens}", f"--trials {trials}",
             *(f"--eta {eta:g}" for eta in etas), f"--seed {seed}",
             f"--max-unchanged {bounds.max_unchanged:g}", f"--min-support {bounds.min_support}",
             f"--quantile {bounds.quantile:g}"]
    return " ".join(parts)


def run_deniability(
    encoder: str = "minilm", mechanism: str = DEFAULT_MECHANISM, tokens: int | None = DEFAULT_TOKENS,
    trials: int = DEFAULT_TRIALS, etas: Sequence[float] = DEFAULT_ETAS, seed: int = 0,
    bounds: Thresholds = Thresholds(), log: Callable[[str], None] = lambda message: None,
) -> dict[str, Any]:
    """Perturb the sampled tokens at every eta and return the JSON-ready report (nothing written)."""
    etas = sorted({float(e) for e in etas})
    validate(etas, trials, mechanism, bounds)
    started = time.perf_counter()
    space = load_space(encoder)
    sampled = sample_tokens(space.candidates, tokens, seed)
    queries = len(sampled) * trials * len(etas)
    dim = space.table.shape[1]
    work = "exact nearest-neighbour queries" if mechanism.startswith("dchi") else "exponential-mechanism draws"
    log(f"planned: {len(sampled):,} tokens × {trials:,} trials × {len(etas)} {PARAMETER_NAMES.get(mechanism, 'eta')} "
        f"= {queries:,} {work} over {len(space.candidates):,} × {dim} ({mechanism})")
    rate = calibrate(space, mechanism, etas[len(etas) // 2], trials, seed)
    log(f"measured {rate:,.0f} queries/s here: about {_duration(queries / rate)}")
    tally: dict[str, int] = {}
    stats = perturbation_statistics(sampled, space.table, space.candidates, etas, trials, seed, mechanism,
                                    log=log, tally=tally)
    return {
        "schema_version": SCHEMA_VERSION,
        "analysis": "deniability",
        "mechanism": mechanism,
        "parameter": PARAMETER_NAMES.get(mechanism, "eta"),  # the report's "eta" keys hold this parameter
        "encoder": encoder,
        "encoder_revision": space.revision,
        "vocabulary": int(len(space.candidates)),
        "dim": int(dim),
        "trials": trials,
        "token_sample": "all" if tokens is None else "seeded",
        "tokens": int(len(sampled)),
        "seed": seed,
        "etas": etas,
        "thresholds": asdict(bounds),
        "selections": select_etas(stats, trials, bounds),
        "token_ids": sampled.tolist(),
        "token_names": space.token_names(sampled),
        "per_eta": [
            {"eta": eta, "mean_noise_radius": dim / eta if mechanism.startswith("dchi") else None,
             **summarize(*stats[eta], trials),
             "n_w": stats[eta][0].tolist(), "s_w": stats[eta][1].tolist()}
            for eta in etas
        ],
        "queries": queries,
        "queries_per_s_calibrated": rate,
        "command": command_line(encoder, mechanism, tokens, trials, etas, seed, bounds),
        "runtime_s": round(time.perf_counter() - started, 1),
        **tally,  # runtime_s covers only this run's chunks when resumed_chunks > 0
        "versions": _versions(),
        "hardware": _hardware(),
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


# What makes two reports the same run, so that one's etas can be added to the other's: every eta's figures depend
# only on these and on that eta (each (eta, chunk) draws from its own generator).
SAME_RUN_FIELDS = ("analysis", "mechanism", "parameter", "encoder", "encoder_revision", "vocabulary", "dim", "trials",
                   "token_sample", "token_ids", "seed", "thresholds")
# Fields that describe one invocation, kept per run in ``earlier_runs`` when reports are merged.
RUN_FIELDS = ("etas", "queries", "queries_per_s_calibrated", "command", "runtime_s", "chunks", "resumed_chunks",
              "versions", "hardware", "created_at")


def planned_identity(encoder: str, mechanism: str, tokens: int | None, trials: int, seed: int,
                     bounds: Thresholds) -> dict[str, Any]:
    """The same-run fields a run will have that are known before the encoder loads (for an early ``--merge`` check)."""
    return {"analysis": "deniability", "mechanism": mechanism, "encoder": encoder, "trials": trials,
            "token_sample": "all" if tokens is None else "seeded", "seed": seed, "thresholds": asdict(bounds),
            **({} if tokens is None else {"tokens": tokens})}


def load_mergeable(path: Path, planned: dict[str, Any]) -> dict[str, Any] | None:
    """The existing report at ``path`` if there is one and the planned run can be added to it (else one sentence)."""
    import json

    if not path.exists():
        return None
    try:
        existing = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise BenchError(f"cannot merge into {path}: it is not a readable report ({error}).") from None
    _check_same_run(str(path), existing, planned)
    return existing


def _check_same_run(name: str, existing: dict[str, Any], expected: dict[str, Any]) -> None:
    differing = [field for field, value in expected.items() if existing.get(field) != value]
    if differing:
        raise BenchError(f"cannot merge into {name}: it is another run (its {', '.join(differing)} differ); drop "
                         f"--merge to replace it, or use another --results-dir.")


def merge_reports(earlier: dict[str, Any], latest: dict[str, Any]) -> dict[str, Any]:
    """One report over the etas of both runs of the same analysis (``--merge``), selections redone on the union.

    An eta measured by both keeps the latest figures, which must equal the earlier ones (same seed, same chunks).
    The top-level provenance is the latest run's; ``earlier_runs`` keeps each earlier invocation's, and
    ``queries`` counts all of them.
    """
    _check_same_run("the existing report", earlier, {field: latest.get(field) for field in SAME_RUN_FIELDS})
    rows = {row["eta"]: row for row in earlier["per_eta"]}
    for row in latest["per_eta"]:
        kept = rows.get(row["eta"])
        if kept is not None and (kept["n_w"], kept["s_w"]) != (row["n_w"], row["s_w"]):
            raise BenchError(f"cannot merge: eta {row['eta']:g} is in both reports with different counts, so they "
                             f"are not the same computation.")
        rows[row["eta"]] = row
    etas = sorted(rows)
    trials = latest["trials"]
    stats = {eta: (np.asarray(rows[eta]["n_w"]), np.asarray(rows[eta]["s_w"])) for eta in etas}
    bounds = Thresholds(**latest["thresholds"])
    earlier_runs = [*earlier.get("earlier_runs", []), {field: earlier.get(field) for field in RUN_FIELDS}]
    merged = {**latest, "etas": etas, "selections": select_etas(stats, trials, bounds),
              "per_eta": [rows[eta] for eta in etas],
              "queries": latest["queries"] + sum(run["queries"] for run in earlier_runs),
              "command": command_line(latest["encoder"], latest["mechanism"],
                                      None if latest["token_sample"] == "all" else latest["tokens"], trials, etas,
                                      latest["seed"], bounds),
              "earlier_runs": earlier_runs}
    return merged


def report_path(root: Path | str, encoder: str, mechanism: str = DEFAULT_MECHANISM, whole: bool = False) -> Path:
    """``<root>/analysis/deniability-<encoder>.json``, named so that analyses sit side by side.

    ``-<mechanism>`` is added for other mechanisms, ``-all`` for the whole vocabulary.
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", encoder)
    if mechanism != DEFAULT_MECHANISM:
        name += "-" + re.sub(r"[^A-Za-z0-9._-]+", "_", mechanism)
    if whole:
        name += "-all"
    return Path(root) / "analysis" / f"deniability-{name}.json"


def write_report(report: dict[str, Any], path: Path) -> Path:
    """Write the report atomically: a temporary file in the same folder, fsynced, then renamed."""
    path = Path(path)
    with atomic_writer(path) as stream:
        stream.write(readable_json(report) + "\n")  # per-token arrays on one line each, not one number per line
    return path


def deniability_table(report: dict[str, Any]):
    """A rich table: one row per eta, the quantiles of N_w and S_w and the share never changed."""
    from rich.table import Table

    trials = report["trials"]
    table = Table(title=f"plausible deniability · {report['mechanism']} · {report['encoder']} · "
                        f"{report['tokens']:,} tokens × T={trials:,}", title_justify="left")
    parameter = report.get("parameter", "eta")
    for column in (parameter, "radius n/eta", "N_w mean", "N_w median", "N_w 5%", "N_w 95%",
                   "S_w mean", "S_w median", "S_w 5%", "S_w 95%", "N_w = T"):
        table.add_column(column, justify="right")
    for row in report["per_eta"]:
        radius = row.get("mean_noise_radius")
        table.add_row(f"{row['eta']:g}", "-" if radius is None else f"{radius:.2f}",
                      *(f"{row[f'{s}_{k}']:.1f}" for s in ("n_w", "s_w") for k in ("mean", "median", "q05", "q95")),
                      f"{row['always_unchanged']:.3f}")
    return table


def deniability_markdown(report: dict[str, Any], source: str) -> str:
    """A report as a section of Markdown.

    It gives what was perturbed, one row per eta (``deniability_table``'s columns), the selections, and the command
    that made it (``source``: the report's file).
    """
    parameter = report.get("parameter", "eta")
    scope = "every regular token" if report["tokens"] == report.get("vocabulary") else \
        f"a seeded sample of {report['tokens']:,} regular tokens"
    lines = [f"### {report['mechanism']} on {report['encoder']}, {scope}", "",
             f"Each token released T = {report['trials']:,} times at each {parameter} (`{report['command']}`, "
             f"written to `{source}`).", "",
             f"| {parameter} | radius n/{parameter} | N_w mean | N_w median | N_w 5% | N_w 95% | S_w mean | S_w median "
             "| S_w 5% | S_w 95% | N_w = T |", "|" + "---:|" * 11]
    for row in report["per_eta"]:
        radius = row.get("mean_noise_radius")
        cells = [f"{row['eta']:g}", "-" if radius is None else f"{radius:.2f}",
                 *(f"{row[f'{s}_{k}']:.1f}" for s in ("n_w", "s_w") for k in ("mean", "median", "q05", "q95")),
                 f"{row['always_unchanged']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *(f"- {line}" for line in selection_lines(report)), ""]
    return "\n".join(lines)


def selection_lines(report: dict[str, Any]) -> list[str]:
    """One line per selection rule: the chosen eta and its condition."""
    lines = []
    for rule, chosen in report["selections"].items():
        name = report.get("parameter", "eta")
        eta = "none of the grid" if chosen["eta"] is None else f"{name} = {chosen['eta']:g}"
        per = ", ".join(f"{s} alone: {'-' if e is None else f'{e:g}'}" for s, e in chosen["by_statistic"].items())
        lines.append(f"{rule.replace('_', ' ')}: {eta} ({chosen['rule']}; {per})")
    return lines


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _versions() -> dict[str, str]:
    import bench
    found = {"bench": bench.__version__, "git_sha": git_sha(), "numpy": np.__version__}
    for module in ("torch", "transformers", "faiss"):
        try:
            found[module] = __import__(module).__version__
        except ImportError:
            pass
    return found


def _hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                            "processor": platform.processor() or platform.machine()}
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return info
