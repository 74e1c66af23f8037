"""Base classes of tasks, defenses and attacks: what each component declares and supplies.

Every component is a dataclass whose fields are its parameters (defaults plus a one-line comment);
``__post_init__`` rejects bad values with ``BenchError``. The engine (``bench.engine``) owns the
protocol of a cell: a task supplies data, its server and its scorer; a defense supplies only the
client's mechanism; an attack turns a release into guesses. Declarations (metrics, release kinds,
registry names) are checked when a component registers (``check_declarations``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bench.core.errors import BenchError
from bench.core.examples import TaskData, Text, check_task_data
from bench.core.metrics import Metric, check_declared
from bench.core.params import component_args
from bench.core.public import DeclaredOutput, DeclaredRepresentation, SpaceRef, SpanRewrite
from bench.core.releases import Release, ReleaseKind, softmax


def _schema_checked(load):
    """``load`` followed by ``bench.core.examples.check_task_data`` (a label outside the task's label set, a
    non-finite regression label or an empty split is one sentence, never a record)."""
    if getattr(load, "schema_checked", False):
        return load

    @functools.wraps(load)
    def checked(self, *args, **kwargs):
        return check_task_data(self, load(self, *args, **kwargs))

    checked.schema_checked = True
    return checked


class Task:
    """A task: seeded splits, the server model of its family, and the scorer of its metrics.

    Every task has these. The hooks one release path calls live in that path's interface (``TokenTask``,
    ``SpanTask``, ``PretrainingTask``, ``ApiTask``); a task subclasses the interfaces of the paths it declares.
    """

    version: ClassVar[str] = "1"
    metrics: ClassVar[tuple[Metric, ...]] = ()  # utility metrics it computes, the headline metric first
    num_labels: ClassVar[int] = 2  # classes; 1 for regression
    # the release paths its server trains from, preferred first (``PATH_HOOKS`` names them; bench.engine.paths runs
    # them): "representations" and/or "tokens", "pretraining" alone, or "api" alone
    protocols: ClassVar[tuple[str, ...]] = ()
    default_n_train: ClassVar[int] = 4000
    default_n_eval: ClassVar[int] = 1000
    # training settings of this task's server that replace the mode's defaults (user arguments still win),
    # e.g. a tagger's batches count tokens, not sentences
    training_defaults: ClassVar[dict[str, Any]] = {}

    @classmethod
    def check_declarations(cls) -> None:
        """Called at registration: the task declares its metrics and its paths, and implements their hooks."""
        check_declared(f"task '{cls.registry_name}'", cls.metrics)
        if not cls.protocols or not set(cls.protocols) <= set(PATH_HOOKS):
            raise BenchError(f"task '{cls.registry_name}' must declare `protocols`, the client protocols its server "
                             "trains from (representations and/or tokens, pretraining, or api).")
        for path in cls.protocols:
            if not issubclass(cls, PATH_HOOKS[path]):
                raise BenchError(f"task '{cls.registry_name}' declares the {path} path: subclass "
                                 f"bench.{PATH_HOOKS[path].__name__}, whose hooks that path calls.")
        for interface in (TokenTask, SpanTask, PretrainingTask, ApiTask):  # a hook the engine would never read
            stray = [name for name, default in vars(interface).items() if not name.startswith("_")
                     and name != "check_declarations" and getattr(cls, name, default) is not default
                     and getattr(cls, name) != default]
            if stray and not issubclass(cls, interface):
                raise BenchError(f"task '{cls.registry_name}' declares {stray[0]}, a hook of "
                                 f"bench.{interface.__name__}: subclass bench.{interface.__name__}, or the engine "
                                 "never reads it.")

    metric: ClassVar[str] = ""  # the headline utility metric's name (set from ``metrics``)

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if cls.metrics:
            cls.metric = cls.metrics[0].name
        if "load" in cls.__dict__:  # every task's data is checked against its schema as it is loaded
            cls.load = _schema_checked(cls.__dict__["load"])

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """Seeded train and evaluation examples of the requested sizes."""
        raise NotImplementedError

    def server(self, spec, training):
        """The server model of this task's family (``bench.models.servers``), trained on releases only."""
        raise NotImplementedError

    def score(self, predictions: Any, labels: Any) -> dict[str, float]:
        """Utility metrics by name (the headline metric first)."""
        raise NotImplementedError

    def membership_pools(self, data: TaskData, seed: int) -> tuple[Any, Any] | None:
        """``(non-members, public)`` for membership inference on the server trained on ``data.train``.

        Both are labelled examples (``Examples``) of the training split's distribution that no split of ``data``
        holds: held-out non-members, and a disjoint public pool for an adversary's shadow models. Default None: the
        task declares no non-members, and membership inference on it is refused."""
        return None

    def public_examples(self, data: TaskData) -> Any:
        """Examples of the task's sources that no split of ``data`` holds (``Examples``, labelled like a split).

        Public text for an attack's public corpus and a substitutive span defense's pool. Default None: none."""
        return None


