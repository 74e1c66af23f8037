"""An attack added without re-training: a cell reuses the release and utility of its recorded configuration.

A cell with an attack whose configuration without the attack (task, encoder, defense and its arguments, training,
server options, sizes, seed, device, precision) is already known runs only the attack (and its random reference):

1. from the release store (``bench.results.release_store``): the release the earlier run made and its utility and
   notes, used when the release's digest matches the one stored with it;
2. else from a record of that configuration in the results store (same seed, task and defense versions, data and
   encoder, and every utility metric a full run records): the client's part alone runs again
   (``CellContext.client_only``: the server neither trains nor predicts), its release is checked against the
   record's ``release_digest`` when the record has one, and the record's utility is taken.

Only releases of frozen token and sentence-representation paths qualify: their data never depends on the
server's training (tokens: the client privatizes before the server sees anything; representations: the frozen
public encoder, the defense's seeded secrets, and for gradients the server's freshly initialised head). A
fine-tuned encoder is the adversary's public encoder and changes with training; a prediction API answers from the
trained victim; a model release is the further pretrained model: such cells always run in full. A stored release
that fails its check is removed and regenerated, never scored; a regenerated release that differs from the record's
digest makes the cell run in full. An adapted server's checkpoint is neither pretrained nor loaded for an attack
that reads no encoder body (``Attack.reads_encoder_body``): adaptation freezes the embedding table, so the public
one stands in (``TableView``). Records say what they reused (``reused_from``: the run whose server part they
carry; ``reused``: what). ``reusing`` turns reuse on for the cells run inside it (the command line does, unless
``--no-reuse``); elsewhere ``run_cell`` runs every cell in full and stores nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import struct
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

import bench
from bench.core.errors import BenchError
from bench.core.metrics import PROBE_PREFIX
from bench.core.params import build_component
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.releases import GradientRelease, ModelRelease, PredictionAccess, Release, ReleaseKind, ServerModel
from bench.core.spec import RunSpec
from bench.core.versions import compatible_kind, component_versions
from bench.engine.cell import cell_context
from bench.engine.paths import ReleasePath, choose_path
from bench.engine.paths.tokens import TokenOutput, adapted_encoder, public_token_mechanism, reads_encoder_body
from bench.models.dp_sgd import DP_NOTES
from bench.models.training import initial_client_layer, initial_head
from bench.results.release_store import FORMAT, CorruptEntry, ReleaseStore, pack, unpack
from bench.results.store import ResultStore

STORED_PATHS = ("tokens", "representations")  # whose releases never depend on a frozen server's training
SERVER_NOTES = ("probe", "probe_iterations", *DP_NOTES)  # the notes these paths' server part writes (probe, DP-SGD)
ADAPTATION = "adaptation_"  # and its adapted checkpoint's, which an attack that reads no encoder body never loads


# -- where reuse is on ------------------------------------------------------------------------------------------


@dataclass
class Reuse:
    """Reuse for the cells run inside ``reusing``: where recorded configurations and stored releases are."""

    results: ResultStore | None  # recorded configurations, read when first needed and when its files change
    releases: ReleaseStore | None  # None: the store is off (BENCH_RELEASE_STORE_GB=0)
    lookup: bool = True  # False (--no-reuse): every cell runs in full, and the store is still filled
    _index: tuple = field(default=((), None), repr=False)  # (the records files' sizes and times, RecordIndex)

    def index(self) -> "RecordIndex":
        """The results store's records by configuration without the attack (read again when its files changed)."""
        files = self.results.files() if self.results is not None else []
        seen = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
        if self._index[1] is None or self._index[0] != seen:
            self._index = (seen, RecordIndex(self.results.read()[0] if files else []))
        return self._index[1]


_ACTIVE: ContextVar[Reuse | None] = ContextVar("bench_reuse", default=None)


