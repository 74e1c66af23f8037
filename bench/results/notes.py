"""The schema of a record's ``notes``: every key a cell may write, its type, where it appears and what it says.

Notes hold what a cell's numbers need beside them to be read: how the data was split, what the mechanism and the
server did, what the attack knew and measured about itself. Metrics never go here.

Each key is declared once, in the section of the code that writes it, with the release paths (the record's
``notes.protocol``) on which it may appear. The engine checks a new record's notes against this schema before it
writes the record (``check``): an undeclared key, or a value of another type, is a developer error. Stored records
are checked by the tests: every key of every committed record is declared here. A plugin declares its own keys with
``declare``. ``python -m bench.results.notes`` prints the schema as the docs page ``docs/record-notes.md``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

PATHS = ("tokens", "representations", "pretraining", "api")  # the release paths (``notes.protocol``)
ALL = PATHS
SPAN_PATHS = ("tokens", "pretraining", "api")  # the paths on which a span defense rewrites the client's text

SECTIONS = {  # the sections of the schema, in the order of the docs page: title, and what their keys describe
    "cell": ("Every cell", "How the cell ran, and the references read beside its numbers (bench.engine.runner, "
                           "bench.engine.reuse)."),
    "data": ("Task data", "How the task's splits were drawn and what its labels mean (each task's load())."),
    "attack": ("Attacks", "What the attack knew (PublicKnowledge.notes) and what it measured about itself (its "
                          "run_notes)."),
    "mechanism": ("Client mechanisms", "What the client's mechanism fitted or derived (a defense's describe(), a "
                                       "token mechanism's facts())."),
    "server": ("Server probe", "How the probe beside a frozen sentence server's head was fitted."),
    "tokens": ("Token path", "Text or token vectors released sentence by sentence."),
    "adaptation": ("Privacy-adaptive pretraining", "The token path's server option adapt= (Qu et al. 2021 §3.4)."),
    "dp": ("DP-SGD", "The server option dp_epsilon= (Abadi et al. 2016, bench.models.dp_sgd): the head trained with "
                     "per-example clipping, Poisson sampling and Gaussian noise."),
    "spans": ("Span rewrites", "A span defense (NDD, mask) rewriting the client's text, on the token, pretraining and "
                               "API paths."),
    "representations": ("Representation path", "Sentence representations (and gradients) released."),
    "pretraining": ("Pretraining path", "An MLM further pretrained on the client's text, its weights released."),
    "api": ("Prediction API path", "A victim served behind an API, attacked through its answers."),
}


@dataclass(frozen=True)
class Note:
    """One key of the notes: its value's types, the paths it appears on, and what it says (one line)."""

    key: str
    types: tuple[type, ...]  # int is accepted where float is declared (a JSON number)
    section: str
    comment: str
    paths: tuple[str, ...] = ALL

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has one of the declared types (a bool is no number)."""
        kinds = self.types + ((int,) if float in self.types else ())
        return isinstance(value, kinds) and not (isinstance(value, bool) and bool not in self.types)

    def type_name(self) -> str:
        return " | ".join("null" if t is type(None) else t.__name__ for t in self.types)


def _notes(section: str, paths: tuple[str, ...], *rows: tuple) -> list[Note]:
    """Rows of ``(key, type or types, comment)`` of one section."""
    return [Note(key, kinds if isinstance(kinds, tuple) else (kinds,), section, comment, paths)
            for key, kinds, comment in rows]


NONE = type(None)

_SCHEMA: list[Note] = [
    *_notes("cell", ALL,
            ("protocol", str, "the release path the cell ran: tokens, representations, pretraining or api"),
            ("public_mechanism", dict, "the client's mechanism as an attack may know it (name, defense, parameters)"),
            ("majority_utility", dict, "the task's metrics for answering the training split's most frequent label "
                                       "(class-id tasks only)"),
            ("release_digest", str, "SHA-256 of the attacked release, taken before the attack ran"),
            ("attack_s", float, "seconds the attack and its random reference took"),
            ("reuse", str, "why a stored release was not reused (the cell ran in full, or was regenerated)"),
            ("reused_from", str, "run id of the record whose release and utility the cell reused"),
            ("reused", str, "what the cell reused from that record, and how it was verified"),
            ("smoke_budget", list, "what a --check cell built at the smoke budget (its numbers test plumbing only)"),
            ("majority_utility_backfilled", str, "majority_utility was computed afterwards by `bench backfill` from "
                                                 "the cell's data (data hash checked)")),
    *_notes("data", ALL,
            ("eval_split", str, "what the evaluation split is (e.g. GLUE dev), and how it was carved when not given"),
            ("context_window", str, "SQuAD: the window of the passage the reader sees, in training and evaluation"),
            ("eval_coverage", float, "SQuAD: share of evaluation questions whose gold answer lies in their window"),
            ("preprocessing", str, "PTB: what was removed or stripped from the trees"),
            ("metric", str, "PTB: the evalb parameters of the bracket scores"),
            ("alignment", str, "tagging and parsing: how labels of words meet the released WordPieces"),
            ("tag_scheme", str, "CoNLL-2003: the tag scheme scored"),
            ("corpus", str, "clinical tasks: the notes corpus (synthetic seed and size, or MIMIC-III)"),
            ("name_insertion", str, "clinical tasks: how patient names enter the notes (deid or spl)"),
            ("patients", int, "clinical tasks: patients whose notes the MLM is pretrained on"),
            ("held_out_patients", int, "clinical tasks: patients held out of pretraining"),
            ("splits", str, "attribute tasks: how the victim, query, auxiliary and evaluation splits were dealt"),
            ("label", str, "attribute tasks: what the victim's label is"),
            ("attributes", str, "attribute tasks: the private attributes inferred, and their coding"),
            ("authors", str, "Blog: how many authors the examples come from")),
    *_notes("attack", ALL,
            ("attacked_rows", int, "examples of the attacked release"),
            ("attack_corpus_size", int, "distinct texts of the task corpus the attack may rank (its index)"),
            ("public_corpus", str, "the public text the attack read (or the one TextHide's inter scheme mixes in)"),
            ("public_corpus_size", int, "its sentences")),
    *_notes("attack", ("tokens",),
            ("masked_positions", int, "mask-inference: positions the attacker's MLM predicted"),
            ("attacked_sentences", int, "mask-inference: sentences attacked"),
            ("mlm_top1_text", str, "mask-inference: the held-out public text its MLM's top-1 is measured on"),
            ("span_recovery_mlm", str, "span-recovery: the attacker's MLM"),
            ("span_recovery_mlm_head", str, "span-recovery: that MLM's head, in words"),
            ("span_recovery_mlm_top1", float, "span-recovery: that MLM's masked top-1 on held-out public text"),
            ("span_recovery_mlm_weights", str, "span-recovery: digest of that MLM's weights"),
            ("span_recovery_slots", int, "span-recovery: sensitive span slots attacked"),
            ("span_recovery_weight", float, "span-recovery: the MLM's weight beside the prior (given, or chosen)"),
            ("span_recovery_weight_chosen_on", int, "span-recovery: public spans the weight was chosen on (0: given)"),
            ("span_recovery_calibration_top_k", dict, "span-recovery: top-k hits of each weight tried on public spans"),
            ("span_recovery_release_candidates", int, "span-recovery: candidate fillers read from the release")),
    *_notes("attack", ("representations",),
            ("attacks", int, "gradient-matching: updates attacked"),
            ("attacks_per_minute", float, "gradient-matching: its speed on this machine"),
            ("dummy_mask", bool, "gradient-matching: whether a dummy mask is optimised too (TextHide's masks)"),
            ("matched_updates", int, "gradient-matching: updates matched to a distance below 1e-6"),
            ("inversion_vocabulary", int, "embedding-inversion: public words its model can predict"),
            ("inversion_words_guessed", int, "embedding-inversion: words guessed per row (mean distinct words of a "
                                             "public sentence)"),
            ("inversion_content_words_guessed", int, "embedding-inversion: content words guessed per row (mean "
                                                     "distinct content words of a public sentence)"),
            ("inversion_mechanism", str, "embedding-inversion: the public mechanism as the adversary ran it on its "
                                         "public sentences"),
            ("matched_gradients", str, "gradient-matching: the gradients matched (client layer and head, or head)")),
    *_notes("attack", ("tokens", "representations"),
            ("membership_query", str, "membership: what a query to the deployed service sends"),
            ("membership_candidates", int, "membership: candidates scored, half of them the server's training data"),
            ("membership_delta", float, "membership: the δ of its empirical ε lower bound"),
            ("membership_shadows", int, "membership: shadow models trained (LiRA)"),
            ("membership_setting", str, "membership: the method and where it departs from the paper"),
            ("membership_canaries", int, "membership: canaries of the one-run audit (its one extra training run)")),
    *_notes("attack", ("pretraining",),
            ("a_at_100_names", int, "name-generation: distinct names the generated samples reached"),
            ("a_at_100_samples", int, "name-generation: samples drawn to reach them"),
            ("a_at_100_not_comparable", str, "name-generation: why A@100 was left out (fewer than 100 names)"),
            ("random_a_at_100_names", int, "name-generation's random reference: distinct names reached"),
            ("random_a_at_100_samples", int, "name-generation's random reference: samples drawn"),
            ("random_a_at_100_not_comparable", str, "name-generation's random reference: why A@100 was left out")),
    *_notes("attack", ("api",),
            ("extraction_queries", int, "aia: queries the imitation was trained on"),
            ("extraction_agreement", float, "aia: the imitation's agreement with the API on held-out queries"),
            ("agreement_queries", int, "aia: held-out queries that agreement is measured on"),
            ("attacker_representation", str, "aia: the imitation's layer the attribute classifier reads")),
    *_notes("tokens", ("tokens",),
            ("released_tokens", int, "tokens of the attacked release"),
            ("token_space", str, "the space tokens are released in: wordpiece or words"),
            ("evaluation_data", str, "when the evaluation split is released unprotected: which split is attacked"),
            ("span_slots", int, "span attacks: sensitive span slots located in the release")),
    *_notes("mechanism", ("tokens", "representations", "api"),
            ("mean_noise_radius", float, "d_chi defenses: the mean noise radius n/eta (to read eta against the "
                                         "representation's scale)")),
    *_notes("mechanism", ("tokens",),
            ("sensitive_tokens", (int, NONE), "SanText+: size of the fitted sensitive set V_S")),
    *_notes("mechanism", ("representations",),
            ("masks_per_client", (list, str), "TextHide federated: masks in each client's pool (inf: fresh masks)")),
    *_notes("mechanism", ("tokens",),
            ("dp_mlm_eps_per_token", float, "DP-MLM: eps of each token's draw"),
            ("dp_mlm_clip_min", float, "DP-MLM: lower logit clip bound"),
            ("dp_mlm_clip_max", float, "DP-MLM: upper logit clip bound"),
            ("dp_mlm_sensitivity", float, "DP-MLM: clip_max - clip_min, the sensitivity of the clipped logits"),
            ("dp_mlm_clip_source", str, "DP-MLM: where the clip bounds come from (given, the authors', measured)"),
            ("dp_mlm_tokens", int, "DP-MLM: tokens drawn (both splits)"),
            ("dp_mlm_changed_share", float, "DP-MLM: share of drawn tokens that differ from the input's"),
            ("dp_mlm_tokens_per_s", float, "DP-MLM: tokens drawn per second on this machine"),
            ("dp_mlm_sentence_eps_mean", float, "DP-MLM: mean over sentences of n·eps (basic composition)"),
            ("dp_mlm_sentence_eps_max", float, "DP-MLM: largest n·eps of a sentence"),
            ("dp_mlm_composition", str, "DP-MLM: how the per-token eps composes over a sentence")),
    *_notes("server", ("tokens", "representations"),
            ("probe", str, "frozen sentence servers: how the float64 probe beside the head was fitted"),
            ("probe_iterations", int, "the probe's lbfgs iterations (at the cap: stopped before its tolerance)")),
    *_notes("adaptation", ("tokens",),
            ("adaptation_objective", str, "the adaptation objective: vanilla, prob or denoising"),
            ("adaptation_corpus", str, "the public text the MLM was adapted on"),
            ("adaptation_head", str, "the adapted MLM's head, in words"),
            ("adaptation_mlm_top1_before", float, "its masked top-1 on held-out privatized text before adaptation"),
            ("adaptation_mlm_top1_after", float, "the same after adaptation"),
            ("adaptation_sequences_per_s", float, "adaptation speed on this machine"),
            ("adaptation_privatize_share", float, "share of adaptation time spent privatizing the public text")),
    *_notes("dp", ("tokens", "representations", "api"),
            ("dp_epsilon", float, "the target epsilon of the whole training (inf: the non-private server)"),
            ("dp_epsilon_spent", float, "epsilon the accountant reports for the steps taken, at dp_delta"),
            ("dp_delta", float, "delta (given, or 1 / training examples)"),
            ("dp_accountant", str, "the Opacus accountant that chose the noise and reports epsilon: prv or rdp"),
            ("dp_clip", (float, NONE), "the per-example L2 clipping norm (null: no clipping, epsilon = inf)"),
            ("dp_noise_multiplier", float, "sigma: the noise's standard deviation over the clipping norm"),
            ("dp_sample_rate", float, "Poisson sampling rate q = batch size / training examples (0: shuffled batches)"),
            ("dp_steps", int, "optimizer steps taken (each one accounted)"),
            ("dp_sampling", str, "how lots were drawn, and their mean size")),
    *_notes("spans", SPAN_PATHS,
            ("spans_declared", int, "sensitive spans the task declares in the rewritten (or attacked) split"),
            ("spans_rewritten", int, "spans the defense rewrote"),
            ("mlm", (str, NONE), "the MLM of the rewrite (NDD; null: none), or mask-inference's attacker MLM"),
            ("mlm_head", str, "that MLM's head, in words"),
            ("mlm_top1", float, "that MLM's masked top-1 on held-out public text"),
            ("mlm_weights", str, "digest of that MLM's weights"),
            ("ndd_spans", int, "NDD: spans rewritten"),
            ("ndd_masked_for_want_of_candidates", int, "NDD: spans masked since no candidate was left"),
            ("ndd_rewrite_seconds", float, "NDD: seconds the rewrite took"),
            ("ndd_mlm_precision", str, "NDD: the precision its MLM ran at, when not fp32"),
            ("ndd_spans_from_checkpoint", int, "NDD: spans read back from an interrupted run's journal"),
            ("ndd_chosen_mean", float, "NDD: mean NDD of the chosen candidates"),
            ("ndd_first_candidate_mean", float, "NDD: mean NDD of the first candidate"),
            ("ndd_scored_spans", int, "NDD: spans scored by NDD"),
            ("ndd_masked_copies_run", int, "NDD: masked copies scored in this run"),
            ("ndd_masked_copies_exhaustive", int, "NDD: masked copies an exhaustive scoring would take"),
            ("rewrite_from_cache", bool, "the rewrite was read from the rewrite cache (the same as a fresh one)")),
    *_notes("representations", ("representations",),
            ("attacked_release", str, "which representations the attack sees, and the known pairs it learns from"),
            ("traffic", str, "the traffic the attacked release is: training (hidden as training batches) or "
                             "inference (the prediction queries)"),
            ("clients", int, "federated clients (when more than one)")),
    *_notes("pretraining", ("pretraining",),
            ("pretrain_key", str, "cache key of the further-pretrained checkpoint"),
            ("pretrain_steps", int, "its optimizer steps (0: the MLM released as it is)"),
            ("pretrain_seconds", float, "wall-clock seconds of the further pretraining"),
            ("pretrain_cpu_seconds", float, "CPU seconds of the further pretraining"),
            ("pretrain_sequences", int, "sequences it trained on"),
            ("pretrain_sentences", int, "client sentences it trained on"),
            ("released_mlm", str, "the released MLM"),
            ("utility_task", str, "the task the released encoder is scored on"),
            ("utility_sizes", list, "training and evaluation sizes of that task")),
    *_notes("api", ("api",),
            ("victim", str, "the victim model behind the API"),
            ("deviations", str, "how the victim and imitation depart from the papers' setting"),
            ("data_defense", dict, "the input mechanism applied to the victim's training text"),
            ("nasty_kl_from_adversary", float, "nasty teacher: KL(victim || adversary) at the end of training"),
            ("victim_accuracy_undefended_outputs", float, "the victim's accuracy before the output defense")),
]

SCHEMA: dict[str, Note] = {}


def declare(*notes: Note) -> None:
    """Declare keys (a plugin's own); a key is declared once."""
    for note in notes:
        if note.section not in SECTIONS:
            raise ValueError(f"note '{note.key}': section '{note.section}' is not one of {', '.join(SECTIONS)}")
        if not set(note.paths) <= set(PATHS):
            raise ValueError(f"note '{note.key}': paths {note.paths} are not among {', '.join(PATHS)}")
        if note.key in SCHEMA and SCHEMA[note.key] != note:
            raise ValueError(f"note '{note.key}' is declared twice")
        SCHEMA[note.key] = note


declare(*_SCHEMA)


def problems(notes: Mapping[str, Any], path: str | None = None) -> list[str]:
    """What in ``notes`` the schema does not declare: keys it lacks, keys outside ``path``, values of another
    type (one sentence each; empty when the notes conform). ``path`` None: any path (a record that predates
    ``notes.protocol``)."""
    found = []
    for key, value in notes.items():
        note = SCHEMA.get(key)
        if note is None:
            found.append(f"note '{key}' is not declared in bench/results/notes.py")
        elif path is not None and path not in note.paths:
            found.append(f"note '{key}' is declared for the {', '.join(note.paths)} path(s), not {path}")
        elif not note.accepts(value):
            found.append(f"note '{key}' holds a {type(value).__name__}, declared {note.type_name()}")
    return found


def check(notes: Mapping[str, Any], path: str | None = None) -> None:
    """Raise ``SchemaError`` (a developer error: the code wrote a note the schema does not declare) unless the
    notes conform."""
    found = problems(notes, path)
    if found:
        raise SchemaError(f"{'; '.join(found)}: declare it there (key, type, paths, one-line comment; a plugin in its "
                          "own file, with bench.results.notes.declare) or do not write it.")


class SchemaError(AssertionError):
    """The code wrote a note the schema does not declare: a bug of the harness (or a plugin), not of the input."""


def markdown(notes: Iterable[Note] | None = None) -> str:
    """The docs page of the schema, generated from it."""
    notes = list(SCHEMA.values() if notes is None else notes)
    lines = ["# Record notes", "",
             "<!-- generated by `python -m bench.results.notes > docs/record-notes.md`; do not edit -->", "",
             "A record's `notes` hold what its numbers need beside them to be read: how the data was split, what the "
             "mechanism and the server did, what the attack knew and measured about itself. Metrics never go there. "
             "Each key is declared in `bench/results/notes.py` with its type and the release paths (`notes.protocol`) "
             "it appears on; the engine refuses to write a record with an undeclared key.", ""]
    for section, (title, what) in SECTIONS.items():
        rows = [n for n in notes if n.section == section]
        if not rows:
            continue
        lines += [f"## {title}", "", what, "", "| key | type | paths | meaning |", "|---|---|---|---|"]
        for note in rows:
            paths = "all" if note.paths == ALL else ", ".join(note.paths)
            lines.append(f"| `{note.key}` | {note.type_name()} | {paths} | {note.comment} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(markdown())