class TokenTask(Task):
    """The hooks of the tokens path: the client releases its text token by token.

    The task aligns the labels the client sends with the token space (``token_labels``). It maps the server's
    predictions back for scoring (``task_predictions``).
    """

    # the evaluation data the server predicts: "released" (privatized by the defense, as the client would send it)
    # or "original" (released unprotected: only the training split is privatized, and that release is attacked;
    # the setting of Li et al.'s NER experiments)
    evaluate_on: ClassVar[str] = "released"

    @classmethod
    def check_declarations(cls) -> None:
        """``evaluate_on`` is released or original; original only for a task of the tokens path alone."""

        super().check_declarations()
        if cls.evaluate_on not in ("released", "original"):
            raise BenchError(f"task '{cls.registry_name}' declares evaluate_on '{cls.evaluate_on}'; expected "
                             "released or original.")
        if cls.evaluate_on == "original" and cls.protocols != ("tokens",):
            raise BenchError(f"task '{cls.registry_name}' evaluates on original data, which only the token "
                             "protocol supports: declare protocols = (\"tokens\",).")

    def token_labels(self, texts: list, labels: Any, encoder) -> Any:
        """The labels a client sends beside its texts' released tokens.

        E.g. a tagging task's word tags aligned to the public token space of ``encoder``. Default: unchanged."""
        return labels

    def task_predictions(self, predictions: Any, texts: list, encoder) -> Any:
        """The server's predictions for released tokens of ``texts``, in the form ``score`` takes.

        A tagging task maps token tags back to words. Default: unchanged. Scoring runs on the engine's side."""
        return predictions


class SpanTask(Task):
    """The hooks of a span rewrite: the task declares sensitive spans, which a span defense rewrites.

    Span defenses run on the tokens, pretraining and api paths; each calls these hooks (``bench.engine.spans``).
    """

    # kinds of sensitive span the task declares (entity types, phrase labels); empty: none (bench.core.spans)
    span_kinds: ClassVar[tuple[str, ...]] = ()

    def sensitive_spans(self, data: TaskData, split: str, index: int) -> list:
        """The sensitive spans (``bench.core.spans.Span``) of example ``index`` of ``split`` ("train" or "eval")."""
        raise NotImplementedError

    def substitution_pool(self) -> dict[str, list]:
        """Public phrases by span kind, ``{kind: [(words, fragment), ...]}``.

        A substitutive span defense draws from them instead of the client's own spans of that kind (e.g. names
        from public name lists, so that a patient's name is never replaced by another patient's). Default none."""
        return {}

    def span_fragment(self, label: Any, text: Text, span) -> Any:
        """The part of ``label`` that belongs to ``span`` (an entity's tags, a phrase's subtree).

        A phrase substituted elsewhere carries it with it (``Edit.fragment``). Default None."""
        return None

    def rewrite_label(self, label: Any, text: Text, edits: list) -> Any:
        """The label of ``text`` after ``edits`` replace its spans.

        ``edits``: ``bench.core.spans.Edit``, in position order, not overlapping. A rewritten span keeps its kind
        (its edit's fragment when it has one)."""

        raise BenchError(f"task '{self.registry_name}' cannot relabel rewritten text.")