@contextlib.contextmanager
def reusing(results: ResultStore | None, lookup: bool = True,
            releases: ReleaseStore | None | bool = True) -> Iterator[Reuse]:
    """Reuse recorded configurations (``lookup``) and fill the release store for the cells run in this block;
    ``releases`` True: the store the environment configures (``ReleaseStore.configured``)."""
    store = ReleaseStore.configured() if releases is True else (releases or None)
    active = Reuse(results, store, lookup)
    token = _ACTIVE.set(active)
    try:
        yield active
    finally:
        _ACTIVE.reset(token)


# -- which cells qualify, and their key ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The release a cell attacks, when it is one the store keeps: its path's name, kind and store key."""

    protocol: str  # the release path's name (as records keep it in notes["protocol"])
    kind: ReleaseKind
    needs_spans: bool  # the attack reads the spans' slots, which the release then carries
    key: str


def base_config(spec_dict: dict[str, Any]) -> str:
    """A canonical JSON of a spec without its attack (the seed kept): what the release and utility depend on."""
    payload = {k: v for k, v in spec_dict.items() if k not in ("attack", "attack_args")}
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)


def target(spec: RunSpec) -> Target | None:
    """The cell's attacked release, when the store keeps its kind (frozen token or representation paths)."""
    if spec.attack is None or spec.training.mode != "frozen":
        return None
    task_cls, defense_cls, attack_cls = TASKS.get(spec.task), DEFENSES.get(spec.defense), ATTACKS.get(spec.attack)
    kind = compatible_kind(defense_cls, attack_cls, task_cls)
    protocol = choose_path(defense_cls, task_cls.protocols, kind).name
    if protocol not in STORED_PATHS or kind is ReleaseKind.MODEL:  # a trained server's model: its training
        return None
    needs_spans = bool(getattr(attack_cls, "needs_spans", False))
    task_version, defense_version, _ = component_versions(spec).split(" ")
    identity = {"format": FORMAT, "bench": bench.__version__, "config": base_config(spec.to_dict()),
                "versions": [task_version, defense_version], "protocol": protocol, "kind": kind.value,
                "spans": needs_spans}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:32]
    return Target(protocol, kind, needs_spans, key)


class RecordIndex:
    """Records by (configuration without the attack, seed), for finding the one a cell can reuse."""

    def __init__(self, records: Iterable) -> None:
        self._by_config: dict[tuple[str, int], list] = {}
        for record in records:
            try:
                spec = RunSpec.from_dict(record.spec)
            except TypeError:
                continue
            self._by_config.setdefault((base_config(_plain(spec.to_dict())), record.seed), []).append((spec, record))

    def find(self, spec: RunSpec, found: Target):
        """The newest record of ``spec``'s configuration without the attack, of the same task and defense versions
        and path, preferring one whose release digest can check this cell's release; None if there is none."""
        task_version, defense_version, _ = component_versions(spec).split(" ")
        best, best_rank = None, None
        candidates = self._by_config.get((base_config(_plain(spec.to_dict())), spec.seed), [])
        probe = bool(candidates) and expects_probe(spec)
        for other, record in candidates:
            if (record.versions.get("task"), record.versions.get("defense")) != (task_version, defense_version):
                continue
            if probe and not any(k.startswith(f"utility/{PROBE_PREFIX}") for k in record.metrics):
                continue  # older than the probe: a full run records more utility metrics than it holds
            kind = _attacked_kind(other)
            if kind is False or _protocol_of(other, record, kind) != found.protocol:
                continue
            rank = (kind == found.kind and "release_digest" in record.notes, record.created_at)
            if best_rank is None or rank > best_rank:
                best, best_rank = (record, kind == found.kind), rank
        return best


def expects_probe(spec: RunSpec) -> bool:
    """Whether a full run of the cell records the probe's utility metrics (a frozen server of a family that fits
    it beside its head: ``bench.models.probe``)."""
    task = build_component(TASKS.get(spec.task), {})
    return hasattr(task.server(spec, spec.training), "probe")


def _plain(value: Any) -> Any:
    """``value`` as JSON gives it back (tuples as lists), so a spec and a record's spec compare equal."""
    return json.loads(json.dumps(value, default=str))


