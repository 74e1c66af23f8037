"""What every release path shares: the cell's context, the cell's output, and the path's declarations.

A path (``ReleasePath``) is one way a client releases: it drives one defense family, yields some release kinds
with their payload types, calls the hooks of one task interface (``bench.core.components.PATH_HOOKS``) and
returns its own ``CellOutput``. The truth an attack is scored against stays in that output, on the engine's side.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from bench.core.components import Defense, Task, Truth
from bench.core.examples import TaskData
from bench.core.releases import Release, ReleaseKind
from bench.core.spec import TRAINING, RunSpec
from bench.engine.server_options import ServerOptions
from bench.models.loading import fresh_encoder, load_encoder
from bench.models.probe import describe


@dataclass
class CellContext:
    """What the engine holds for one cell: the spec, the task, its data, the training settings, the options."""

    spec: RunSpec
    task: Any  # the task, an instance of the interface its path needs (bench.core.components.PATH_HOOKS)
    data: TaskData
    training: Any  # bench.models.training.TrainingConfig
    options: ServerOptions
    # the client's part alone: the server neither trains nor predicts, the output has no utility (bench.engine.reuse
    # regenerates a release so; the token and frozen representation paths honour it)
    client_only: bool = False

    @functools.cached_property
    def encoder(self):
        """The public encoder, shared and frozen (its features cached on disk)."""
        return load_encoder(self.spec.encoder, self.spec.device, self.spec.pooling, self.spec.max_length)

    def fresh_encoder(self):
        """A private copy of the encoder for modes that change its weights; it bypasses the feature cache."""
        return fresh_encoder(self.spec.encoder, self.spec.device, self.spec.pooling, self.spec.max_length,
                             self.spec.seed)


@dataclass
class CellOutput:
    """Utility of the server's model on privatized evaluation data, and the releases attacks see.

    Each path returns its subclass, which holds the truth only that path has (engine-only)."""

    utility: dict[str, float]
    releases: dict[ReleaseKind, Release]
    notes: dict[str, Any] = field(default_factory=dict)
    encoder: Any = None  # the public encoder an adversary holds for this release
    # the task's metrics of the deterministic probe on the server's frozen features (bench.models.probe), by the
    # task's metric names; empty where no probe applies (fine-tuning, other task families)
    probe: dict[str, float] = field(default_factory=dict)
    # releases built only when an attack takes them: kind -> () -> Release (the trained server's model release)
    deferred: dict[ReleaseKind, Callable[[], Release]] = field(default_factory=dict)
    # the deployed pipeline, (plaintext texts, rng) -> the server's logits (bench.engine.membership); None: no server
    query: Callable | None = None
    membership: Truth | None = None  # the candidates of a model release and which are members (engine-only)

    def release(self, kind: ReleaseKind) -> Release:
        """The release of ``kind``, building a deferred one on first use."""
        if kind not in self.releases and kind in self.deferred:
            self.releases[kind] = self.deferred.pop(kind)()
        return self.releases[kind]

    def truth(self, release: Release, data: TaskData) -> Truth:
        """The truth behind ``release``: the texts and labels of the examples it was made from."""
        if release.split == "membership":
            return self.membership
        owned = getattr(data, release.split)  # the split the release was made from (train, eval, attribute_eval)
        return Truth([owned.texts[i] for i in release.owners], owned.labels[release.owners], data.index_corpus()[1])


class ReleasePath:
    """One way a client releases, as the engine runs it for a cell.

    A subclass declares its ``name`` (what tasks list in ``protocols`` and records keep in ``notes["protocol"]``),
    the defense ``families`` it drives, the kinds it ``yields`` with the payload type of each
    (``bench.core.releases.PAYLOADS``), the task interface whose ``hooks`` it calls, and its ``output`` type.
    A kind it yields as more than one traffic (``bench.core.spec.TRAFFICS``) is listed in ``traffics``; its
    ``run`` puts the release of the cell's ``spec.traffic`` under that kind.
    """

    name: ClassVar[str] = ""
    families: ClassVar[tuple[type[Defense], ...]] = ()
    yields: ClassVar[dict[ReleaseKind, type]] = {}
    traffics: ClassVar[dict[ReleaseKind, tuple[str, ...]]] = {}  # kind -> its traffics (default: training only)
    hooks: ClassVar[type[Task]] = Task
    output: ClassVar[type[CellOutput]] = CellOutput

    @property
    def kinds(self) -> tuple[ReleaseKind, ...]:
        """The release kinds this path yields."""
        return tuple(self.yields)

    def traffics_of(self, kind: ReleaseKind) -> tuple[str, ...]:
        """The traffics this path releases ``kind`` as."""
        return self.traffics.get(kind, (TRAINING,))

    def drives(self, defense_cls: type) -> bool:
        """Whether a defense of ``defense_cls`` has a client part on this path."""
        return issubclass(defense_cls, self.families)

    def run(self, defense: Defense, context: CellContext, server) -> CellOutput:
        """Run the cell's client part with ``defense`` and the task's ``server``; the releases and the utility."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<release path {self.name}>"


def probe_scores(task, server, found, labels, notes: dict) -> dict[str, float]:
    """The task's metrics of the server's probe predictions ``found`` (in the form ``task.score`` takes).

    Empty when the server fitted no probe (None). The notes say how the probe was fitted."""
    if found is None:
        return {}
    notes["probe"] = describe()
    if not server.probe.regression:
        notes["probe_iterations"] = server.probe.iterations  # lbfgs's (MAX_ITER: stopped before its tolerance)
    return task.score(found, labels)