class PretrainingTask(Task):
    """The hooks of the pretraining path: the client pretrains an MLM on its data and releases the weights.

    The released encoder is scored on another registered task (``utility_task``). The attack on the weights is
    scored against the people behind the data (``patients``); an adversary knows ``public_knowledge``.
    """

    utility_task: ClassVar[str] = ""  # the registered task whose data scores the released encoder

    @classmethod
    def check_declarations(cls) -> None:
        """The task declares this path alone, and its utility task."""
        super().check_declarations()
        if cls.protocols != ("pretraining",) or not cls.utility_task:
            raise BenchError(f"task '{cls.registry_name}' pretrains on its data: declare protocols = "
                             "(\"pretraining\",) alone and the `utility_task` the released encoder is scored on.")

    def patients(self) -> list:
        """The people behind the pretraining data (``Truth.records``), row ``i`` = release owner ``i``."""
        raise NotImplementedError

    def public_knowledge(self) -> tuple[list[str], list[str], list[str], np.ndarray]:
        """What an adversary of the weights knows: first names, last names, conditions and their counts.

        They fill ``bench.core.releases.ModelRelease``."""
        raise NotImplementedError


class ApiTask(Task):
    """The hooks of the prediction API path: the server trains a victim and serves its predictions.

    The API answers raw queries, so only the victim's training data can be defended by a text defense. The
    task's examples carry their authors' private attributes, which attribute inference targets.
    """

    # private attributes of the authors the task's examples carry (attribute inference targets them)
    attributes: ClassVar[tuple[str, ...]] = ()
    # what the task's reported attribute-inference figure is computed from: "accuracy" or "micro_f1" (He et al.)
    attribute_measure: ClassVar[str] = "accuracy"

    @classmethod
    def check_declarations(cls) -> None:
        """The task declares this path alone, and its attributes."""
        super().check_declarations()
        if cls.protocols != ("api",) or not cls.attributes:
            raise BenchError(f"task '{cls.registry_name}' must declare `attributes` exactly when it serves a "
                             "prediction API, and then protocols = (\"api\",).")


# The interface a task subclasses for each path it declares in ``protocols`` (its hooks: what that path calls).
PATH_HOOKS: dict[str, type[Task]] = {"representations": Task, "tokens": TokenTask, "pretraining": PretrainingTask,
                                     "api": ApiTask}


def require_pretraining(attack: str, task_cls: type) -> None:
    """An attack on a pretrained MLM's weights pairs only with a task that pretrains one (``PretrainingTask``)."""
    if not issubclass(task_cls, PretrainingTask):
        raise BenchError(f"attack '{attack}' takes the weights of an MLM pretrained on a clinical task's notes, and "
                         f"task '{task_cls.registry_name}' pretrains none, so they cannot be paired (its model release "
                         "is its trained server's, which membership attacks).")


def span_kinds(task_cls: type) -> tuple[str, ...]:
    """The sensitive span kinds a task declares; none unless it is a ``SpanTask``."""
    return tuple(task_cls.span_kinds) if issubclass(task_cls, SpanTask) else ()


class Defense:
    """A text-privacy defense: the client's local mechanism and the release kinds it produces."""

    version: ClassVar[str] = "1"
    releases: ClassVar[tuple[ReleaseKind, ...]] = ()

    @classmethod
    def version_for(cls, args: dict[str, Any], task_cls: type | None = None) -> str:
        """The version of the cells run with parameters ``args`` (as a spec keeps them: defaults may be absent) on
        task ``task_cls``. Default ``version``; a change that moves only some cells' figures overrides this, so that
        only those recorded cells are superseded and re-run."""
        return cls.version

    @classmethod
    def check_declarations(cls) -> None:
        """Called at registration: the defense declares at least one release kind it produces."""
        if not cls.releases or not all(isinstance(k, ReleaseKind) for k in cls.releases):
            raise BenchError(f"defense '{cls.registry_name}' must declare the release kinds it produces "
                             "(class attribute `releases`, a tuple of bench.ReleaseKind).")

    def describe(self, dim: int) -> dict[str, Any]:
        """Derived facts worth keeping in the record (e.g. the mean noise radius); default none."""
        return {}

    def offline_mlms(self) -> tuple[str, ...]:
        """The MLMs the defense loads by name: a run first trains an offline one (``minilm-mlm@N``) that the cache
        lacks, and a grid's dry run counts that time. Default none."""
        return ()

    def check(self) -> None:
        """Cheap checks, before anything runs, of every name a parameter holds that is loaded later (a model, a
        file, a task): raise ``BenchError`` naming the parameter; never load weights. Default: nothing to check.
        ``make_spec`` calls it, so ``bench run`` and every cell of a grid are checked before the first one runs."""


