"""Record migrations: old stored records keep loading, mapped to the current layout with their numbers untouched.

Schema 1 -> 2: privacy-adaptive pretraining moved from the token defenses' arguments (``adapt``,
``adapt_steps``, ...) to the server options (``spec.server``), because it is the server's choice,
not the client's mechanism. The moved options are completed with the defaults in force when
schema-1 records were written (frozen here: a migration must not follow later defaults), and the
config hash is recomputed from the migrated spec, so a grid recognises the cell it ran before.

Any schema: an attack's metrics (``privacy/<attack>/*``, ``random/<attack>/*``, in ``metrics`` and
``higher_is_better``) are listed in the order the attack declares them, headline first, since readers rank by the
first (``bench report``, the dashboard). Records made before the runner listed them so kept the order the attack
computed them in; they are read in declared order, values and directions untouched (an attack that is not registered
here leaves the record as it is). ``bench backfill`` rewrote the files for this before; reading now does it.

Any schema: a data source that names an absolute folder of the offline data (``local:/.../data/glue/SST-2``,
``offline /.../data/aia/blog``, as records made before sources were portable do) is read as the portable
``data:glue/SST-2``: the folder under ``$BENCH_DATA_DIR``. The record's ``data_hash`` (of the exact examples) is
what identifies the data; the stored line is not rewritten.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

from bench.core.errors import BenchError
from bench.core.registry import ATTACKS
from bench.core.spec import RunSpec

SCHEMA_VERSION = 2
# the adaptation defaults of schema-1 records (InputDefense's fields before the move); they are also
# ServerOptions' defaults today (tests/unit/test_params.py checks that every committed record rebuilds)
SERVER_DEFAULTS = ADAPTATION_DEFAULTS_V1 = {"adapt": "", "adapt_steps": 300, "adapt_batch_size": 16, "adapt_lr": 5e-5,
                          "adapt_corpus": "auto"}


DATA_PREFIX = "data:"  # a source under the offline data folder ($BENCH_DATA_DIR), named relative to it
_LOCAL = re.compile(r"^(?:local:|offline )(.+)$")  # the path forms sources had before


def portable_source(source: str, data_root: str | Path | None = None) -> str:
    """``source`` with an absolute path under the offline data folder replaced by ``data:<path in the folder>``.

    ``data_root`` is the folder the cell read (``bench.core.examples.data_dir()``); without it (a stored record),
    the path's last ``data`` folder is taken as the root, which is what every layout documented in
    docs/data.md gives. Other sources (``hub:...``, ``synthetic:...``, a file outside the folder) are kept."""
    match = _LOCAL.match(source) if isinstance(source, str) else None
    if not match:
        return source
    if data_root is not None:
        path = PurePosixPath(Path(os.path.abspath(Path(match.group(1)).expanduser())).as_posix())
        root = PurePosixPath(Path(os.path.abspath(Path(data_root).expanduser())).as_posix())
        return f"{DATA_PREFIX}{path.relative_to(root)}" if path.is_relative_to(root) and path != root else source
    parts = PurePosixPath(match.group(1)).parts
    below = [i for i, part in enumerate(parts[:-1]) if part == "data"]
    return f"{DATA_PREFIX}{PurePosixPath(*parts[below[-1] + 1:])}" if below else source


def declared_order(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its attack's metrics in the order the attack declares them (the same dictionary when they
    are already, or when the attack is not registered here)."""
    spec, metrics = data.get("spec"), data.get("metrics")
    attack = spec.get("attack") if isinstance(spec, dict) else None
    if not isinstance(attack, str) or not isinstance(metrics, dict):
        return data
    keys = list(metrics)
    prefixes = (f"privacy/{attack}/", f"random/{attack}/")
    if not any(key.startswith(prefixes) for key in keys):
        return data
    try:
        declared = {m.name: place for place, m in enumerate(ATTACKS.get(attack).metrics)}
    except BenchError:
        return data
    ordered = list(keys)
    for prefix in prefixes:
        slots = [i for i, key in enumerate(keys) if key.startswith(prefix)]
        ranked = sorted((keys[i] for i in slots), key=lambda key: declared.get(key[len(prefix):], len(declared)))
        for slot, key in zip(slots, ranked):
            ordered[slot] = key
    if ordered == keys:
        return data
    moved = dict(data, metrics={key: metrics[key] for key in ordered})
    directions = data.get("higher_is_better")
    if isinstance(directions, dict):
        moved["higher_is_better"] = {key: directions[key] for key in ordered if key in directions} | directions
    return moved


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A stored record's dictionary in the current schema (a new dictionary; the input is unchanged)."""
    if isinstance(data.get("data_source"), str):
        portable = portable_source(data["data_source"])
        if portable != data["data_source"]:
            data = dict(data, data_source=portable)
    data = declared_order(data)
    version = data.get("schema_version", 1)
    if type(version) is not int or not 1 <= version < SCHEMA_VERSION or not isinstance(data.get("spec"), dict):
        return data
    spec = dict(data["spec"])
    defense_args = dict(spec.get("defense_args") or {})
    moved = {k: defense_args.pop(k) for k in list(defense_args) if k in ADAPTATION_DEFAULTS_V1}
    spec.setdefault("server", {})
    migrated = dict(data, schema_version=SCHEMA_VERSION)
    if moved.get("adapt"):
        spec["defense_args"] = defense_args
        spec["server"] = {**ADAPTATION_DEFAULTS_V1, **moved}
        migrated["config_hash"] = RunSpec.from_dict(spec).config_hash()
    migrated["spec"] = spec
    return migrated
