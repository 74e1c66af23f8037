"""``bench audit``: the local token mechanisms audited against the privacy loss they claim.

A registered token defense (dchi-token, dchi-text, santext, santext-plus) is built from its arguments, its
mechanism fitted as a client would (SanText+'s sensitive set from the token counts of public text: the audit needs
a split of the vocabulary, not any client's), and pairs of tokens at known distances in its own space audited by
bench.privacy.audit. ``leak`` wraps the mechanism in a planted bug, to show what a failed audit looks like.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bench import __version__
from bench.core.components import TokenDefense
from bench.core.errors import BenchError
from bench.core.files import write_text_atomic
from bench.core.jsontext import strict_json
from bench.core.params import build_component, component_args
from bench.core.registry import DEFENSES
from bench.core.seeding import numpy_generator
from bench.data.public_corpus import public_corpus
from bench.engine.provenance import git_sha, hardware
from bench.models.loading import check_encoder, load_encoder
from bench.privacy.audit import LeakyMechanism, audit, auditable, neighbour_pairs, sensitive_set
from bench.privacy.token_space import space_of

RANKS = (1, 10, 100, 1000)  # the anchor's 1st, 10th, 100th and 1000th nearest tokens: near to far pairs
FIT_CORPUS = "auto"  # public text whose token counts fit SanText+'s sensitive set


def parse_ranks(text: str) -> tuple[int, ...]:
    """``"1,10,100"`` -> (1, 10, 100); anything else raises ``BenchError``."""
    try:
        ranks = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        ranks = ()
    if not ranks or min(ranks) < 1:
        raise BenchError(f"--ranks must be positive integers separated by commas, as in 1,10,100; got '{text}'.")
    return ranks


def build_audited(defense: str, defense_args: str = "") -> TokenDefense:
    """The token defense to audit, refused in one sentence if the audit knows no claim of its mechanism."""
    built = build_component(DEFENSES.get(defense), defense_args or None)
    if not isinstance(built, TokenDefense) or not auditable(built.token_mechanism()):
        known = ", ".join(name for name in DEFENSES.names() if _audits(name))
        raise BenchError(f"defense '{defense}' has no token mechanism with a claim the audit checks; "
                         f"choose from {known}.")
    return built


def _audits(name: str) -> bool:
    cls = DEFENSES.get(name)
    if not issubclass(cls, TokenDefense):
        return False
    try:
        return auditable(build_component(cls, None).token_mechanism())
    except (BenchError, NotImplementedError, TypeError):
        return False


def load_space(defense: TokenDefense, encoder: str):
    """The defense's token space (the encoder's WordPieces, or its word-vector file)."""
    return space_of(defense.token_space(), load_encoder(encoder))


def fit_ids(space, sentences: int, seed: int) -> list[np.ndarray]:
    """Token ids of ``sentences`` public sentences, in the space (words missing from a vector file drawn at random,
    as a client's are)."""
    texts, _, _ = public_corpus(FIT_CORPUS, n=sentences, seed=seed)
    return space.client_ids(texts, numpy_generator(seed, "audit-oov"))


def token_text(space, token: int) -> str:
    """The token's text: its WordPiece or its word."""
    words = getattr(space, "words", None)
    if words is not None:
        return words[token]
    tokenizer = getattr(getattr(space, "encoder", None), "tokenizer", None)
    return tokenizer.convert_ids_to_tokens(int(token)) if tokenizer is not None else str(token)


def run_audit(defense: str, defense_args: str = "", encoder: str = "minilm", anchors: int = 3,
              ranks: tuple[int, ...] = RANKS, trials: int = 10000, alpha: float = 0.05, seed: int = 0,
              leak: float = 0.0, fit_sentences: int = 2000,
              progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Audit the defense's mechanism on ``anchors`` × ``ranks`` pairs, ``trials`` releases of each token."""
    if trials < 2:
        raise BenchError(f"--trials must be at least 2, got {trials}.")
    if not 0 < alpha < 1:
        raise BenchError(f"--alpha must be in (0, 1), got {alpha}.")
    if not 0 <= leak < 1:
        raise BenchError(f"--leak must be in [0, 1), got {leak}.")
    if anchors < 1 or fit_sentences < 1:
        raise BenchError(f"--anchors and --fit-sentences must be at least 1, got {anchors} and {fit_sentences}.")
    built = build_audited(defense, defense_args)
    check_encoder(encoder)
    progress(f"loading the token space of {encoder}")
    space = load_space(built, encoder)
    mechanism = built.token_mechanism()
    progress("fitting the mechanism on public text")
    mechanism.fit(fit_ids(space, fit_sentences, seed), space)
    if leak:
        mechanism = LeakyMechanism(mechanism, leak)
    pairs = neighbour_pairs(space, anchors, ranks, numpy_generator(seed, "audit-pairs"), sensitive_set(mechanism))
    progress(f"auditing {len(pairs)} pairs, {trials} releases of each token")
    results = audit(mechanism, space, pairs, trials, alpha, numpy_generator(seed, "audit-releases"))
    sensitive = sensitive_set(mechanism)
    return {
        "defense": defense, "args": component_args(built), "mechanism": mechanism.describe(), "leak": leak,
        "encoder": encoder, "space": space.format, "tokens": len(space.candidates), "dim": int(space.table.shape[1]),
        "sensitive_tokens": None if sensitive is None else int(len(sensitive)), "anchors": anchors,
        "ranks": list(ranks), "trials": trials, "alpha": alpha, "seed": seed, "fit_sentences": fit_sentences,
        "pairs": [r.as_dict() | {"token": token_text(space, r.x), "token_prime": token_text(space, r.x_prime)}
                  for r in results],
        "exceeded": sum(r.exceeds for r in results),
        # what made it: the commit (a published audit needs a committed tree) and the machine
        "versions": {"bench": __version__, "git_sha": git_sha()}, "hardware": hardware("cpu"),
    }


def _number(value: float | str | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    value = float(value)  # a published audit writes an infinity as "inf" (write_json)
    return "∞" if value == np.inf else "-∞" if value == -np.inf else f"{value:.{digits}f}"


def audit_rows(report: dict[str, Any]) -> list[list[str]]:
    """The table's rows: pair, distance, claim, audited bound, its event's estimate, the largest bound the trials
    allow, the exact loss, trials, verdict."""
    rows = []
    for pair in report["pairs"]:
        verdict = "EXCEEDS" if pair["exceeds"] else "ok"
        if pair["violations"]:
            verdict += f" ({pair['violations']} unprotected leaks)"
        rows.append([f"{pair['token']} / {pair['token_prime']}" + (f" ({pair['kind']})" if pair["kind"] else ""),
                     f"{pair['distance']:.3f}", _number(pair["claim"]), _number(pair["lower"]),
                     _number(pair["estimate"]),
                     _number(pair["ceiling"]), _number(pair["exact"]), str(pair["trials"]), verdict])
    return rows


HEADERS = ("pair x / x'", "d(x, x')", "claimed ε·d", "audited ≥", "event estimate", "trials' ceiling", "exact",
           "trials", "verdict")


def audit_table(report: dict[str, Any]):
    """The report as a rich table."""
    from rich.table import Table

    args = ", ".join(f"{k}={v}" for k, v in report["args"].items())
    title = (f"{report['defense']} ({args}) on {report['encoder']}: audited privacy loss at "
             f"{1 - report['alpha']:.0%} confidence (all pairs at once)")
    if report["leak"]:
        title += f", with a planted leak of rate {report['leak']}"
    table = Table(title=title)
    for header in HEADERS:
        table.add_column(header, justify="left" if header.startswith("pair") or header == "verdict" else "right")
    for row in audit_rows(report):
        table.add_row(*row)
    return table


def markdown(report: dict[str, Any]) -> str:
    """The report as a Markdown table (for the docs)."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in audit_rows(report)]
    return "\n".join(lines) + "\n"


def write_json(report: dict[str, Any], path) -> None:
    """The report as JSON, an infinite bound or estimate as the string "inf" (strict JSON has no infinity)."""
    write_text_atomic(path, strict_json(report, spell_infinity=True, indent=2, default=str))


def caption(report: dict[str, Any]) -> str:
    """One sentence that says what an audit ran: mechanism, space, pairs, releases, confidence, seed, machine."""
    args = ", ".join(f"{k}={v}" for k, v in report["args"].items())
    machine = report.get("hardware", {})
    where = ", ".join(str(p) for p in (machine.get("cpu_model"), machine.get("cpu_capability")) if p)
    leak = f", with a planted leak of rate {report['leak']}" if report["leak"] else ""
    return (f"`{report['defense']}` ({args}){leak} on {report['encoder']} ({report['tokens']:,} tokens, "
            f"{report['dim']} dimensions): {len(report['pairs'])} pairs, {report['trials']:,} releases of each token, "
            f"all bounds at {1 - report['alpha']:.0%} confidence at once, seed {report['seed']}; "
            f"{report['exceeded']} pairs exceed their claim" + (f" (run on {where})." if where else "."))