class TokenDefense(Defense):
    """A defense that privatizes the client's text token by token (d_chi, SanText, ...).

    It supplies ``token_mechanism()``: the public mechanism (``bench.privacy.public.TokenMechanism``)
    the engine runs on the client's token ids; and ``token_space()``: the public space it works in.
    """

    releases: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.TEXT,)

    def token_mechanism(self):
        """A fresh (unfitted) public mechanism with this defense's parameters."""
        raise NotImplementedError

    def token_space(self):
        """The public token space (``bench.privacy.public.SpaceRef``): the encoder's WordPieces by default."""
        return SpaceRef()

    def check(self) -> None:
        """A word space's vector file must exist (it is read only once the cell runs)."""
        from pathlib import Path

        space = self.token_space()
        if space.format == "words" and not Path(space.vectors).expanduser().is_file():
            raise BenchError(f"{self.registry_name} vectors='{space.vectors}' is not a file; give a GloVe-format "
                             "word-vector file (word v1 ... vn per line), or leave vectors empty for the WordPiece "
                             "table.")


class SpanDefense(TokenDefense):
    """A defense that rewrites the sensitive spans a task declares before the text leaves the client (NDD
    distortion, span masking); the engine then releases the rewritten text token by token, unchanged.

    It supplies ``rewrite(batch, rng)``: one list of ``bench.core.spans.Edit`` per example of ``batch``
    (``bench.engine.spans.SpanBatch``: the texts, their labels, the spans chosen for rewriting and the
    client's own spans by kind, for substitution pools). Which spans are rewritten is the engine's choice
    from the defense's ``kinds`` and ``fraction`` (``selection``).
    """

    releases: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.REWRITTEN_TEXT,)

    def selection(self) -> tuple[tuple[str, ...], float]:
        """The span kinds to rewrite (empty = every kind the task declares) and the share of them."""
        kinds = getattr(self, "kinds", "all")
        chosen = () if kinds in ("", "all") else tuple(k.strip() for k in str(kinds).split("+") if k.strip())
        return chosen, float(getattr(self, "fraction", 1.0))

    def rewrite(self, batch, rng: np.random.Generator) -> list[list]:
        """The edits of each example of ``batch`` (``bench.engine.spans.SpanBatch``)."""
        raise NotImplementedError

    def rewrite_identity(self, task: str) -> dict:
        """What decides the rewrite besides the batch and the random state, for the engine's rewrite cache: the
        defense's name, version and parameters. A defense whose rewrite also depends on a model adds the model's
        identity (NDD adds its MLM's weights digest)."""
        return {"defense": type(self).registry_name, "version": type(self).version, "args": component_args(self)}

    def token_mechanism(self):
        """The public mechanism: the rewrite's name and parameters; tokens then pass unchanged."""
        return SpanRewrite(type(self).registry_name, component_args(self))


class OutputDefense(Defense):
    """A defense of a prediction API: it changes what the victim answers (softening, noise, reverse sigmoid,
    most-least) or how the victim is trained (nasty teacher), never the training data.

    It supplies ``answer(logits, rng)``: the probability vectors the API returns for a batch of the victim's
    logits; and ``distillation()``: None, or the self-undermining objective (``bench.privacy.public.
    SelfUndermining``) the server trains the victim with instead of plain cross-entropy.
    """

    releases: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.PREDICTIONS,)

    def answer(self, logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The API's answers ``(n, classes)`` for the victim's logits (default: the softmax, unchanged)."""
        return softmax(logits)

    def distillation(self):
        """The victim's training objective when it is not plain cross-entropy (default: None)."""
        return None

    def output_mechanism(self):
        """The public mechanism: the defense's name and parameters (all an API user can know of it)."""
        return DeclaredOutput(type(self).registry_name, component_args(self))


class RepresentationDefense(Defense):
    """A defense that transforms sentence representations (TextHide, d_chi on sequences, ...).

    A subclass overrides ``hide`` (one transform for training and inference) or, like TextHide,
    ``hide_batch`` (training batches: representations and targets) and ``hide_inference``. ``setup``
    draws the client's secrets once; ``prepare`` fetches what the client needs beyond its own data.

    With frozen features the client releases its training split once, hidden as training batches, and the server
    trains every epoch on that one release: each further draw would be another release of the same examples (a
    local-DP guarantee composes over them, and a server could average the copies). A defense whose paper hides each
    example afresh every epoch sets ``rehides_each_epoch`` (TextHide changes each example's mask every epoch).
    Fine-tuning the encoder, or federated clients, need the client to hide every batch afresh, so only such a
    defense runs in those settings (``make_spec`` refuses the others).
    """

    releases: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.SENTENCE_EMBEDDINGS, ReleaseKind.GRADIENTS)
    rehides_each_epoch: ClassVar[bool] = False

    def representation_mechanism(self):
        """The public mechanism (``bench.privacy.public.RepresentationMechanism``); by default the
        defense's name and parameters, which is all an adversary can rely on for a new defense."""
        return DeclaredRepresentation(type(self).registry_name, component_args(self))

    def client_count(self) -> int:
        """Federated clients that hide their own shards (1 = centralised training)."""
        return 1

    def setup(self, dim: int, generator) -> None:
        """Draw the client's secrets for representations of size ``dim`` (default: none)."""

    def prepare(self, client) -> None:
        """Fetch what the client needs beyond its own data (``bench.engine.paths.representations.ClientSide``).

        Default: nothing."""

    def hide(self, reps, generator):
        """Transform a batch of representations ``(n, dim)`` (default: unchanged)."""
        return reps

    def hide_batch(self, reps, targets, generator):
        """Transform a training batch and its targets (default: ``hide`` on the representations)."""
        return self.hide(reps, generator), targets

    def hide_inference(self, reps, generator):
        """Transform representations sent for prediction (default: ``hide``)."""
        return self.hide(reps, generator)

    def client_transform(self, client: int):
        """The batch transform federated client ``client`` applies (default: ``hide_batch``)."""
        return self.hide_batch