def _attacked_kind(spec: RunSpec):
    """The kind a record's attack took (None without an attack; False when its attack is no longer registered)."""
    if spec.attack is None:
        return None
    try:
        return compatible_kind(DEFENSES.get(spec.defense), ATTACKS.get(spec.attack), TASKS.get(spec.task))
    except BenchError:
        return False


def _protocol_of(spec: RunSpec, record, kind) -> str | None:
    """The release path a record ran (its notes say it; older records: chosen again as the runner chooses it)."""
    if "protocol" in record.notes:
        return record.notes["protocol"]
    try:
        return choose_path(DEFENSES.get(spec.defense), TASKS.get(spec.task).protocols, kind).name
    except BenchError:
        return None


def plan(spec: RunSpec, index: RecordIndex, releases: ReleaseStore | None) -> str:
    """What a cell would reuse, without running or reading anything heavy: "stored release", "regenerated release"
    (the client's part runs again), or "" (it runs in full)."""
    found = target(spec)
    if found is None:
        return ""
    if releases is not None and releases.has(found.key):
        return "stored release"
    return "regenerated release" if index.find(spec, found) is not None else ""


def planned(spec: RunSpec) -> str:
    """``plan`` for a cell run inside ``reusing``: "" where reuse is off."""
    active = _ACTIVE.get()
    return plan(spec, active.index(), active.releases) if active is not None and active.lookup else ""


# -- reusing a cell ---------------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """What ``prepare`` found: the cell ready for its attack (``cell``), or None to run it in full."""

    cell: tuple | None = None  # (context, output, attacked kind, release path), as run_defense returns them
    run_id: str = ""  # the run whose server part the cell carries
    source: str = ""  # "store" or "regenerated"
    notes: dict[str, Any] = field(default_factory=dict)  # what the record says of the reuse (or why there was none)


class Unusable(Exception):
    """A stored entry or a record that cannot stand in for this cell's server part (the reason)."""


def prepare(spec: RunSpec) -> Prepared:
    """The cell with a recorded configuration's release and utility in place, when reuse is on and one qualifies."""
    active = _ACTIVE.get()
    found = target(spec) if active is not None and active.lookup else None
    if found is None:
        return Prepared()
    why: list[str] = []
    if active.releases is not None:
        try:
            prepared = _from_store(spec, found, active.releases)
            if prepared is not None:
                return prepared
        except (CorruptEntry, Unusable) as exc:
            active.releases.remove(found.key)
            why.append(f"the stored release was not used ({exc})")
    hit = active.index().find(spec, found)
    if hit is not None:
        record, comparable = hit
        try:
            return _regenerated(spec, found, record, comparable, why)
        except Unusable as exc:
            why.append(f"run {_origin(record)} could not be reused ({exc})")
    return Prepared(notes={"reuse": "; ".join(why) + "; ran in full"} if why else {})


def _from_store(spec: RunSpec, found: Target, releases: ReleaseStore) -> Prepared | None:
    entry = releases.get(found.key)
    if entry is None:
        return None
    context, defense, wanted, path = cell_context(spec)
    meta = entry.meta
    try:
        stored = unpack(meta["cell"], entry.arrays)
        release = _release(unpack(meta["release"], entry.arrays), found, defense, context)
    except (KeyError, TypeError, ValueError, IndexError, RuntimeError) as exc:
        raise Unusable(f"its content is not a release ({exc.__class__.__name__})") from None
    if release_digest(release) != meta.get("release_digest"):
        raise Unusable("its release does not match its digest")
    if meta.get("data_hash") != context.data.data_hash():
        raise Unusable("the task's data differ from the data it was made from")
    encoder = _adversary_encoder(defense, context, path)
    if meta.get("encoder") != f"{spec.encoder}@{encoder.revision}":
        raise Unusable(f"it was made with encoder {meta.get('encoder')}")
    engine_only = {"truth_spans": stored["truth_spans"]} if path.name == "tokens" else {}
    output = path.output(stored["utility"], {found.kind: release}, stored["notes"], encoder, probe=stored["probe"],
                         **engine_only)
    _check_utility(context.task, output.utility, output.probe)
    run_id = meta["run_id"]
    return Prepared((context, output, wanted, path), run_id, "store",
                    {"reused_from": run_id, "reused": f"the stored release (digest verified) and the utility of run "
                                                      f"{run_id}; only the attack ran"})


