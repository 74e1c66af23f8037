"""Record migrations: old stored records keep loading, mapped to the current layout with their numbers untouched.

Schema 1 -> 2: privacy-adaptive pretraining moved from the token defenses' arguments (``adapt``,
``adapt_steps``, ...) to the server options (``spec.server``), because it is the server's choice,
not the client's mechanism. The moved options are completed with the defaults in force when
schema-1 records were written (frozen here: a migration must not follow later defaults), and the
config hash is recomputed from the migrated spec, so a grid recognises the cell it ran before.
"""

from __future__ import annotations

from typing import Any

from bench.core.spec import RunSpec

SCHEMA_VERSION = 2
# the adaptation defaults of schema-1 records (InputDefense's fields before the move); they are also
# ServerOptions' defaults today (tests/unit/test_params.py checks that every committed record rebuilds)
SERVER_DEFAULTS = ADAPTATION_DEFAULTS_V1 = {"adapt": "", "adapt_steps": 300, "adapt_batch_size": 16, "adapt_lr": 5e-5,
                          "adapt_corpus": "auto"}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A stored record's dictionary in the current schema (a new dictionary; the input is unchanged)."""
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
