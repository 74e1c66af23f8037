"""Bracket scoring of constituency trees as evalb does with COLLINS.prm (Sekine and Collins' scorer).

No PyPI evaluator was sound here: PYEVALB 0.1.3 matches brackets as a set (evalb matches a multiset: two
NP brackets over one span in gold and one in the test tree give recall 1/2), keeps punctuation, has no
ADVP=PRT equivalence and scores the root wrapper. This module implements evalb's definition:

- a bracket is a labelled word span ``(label, start, end)`` (end exclusive) of a nonterminal node;
  preterminals (POS tags over one word) are not brackets, and the wrapper root (label ``TOP`` or empty, the
  treebank files' outer bracket) is not one either (``DELETE_LABEL TOP``); the sentence's top phrase (S, ...)
  is;
- function tags and indices are removed from labels (``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``);
- words whose GOLD part of speech is punctuation (``, : `` '' .``, COLLINS.prm's ``DELETE_LABEL``) are deleted
  from both trees before spans are compared (the test tree is scored by the gold tree's tags, as evalb's
  bug-fixed version does); a bracket left over no word is dropped;
- ADVP and PRT count as one label (``EQ_LABEL ADVP PRT``);
- matching is one-to-one over the multiset of brackets of each sentence; precision, recall and F1 are
  corpus-level (micro): matched / test brackets, matched / gold brackets, their harmonic mean. Unlabelled
  scores compare spans only (``LABELED 0``).

Trees must be free of traces (``-NONE-``; ``strip_traces`` removes them as ``DELETE_LABEL -NONE-`` does) and the
test side may be a tree over the same words or a list of brackets in the gold tree's word positions.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from bench.core.errors import BenchError

PUNCTUATION_TAGS = frozenset({",", ":", "``", "''", "."})  # COLLINS.prm DELETE_LABEL (punctuation preterminals)
EQUIVALENT_LABELS = {"PRT": "ADVP"}  # COLLINS.prm EQ_LABEL ADVP PRT
WRAPPER_LABELS = frozenset({"TOP", ""})  # COLLINS.prm DELETE_LABEL TOP, and the files' unlabelled outer bracket
TRACE_TAG = "-NONE-"

Bracket = tuple[str, int, int]  # (label, start word, end word exclusive)


def plain_label(label: str) -> str:
    """A nonterminal label without function tags and indices: ``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``;
    labels that start with a dash (``-NONE-``, ``-LRB-``) are kept whole."""
    if label.startswith("-"):
        return label
    return label.split("=", 1)[0].split("-", 1)[0] or label


def is_preterminal(node: Any) -> bool:
    """A node over exactly one word (a string leaf): a part-of-speech tag."""
    return not isinstance(node, str) and len(node) == 1 and isinstance(node[0], str)


def strip_traces(tree):
    """A copy of an ``nltk.Tree`` without ``-NONE-`` preterminals and the nodes left over nothing; None when
    nothing is left."""
    from nltk import Tree

    if isinstance(tree, str):
        return tree
    if is_preterminal(tree):
        return None if tree.label() == TRACE_TAG else Tree(tree.label(), [tree[0]])
    children = [c for c in (strip_traces(child) for child in tree) if c is not None]
    return Tree(tree.label(), children) if children else None


def tree_brackets(tree) -> list[Bracket]:
    """The brackets of an ``nltk.Tree`` in preorder: every nonterminal that is neither a preterminal nor the
    wrapper root, with its plain label (``plain_label``) and word span."""
    out: list[Bracket] = []

    def visit(node, start: int, root: bool) -> int:
        if isinstance(node, str):
            return start + 1
        if is_preterminal(node):
            if node.label() == TRACE_TAG:
                raise BenchError("evalb scores trees without traces: remove -NONE- first (strip_traces).")
            return start + 1
        slot = len(out)
        end = start
        for child in node:
            end = visit(child, end, False)
        if not (root and node.label() in WRAPPER_LABELS):
            out.insert(slot, (plain_label(node.label()), start, end))  # preorder: before its descendants
        return end

    visit(tree, 0, True)
    return out


def _kept_positions(tags: Sequence[str]) -> list[int]:
    """For each word boundary 0..n, the number of words before it that scoring keeps (not punctuation)."""
    positions = [0]
    for tag in tags:
        positions.append(positions[-1] + (tag not in PUNCTUATION_TAGS))
    return positions


def _scored(brackets: Sequence[Bracket], kept: list[int], labelled: bool) -> Counter:
    counts: Counter = Counter()
    for label, start, end in brackets:
        if not 0 <= start < end <= len(kept) - 1:
            raise BenchError(f"bracket {label} over words {start}-{end} is outside a sentence of {len(kept) - 1} "
                             "words.")
        a, b = kept[start], kept[end]
        if b > a:  # a bracket over punctuation only dominates nothing once punctuation is deleted
            name = EQUIVALENT_LABELS.get(plain_label(label), plain_label(label)) if labelled else ""
            counts[(name, a, b)] += 1
    return counts


def evalb(gold: Sequence, test: Sequence) -> dict[str, float]:
    """Corpus-level labelled and unlabelled bracket precision, recall and F1 (``lf lp lr uf up ur``) of ``test``
    (trees, or bracket lists in gold word positions) against ``gold`` trees (``nltk.Tree``), COLLINS.prm rules."""
    if len(gold) != len(test):
        raise BenchError(f"evalb got {len(gold)} gold trees and {len(test)} test parses.")
    matched = {True: 0, False: 0}
    gold_total = {True: 0, False: 0}
    test_total = {True: 0, False: 0}
    for gold_tree, parse in zip(gold, test):
        tags = [tag for _, tag in gold_tree.pos()]
        if hasattr(parse, "pos"):
            if len(parse.leaves()) != len(tags):
                raise BenchError(f"a test tree has {len(parse.leaves())} words; its gold tree has {len(tags)}.")
            parse = tree_brackets(parse)
        kept = _kept_positions(tags)
        gold_brackets = tree_brackets(gold_tree)
        for labelled in (True, False):
            g, t = _scored(gold_brackets, kept, labelled), _scored(parse, kept, labelled)
            matched[labelled] += sum((g & t).values())
            gold_total[labelled] += sum(g.values())
            test_total[labelled] += sum(t.values())
    scores = {}
    for labelled, prefix in ((True, "l"), (False, "u")):
        p = matched[labelled] / test_total[labelled] if test_total[labelled] else 0.0
        r = matched[labelled] / gold_total[labelled] if gold_total[labelled] else 0.0
        scores[f"{prefix}f"] = 2 * p * r / (p + r) if p + r else 0.0
        scores[f"{prefix}p"], scores[f"{prefix}r"] = p, r
    return {name: float(scores[name]) for name in ("lf", "lp", "lr", "uf", "up", "ur")}