# What an attack may know besides the release and the public weights, by name; an attack declares the ones it uses
# (``Attack.knowledge``) and reads only those.
KNOWLEDGE = {
    "index": "the texts an adversary's search index may hold: every text of the run's task corpus, the released rows' "
             "originals included (for threats of re-identification, where the paper puts them there)",
    "public": "public text disjoint from every private split of the run (for priors, candidate sets, frequency "
              "guesses and auxiliary training)",
}


@dataclass
class PublicKnowledge:
    """What an adversary may use besides the release: the public weights, and the corpora its attack declared.

    Reading a corpus the attack did not declare in ``Attack.knowledge`` raises ``BenchError``."""

    encoder: Any
    task: str
    granted: frozenset[str] = frozenset()
    index_texts: list[Text] = field(default_factory=list)  # KNOWLEDGE["index"]
    public_texts: list[str] = field(default_factory=list)  # KNOWLEDGE["public"]: sentences
    public_source: str = ""  # what the public text is (a record note)

    @property
    def index(self) -> list[Text]:
        """Every distinct text of the run's task corpus (training and evaluation), in a fixed order."""
        return self._read("index", self.index_texts)

    @property
    def public(self) -> list[str]:
        """Public sentences that no private split of the run holds."""
        return self._read("public", self.public_texts)

    def notes(self) -> dict:
        """What the attack knew, for the record: the index's size and the public text's description and size, for
        the corpora it declared (``granted``)."""
        found = {"attack_corpus_size": len(self.index_texts)} if "index" in self.granted else {}
        if "public" in self.granted:
            found.update(public_corpus=self.public_source, public_corpus_size=len(self.public_texts))
        return found

    def _read(self, name: str, value):
        if name not in self.granted:
            raise BenchError(f"an attack on task '{self.task}' read the {name} corpus without declaring it: add "
                             f"'{name}' to its `knowledge` (with the paper's reason), or use what it declared.")
        return value


@dataclass
class Truth:
    """Ground truth held by the runner only, for scoring guesses."""

    texts: list[Text]  # the true text (sentence or pair) of each release row
    labels: np.ndarray  # the true label of each release row
    index_labels: np.ndarray  # labels of PublicKnowledge.index, for label-agreement metrics
    # for a release with slots: the original piece ids of each slot's sensitive span, per row, in slot order
    spans: list[list[tuple[int, ...]]] | None = None
    # for a model release (a pretraining task): the people behind the pretraining data, e.g. the patients
    # (bench.data.clinical.Patient: name and conditions), which the attack on the weights is scored against
    records: list | None = None
    # for a predictions release: each private attribute's true value per release row (attribute inference)
    attributes: dict[str, np.ndarray] | None = None
    # for a trained server's model release: whether each candidate row is a member of its training data, and whether
    # each canary of a one-run audit was included in the audit's training run
    members: np.ndarray | None = None
    canaries: np.ndarray | None = None