def _regenerated(spec: RunSpec, found: Target, record, comparable: bool, why: list[str]) -> Prepared:
    context, defense, wanted, path = cell_context(spec, client_only=True)
    if record.data_hash != context.data.data_hash():
        raise Unusable("the task's data differ from the data it ran on")
    utility, probe = _recorded_utility(context.task, record)
    server = context.task.server(spec, context.training)
    if hasattr(server, "probe") and not probe:  # as expects_probe: the server fits the probe beside its head
        raise Unusable("it predates the probe, whose utility/probe_* metrics a full run records")
    output = path.run(defense, context, server)  # the client's part alone
    encoder = output.encoder or context.encoder
    if record.versions.get("encoder") != f"{spec.encoder}@{encoder.revision}":
        raise Unusable(f"it ran with encoder {record.versions.get('encoder')}")
    digest = release_digest(output.release(found.kind))
    recorded = record.notes.get("release_digest") if comparable else None
    if recorded is not None and recorded != digest:
        raise Unusable("the client's part made another release than the recorded one (its digest differs)")
    output.utility, output.probe = utility, probe
    output.notes.update({k: v for k, v in record.notes.items() if k in SERVER_NOTES or k.startswith(ADAPTATION)})
    run_id = _origin(record)
    check = "it matches the recorded release digest" if recorded else "no recorded digest of this release to check"
    notes = {"reused_from": run_id,
             "reused": f"the release made again by the client's part alone ({check}) and the utility of run "
                       f"{run_id}; only the client's part and the attack ran"}
    if why:
        notes["reuse"] = "; ".join(why) + "; regenerated"
    return Prepared((context, output, wanted, path), run_id, "regenerated", notes)


def _origin(record) -> str:
    """The run whose server part a record carries: its own, or the one it reused."""
    return record.notes.get("reused_from", record.run_id)


def _recorded_utility(task, record) -> tuple[dict[str, float], dict[str, float]]:
    """A record's utility and probe metrics by the task's metric names; ``Unusable`` if they are not the task's."""
    utility, probe, used = {}, {}, set()
    for metric in task.metrics:
        for target_dict, key in ((utility, f"utility/{metric.name}"), (probe, f"utility/{PROBE_PREFIX}{metric.name}")):
            if key in record.metrics:
                target_dict[metric.name] = record.metrics[key]
                used.add(key)
    if not utility or {k for k in record.metrics if k.startswith("utility/")} - used:
        raise Unusable("its utility metrics are not the task's")
    return utility, probe


def _check_utility(task, utility: dict, probe: dict) -> None:
    names = {m.name for m in task.metrics}
    if not utility or set(utility) - names or set(probe) - names:
        raise Unusable("its utility metrics are not the task's")


def _adversary_encoder(defense, context, path: ReleasePath):
    """The encoder the adversary holds with a frozen token or representation release (``CellOutput.encoder``)."""
    if path.name == "tokens" and context.options.adapt:  # the server's adapted checkpoint, where the attack runs it
        return adapted_encoder(defense, context, body=reads_encoder_body(context.spec))[0]
    return context.encoder


# -- after the attack: the record's notes and the store ---------------------------------------------------------


