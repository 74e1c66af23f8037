"""A cell before and through its client part: its context built from the spec, then the defense run on its
release path with the task's server."""

from __future__ import annotations

from bench.core.params import build_component
from bench.core.registry import ATTACKS, DEFENSES, TASKS
from bench.core.spec import RunSpec
from bench.core.versions import compatible_kind
from bench.engine.paths import CellContext, choose_path
from bench.engine.sanity import guard
from bench.engine.server_options import ServerOptions


def cell_context(spec: RunSpec, client_only: bool = False):
    """A cell before anything runs: ``(context, defense, attacked kind, release path)``, its data loaded;
    ``client_only``: for the client's part alone (``CellContext.client_only``)."""
    task = build_component(TASKS.get(spec.task), {})
    defense = guard(build_component(DEFENSES.get(spec.defense), spec.defense_args))  # checks what it releases
    attack_cls = ATTACKS.get(spec.attack) if spec.attack is not None else None
    wanted = compatible_kind(type(defense), attack_cls, type(task)) if attack_cls is not None else None
    path = choose_path(type(defense), type(task).protocols, wanted)
    data = task.load(spec.n_train, spec.n_eval, spec.seed)
    return CellContext(spec, task, data, spec.training, ServerOptions.of(spec.server), client_only), defense, wanted, \
        path


def run_defense(spec: RunSpec):
    """The client and server part of a cell: ``(context, output, attacked kind, release path)``."""
    context, defense, wanted, path = cell_context(spec)
    server = context.task.server(spec, context.training)
    private = context.options.private_training()
    if private is not None:
        server.privacy = private  # DP-SGD: the server's head trains by it (checked by make_spec)
    output = path.run(defense, context, server)
    if private is not None and not context.client_only:
        output.notes.update(private.facts)  # epsilon target and spent, delta, accountant, clip, noise, rate, steps
    return context, output, wanted, path
