"""Known limits: the deviations, limits and caveats the shipped components' docstrings name, as one page.

A component's module docstring marks each with a label at the start of a sentence ("Deviation:", "Deviations in
the offline default:", "Limit of this setting:", "Caveat:"); the entry runs to the end of its paragraph or to the
next label. ``bench report --pages`` prints the page, and every ranked table links to the entries of its attack and
defenses, so a figure is never read without its limits.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

from bench.core.registry import ATTACKS, DEFENSES, TASKS

LABEL = re.compile(r"(?:^|(?<=[.;)] ))((?:Deviations?|Limits?|Caveats?|Known limits?)\b[^:.]{0,60}:)", re.MULTILINE)
PAGE = "known-limits.md"


def anchor(kind: str, name: str) -> str:
    """The page's anchor of a component's entries: ``attack-rss``."""
    return f"{kind}-{name}"


def entries(cls: type) -> list[str]:
    """The labelled deviations, limits and caveats of the file that defines ``cls``, one line each."""
    text = (sys.modules[cls.__module__].__doc__ or "") if cls.__module__ in sys.modules else ""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        flat = " ".join(line.strip() for line in paragraph.splitlines()).strip()
        starts = [m.start(1) for m in LABEL.finditer(flat)]
        found += [flat[a:b].strip() for a, b in zip(starts, starts[1:] + [len(flat)])]
    return found


def components() -> dict[str, list[str]]:
    """anchor -> entries, for every registered attack, defense and task that names any."""
    found = {}
    for kind, registry in (("attack", ATTACKS), ("defense", DEFENSES), ("task", TASKS)):
        for name in registry.names():
            listed = entries(registry.get(name))
            if listed:
                found[anchor(kind, name)] = listed
    return found


def page(command: str, limits: dict[str, list[str]], awaiting: Counter) -> str:
    """The known-limits page: each component's entries under its anchor, then the cells awaiting a re-run
    (``awaiting``: (task, defense, attack, versions) -> superseded records)."""
    lines = ["<!-- printed by bench report: edits are overwritten -->", "# Known limits", "",
             f"Printed by `{command}` from the docstrings of the components (each file's own account of where it "
             "departs from its paper, and what its figures do not say). Every ranked table links here.", ""]
    for key in sorted(limits):
        kind, name = key.split("-", 1)
        # the heading's slug is the anchor (``anchor``), on the docs site and on GitHub alike
        lines += [f"## {kind} `{name}`", "", *(f"- {entry}" for entry in limits[key]), ""]
    lines += ["## Awaiting a re-run", ""]
    if awaiting:
        lines += ["A component changed what these cells compute (a new version). Their records stay in "
                  "`results/records`, but no table shows what the change moved until `bench run --grid <grid> "
                  "--results-dir results` runs them again: a new task or defense version takes the whole record off, "
                  "a new attack version only the attack's figures it does not declare unchanged (`Attack.stable`; "
                  "the utility stays).", "", "| task | defense | attack | recorded → current | records |",
                  "|---|---|---|---|---:|"]
        lines += [f"| {task} | {defense} | {attack} | {versions} | {count} |"
                  for (task, defense, attack, versions), count in sorted(awaiting.items())]
    else:
        lines += ["None: every record is at its components' current versions."]
    return "\n".join(lines).rstrip() + "\n"


def links(kinds_names: list[tuple[str, str]], limits: dict[str, list[str]], prefix: str = "") -> str:
    """"Known limits: [rss](known-limits.md#attack-rss), ..." for the components that have entries ("" if none)."""
    keys = list(dict.fromkeys(anchor(k, n) for k, n in kinds_names if anchor(k, n) in limits))
    if not keys:
        return ""
    return "Known limits: " + ", ".join(f"[{k.split('-', 1)[1]}]({prefix}{PAGE}#{k})" for k in keys) + "."