@dataclass
class Kept:
    """The attacked release's digest, taken before the attack, and what goes into the record and the store."""

    spec: RunSpec
    kind: ReleaseKind | None
    digest: str | None
    started: float

    def notes(self, prepared: Prepared) -> dict[str, Any]:
        """``release_digest`` and ``attack_s`` (the attack and its reference, seconds), and the reuse notes."""
        notes = {} if self.digest is None else {"release_digest": self.digest,
                                                "attack_s": round(time.perf_counter() - self.started, 3)}
        return {**notes, **prepared.notes}

    def keep(self, record, output, prepared: Prepared) -> None:
        """Store the cell's release, utility and notes for the next attack on its configuration (reuse on)."""
        active = _ACTIVE.get()
        found = target(self.spec) if active is not None and active.releases is not None and self.digest else None
        if found is None or prepared.source == "store":
            return
        release = output.release(self.kind)
        if release_digest(release) != self.digest:
            return  # the attack changed the release in place: what it saw is no longer there to keep
        arrays: dict[str, np.ndarray] = {}
        try:
            meta = {
                "format": FORMAT, "key": found.key, "run_id": prepared.run_id or record.run_id,
                "release_digest": self.digest, "data_hash": record.data_hash, "encoder": record.versions["encoder"],
                "spec": json.loads(base_config(self.spec.to_dict())), "protocol": found.protocol,
                "kind": found.kind.value, "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "release": pack(_release_payload(release), arrays),
                "cell": pack({"utility": dict(output.utility), "probe": dict(output.probe), "notes": dict(output.notes),
                              "truth_spans": output.truth_spans if isinstance(output, TokenOutput) else None}, arrays),
            }
        except TypeError:
            return  # something in it cannot be stored without pickle: the next attack runs in full
        active.releases.remove(found.key)  # a full run (--no-reuse, or after a failed check) replaces what was there
        active.releases.put(found.key, meta, arrays)


def before_attack(spec: RunSpec, output, wanted: ReleaseKind | None) -> Kept:
    """The attacked release's digest (building a deferred release), taken before the attack runs."""
    digest = release_digest(output.release(wanted)) if wanted is not None else None
    return Kept(spec, wanted, digest, time.perf_counter())


# -- releases: digest, payload, rebuilt -------------------------------------------------------------------------


def release_digest(release: Release) -> str:
    """SHA-256 of a canonical serialization of what the adversary observes: the kind, the data, the owners, the
    split, the known pairs, the public mechanism and token space (``Release.slots`` and ``span_prior``, derived from
    the task's spans, are checked with the stored entry instead). A model release's weights count by their files'
    content; a prediction API by its public parts (the answers come from the trained victim)."""
    mechanism = release.mechanism
    described = None if mechanism is None else (getattr(mechanism, "describe", lambda: type(mechanism).__name__)(),
                                                 getattr(mechanism, "origin", None))
    digest = hashlib.sha256(b"release-digest-1")
    _feed(digest, (release.kind.value, _canonical_data(release.data), release.owners, release.split,
                   release.known_pairs, described, release.space))
    return digest.hexdigest()


def value_digest(value: Any) -> str:
    """SHA-256 of any value ``release_digest`` reads (nested containers, arrays, numbers, strings, dataclasses)."""
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()


def _canonical_data(data: Any) -> Any:
    if isinstance(data, GradientRelease):
        return {"model": {k: v for k, v in data.model.state_dict().items()}, "gradients": data.gradients,
                "targets": data.targets, "regression": data.regression, "batch_size": data.batch_size,
                **({"client": dict(data.client.state_dict())} if data.client is not None else {})}
    if isinstance(data, ModelRelease):
        return dataclasses.replace(data, path=_folder_digest(data.path), base=Path(data.base).name)
    if isinstance(data, ServerModel):  # the trained weights, the candidates and the public pool
        return {"weights": dict(data.weights.state_dict()), "candidates": data.candidates, "labels": data.labels,
                "public": data.public, "train_size": data.train_size}
    if isinstance(data, PredictionAccess):
        return {f.name: getattr(data, f.name) for f in dataclasses.fields(data) if f.name not in ("answer", "answered")}
    return data


