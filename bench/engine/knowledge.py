"""What an attack may know besides the release: the corpora it declared (``Attack.knowledge``), built per cell.

``index``: every distinct text of the run's training and evaluation splits (a re-identification index; empty for a
model release, whose people no text names publicly). ``public``: sentences no private split of the run holds, from
the task's own source when its loader keeps them apart (``TaskData.public``) or the task offers public examples
(``Task.public_examples``), else the offline public sentences
(``bench.data.public_corpus``) without the task's own source; any sentence a private split also holds is dropped.
"""

from __future__ import annotations

import functools

from bench.core.components import PublicKnowledge
from bench.core.examples import TaskData, flatten_segments
from bench.core.registry import TASKS
from bench.core.releases import Release, ReleaseKind

OFFLINE_PUBLIC_SIZE = 20000  # sentences of offline public text, when the task keeps none of its own


def knowledge_for(attack_cls: type, release: Release, data: TaskData, encoder, task: str) -> PublicKnowledge:
    """The public weights and the corpora ``attack_cls`` declared, for an attack on ``release``."""
    granted = frozenset(attack_cls.knowledge)
    index = data.index_corpus()[0] if "index" in granted and release.kind is not ReleaseKind.MODEL else []
    public, source = public_of(data, task) if "public" in granted else ([], "")
    return PublicKnowledge(encoder, task, granted, index, public, source)


def public_of(data: TaskData, task: str) -> tuple[list[str], str]:
    """Public sentences for a run of ``task`` on ``data``, and what they are; none a private split holds."""
    texts, source = list(data.public), data.public_source
    if not texts:
        examples = TASKS.get(task)().public_examples(data)
        if examples is not None and len(examples):
            texts = list(dict.fromkeys(flatten_segments(list(examples.texts))[0]))
            source = f"{task}: {len(texts)} sentences of its sources the run does not sample"
    if not texts:
        texts, source = _offline(task)
    private = private_sentences(data)
    kept = [t for t in texts if t not in private]
    if len(kept) < len(texts):
        source += f"; {len(texts) - len(kept)} sentences a private split also holds left out"
    return kept, source


def private_sentences(data: TaskData) -> set[str]:
    """Every sentence (a pair's two) of every private split of ``data``."""
    return {s for split in data.private_splits() for s in flatten_segments(list(split.texts))[0]}


@functools.lru_cache(maxsize=8)
def _offline(task: str) -> tuple[list[str], str]:
    from bench.data.public_corpus import public_corpus

    texts, description, _ = public_corpus("auto", exclude_task=task, n=OFFLINE_PUBLIC_SIZE, seed=0)
    return texts, description
