"""Every deviation, limit and caveat a component's docstring names is on the known-limits page."""

from __future__ import annotations

import sys
import types
from collections import Counter

from bench.results import limits


def component(doc: str) -> type:
    module = types.ModuleType("bench_plugins.limits_example")
    module.__doc__ = doc
    sys.modules[module.__name__] = module
    return type("Example", (), {"__module__": module.__name__})


def test_each_labelled_sentence_becomes_one_entry_to_its_paragraphs_end_or_the_next_label():
    cls = component('''Example attack.

Paper: someone. Deviation: the encoder is frozen
offline. Limit of this setting: the signs are lost.

Caveat: the reference
counts public text.
''')
    assert limits.entries(cls) == ["Deviation: the encoder is frozen offline.", "Limit of this setting: the signs are lost.",
                                   "Caveat: the reference counts public text."]
    assert limits.entries(component("A defense with no departures from its paper.")) == []


def test_the_page_holds_every_shipped_entry_and_the_tables_link_to_it():
    from bench.engine import runner  # noqa: F401  (registers the shipped components)

    found = limits.components()
    page = limits.page("bench report --pages docs/results", found, Counter())
    assert found["attack-rss"] and "## attack `rss`" in page
    for entries in found.values():
        assert all(f"- {entry}" in page for entry in entries)
    assert "None: every record is at its components' current versions." in page
    linked = limits.links([("attack", "rss"), ("defense", "none"), ("defense", "texthide")], found)
    assert linked == ("Known limits: [rss](known-limits.md#attack-rss), [texthide](known-limits.md#defense-texthide).")