def _folder_digest(path: str) -> str:
    """SHA-256 of a folder's files (names and content), or the name itself when it is not a folder."""
    folder = Path(path)
    if not folder.is_dir():
        return path
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(folder)).encode("utf-8") + b"\0")
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _feed(digest, value: Any) -> None:
    """Feed ``value`` to ``digest`` with its type and length tagged, so distinct values never collide."""
    if value is None:
        digest.update(b"N")
    elif isinstance(value, bool):
        digest.update(b"T" if value else b"F")
    elif isinstance(value, (np.ndarray, np.generic)) or (hasattr(value, "detach") and hasattr(value, "numpy")):
        array = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
        array = array if array.flags.c_contiguous else array.copy(order="C")
        digest.update(f"A{array.dtype.str}{array.shape}".encode("ascii"))
        digest.update(array.tobytes() if not array.dtype.hasobject else repr(array.tolist()).encode("utf-8"))
    elif isinstance(value, int):
        digest.update(f"I{value};".encode("ascii"))
    elif isinstance(value, float):
        digest.update(b"D" + struct.pack("<d", value))
    elif isinstance(value, str):
        encoded = value.encode("utf-8")
        digest.update(f"S{len(encoded)}:".encode("ascii") + encoded)
    elif isinstance(value, (list, tuple)):
        digest.update(f"{'L' if isinstance(value, list) else 'U'}{len(value)}:".encode("ascii"))
        for item in value:
            _feed(digest, item)
    elif isinstance(value, dict):
        digest.update(f"M{len(value)}:".encode("ascii"))
        for key in sorted(value, key=lambda k: (type(k).__name__, repr(k))):
            _feed(digest, key)
            _feed(digest, value[key])
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        digest.update(f"O{type(value).__name__}:".encode("utf-8"))
        _feed(digest, {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                       if not callable(getattr(value, f.name))})
    else:  # a callable or a live object: only its type is public here
        digest.update(f"?{type(value).__name__};".encode("utf-8"))


def _release_payload(release: Release) -> dict[str, Any]:
    """What the store keeps of a release (the mechanism and token space are rebuilt from the defense)."""
    data = release.data
    if isinstance(data, GradientRelease):
        first = next(iter(data.model.parameters()))
        data = {"$gradients": True, "state": {k: v.detach().cpu().numpy() for k, v in data.model.state_dict().items()},
                "dim": int(first.shape[1]), "outputs": int(data.targets.shape[-1]), "gradients": data.gradients,
                "targets": data.targets, "regression": data.regression, "batch_size": data.batch_size,
                "client": None if data.client is None else
                {k: v.detach().cpu().numpy() for k, v in data.client.state_dict().items()}}
    elif not isinstance(data, (list, np.ndarray)):
        raise TypeError(f"a {type(data).__name__} release is not stored")
    return {"kind": release.kind.value, "data": data, "owners": release.owners, "split": release.split,
            "known_pairs": release.known_pairs, "slots": release.slots, "span_prior": release.span_prior,
            "span_public": release.span_public}


def _release(payload: dict[str, Any], found: Target, defense, context) -> Release:
    """A stored release with its public mechanism and token space rebuilt from the defense, as its path makes
    them."""
    if payload["kind"] != found.kind.value:
        raise ValueError("another kind")
    data = payload["data"]
    if isinstance(data, dict) and data.get("$gradients"):
        import torch


        model = initial_head(data["dim"], data["outputs"], context.training, context.spec.seed).eval()
        model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in data["state"].items()})
        client = None
        if data["client"] is not None:  # a store entry without the key predates the client layer: regenerated
            client = initial_client_layer(data["dim"], context.training, context.spec.seed).eval()
            client.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in data["client"].items()})
        data = GradientRelease(model, data["gradients"], data["targets"], data["regression"], data["batch_size"],
                               client)
    if found.protocol == "tokens":
        mechanism, space = public_token_mechanism(defense), defense.token_space()
    else:
        mechanism, space = defense.representation_mechanism(), None
    return Release(found.kind, data, owners=payload["owners"], mechanism=mechanism, space=space,
                   known_pairs=payload["known_pairs"], split=payload["split"], slots=payload["slots"],
                   span_prior=payload["span_prior"], span_public=payload.get("span_public"))