class Attack:
    """An attack: turns a release into guesses; the engine scores them against the truth."""

    version: ClassVar[str] = "1"
    accepts: ClassVar[tuple[ReleaseKind, ...]] = ()
    metrics: ClassVar[tuple[Metric, ...]] = ()  # what ``score`` returns; higher = more recovered unless declared
    needs_spans: ClassVar[bool] = False  # scored on the task's sensitive spans (Release.slots): the engine finds them
    # runs the public encoder (encode, token states, its model); False: reads its tokenizer and input embedding table
    # alone, so an attack-only run of a cell whose server adapted its encoder (table frozen) need not pretrain it
    reads_encoder_body: ClassVar[bool] = True
    # parameters ``bench run --check`` sets, unless the user chose them: the attack's smoke budget (a run in seconds)
    check_args: ClassVar[dict[str, Any]] = {}
    # the corpora of KNOWLEDGE the attack reads, each with the paper's reason the adversary holds it
    knowledge: ClassVar[dict[str, str]] = {}
    # figures a new version left as they were: "privacy/<metric>" or "random/<metric>" -> the oldest version that
    # computes it as the current one does (so a record of that version keeps it on the board)
    stable: ClassVar[dict[str, int]] = {}

    @classmethod
    def check_declarations(cls) -> None:
        """Called at registration: the attack declares the release kinds it accepts, its metrics and the knowledge
        it uses (names of ``KNOWLEDGE``, each with a reason)."""
        if not cls.accepts or not all(isinstance(k, ReleaseKind) for k in cls.accepts):
            raise BenchError(f"attack '{cls.registry_name}' must declare the release kinds it accepts "
                             "(class attribute `accepts`, a tuple of bench.ReleaseKind).")
        check_declared(f"attack '{cls.registry_name}'", cls.metrics)
        if not isinstance(cls.knowledge, dict):
            raise BenchError(f"attack '{cls.registry_name}' must declare `knowledge` as a dict: name -> reason.")
        for name, reason in cls.knowledge.items():
            if name not in KNOWLEDGE:
                raise BenchError(f"attack '{cls.registry_name}' declares unknown knowledge '{name}'; known: "
                                 f"{', '.join(KNOWLEDGE)}.")
            if not isinstance(reason, str) or not reason.strip():
                raise BenchError(f"attack '{cls.registry_name}' must give a reason for its knowledge '{name}'.")
        names = {f"{prefix}/{m.name}" for m in cls.metrics for prefix in ("privacy", "random")}
        for key, since in cls.stable.items():
            if key not in names or not isinstance(since, int) or since < 1:
                raise BenchError(f"attack '{cls.registry_name}' declares `stable` {key!r}: {since!r}; keys are "
                                 "privacy/<metric> or random/<metric> of its metrics, values versions >= 1.")

    @classmethod
    def version_for(cls, args: dict[str, Any], kind: ReleaseKind | None = None) -> str:
        """The version of the cells run with parameters ``args`` on releases of ``kind``. Default ``version``; a
        change that moves only some cells' figures overrides this, so that only those recorded cells are re-run."""
        return cls.version

    def check(self) -> None:
        """Cheap checks, before anything runs, of every name a parameter holds that is loaded later (a model, a
        file, a task): raise ``BenchError`` naming the parameter; never load weights. Default: nothing to check.
        ``make_spec`` calls it, so ``bench run`` and every cell of a grid are checked before the first one runs."""

    def check_task(self, task_cls: type) -> None:
        """Cheap checks of the parameters against the task's declarations (e.g. attributes it must have); raise
        ``BenchError``. Default: nothing to check."""

    def offline_mlms(self, defense_mlms: tuple[str, ...] = ()) -> tuple[str, ...]:
        """As ``Defense.offline_mlms``; ``defense_mlms`` are the cell's defense's, which the attack may reuse."""
        return ()

    def attack(self, release: Release, public: PublicKnowledge) -> Any:
        """Guesses about the private inputs behind ``release``."""
        raise NotImplementedError

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> Any:
        """Guesses of the same form drawn at random: the reference every attack reports beside."""
        raise NotImplementedError

    def score(self, guesses: Any, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """Metric name -> value for ``guesses`` against the truth."""
        raise NotImplementedError
