"""Public text for masked-LM pretraining and for measuring an MLM: offline files or a hub corpus.

Offline sources (``$BENCH_DATA_DIR``, the layout of ../shared/data): ``squad`` (the sentences of the
SQuAD v1.1 dev contexts, Wikipedia), ``conll2003`` (the CoNLL-03 training sentences, Reuters news),
``agnews`` (AG News dev texts). ``auto`` = SQuAD + CoNLL-03. A source that is the evaluation data of
the task being measured is left out (``exclude_task``), and the description says so. Any other name
is a ``datasets`` corpus read by streaming where the hub is reachable, e.g.
``wikitext:wikitext-103-raw-v1`` (name:config) or ``bookcorpus``.
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile

import numpy as np

from bench.data import data_dir
from bench.errors import BenchError

OFFLINE = ("squad", "conll2003", "agnews")
SOURCE_TASKS = {"squad": {"squad"}, "conll2003": {"conll2003", "ner"}, "agnews": {"agnews"}}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")  # a simple splitter: punkt is not offline


def _squad() -> list[str]:
    with zipfile.ZipFile(data_dir() / "squad" / "dev-v1.1.json.zip") as archive:
        data = json.loads(archive.read("dev-v1.1.json"))
    contexts = [p["context"] for article in data["data"] for p in article["paragraphs"]]
    return [s.strip() for c in contexts for s in _SENTENCE_END.split(c) if len(s.split()) >= 4]


def _conll2003() -> list[str]:
    sentences, words = [], []
    for line in (data_dir() / "conll2003" / "eng.train").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if len(words) >= 4:
                sentences.append(" ".join(words))
            words = []
        else:
            words.append(line.split(" ", 1)[0])
    return sentences


def _agnews() -> list[str]:
    lines = (data_dir() / "aia" / "agnews" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[0].strip() for line in lines[1:] if line.strip()]


READERS = {"squad": _squad, "conll2003": _conll2003, "agnews": _agnews}


def _hub(name: str, n: int | None) -> list[str]:
    """The first n texts of a ``datasets`` corpus, streamed."""
    import datasets

    corpus, _, config = name.partition(":")
    try:
        stream = datasets.load_dataset(corpus, config or None, split="train", streaming=True)
        texts = []
        for row in stream:
            text = (row.get("text") or "").strip()
            if text:
                texts.append(text)
            if n is not None and len(texts) >= n:
                break
    except Exception as exc:  # datasets raises many kinds when the hub is out of reach
        raise BenchError(f"public corpus '{name}' is not offline ({', '.join(OFFLINE)}, auto) and the hub could "
                         f"not serve it ({exc.__class__.__name__}); use an offline source or run online.") from exc
    return texts


def public_corpus(name: str = "auto", exclude_task: str | None = None, n: int | None = None,
                  seed: int = 0) -> tuple[list[str], str, str]:
    """(sentences, description, sha256 of the sentences): a seeded sample of n (all for None)."""
    sources = ["squad", "conll2003"] if name == "auto" else [name]
    excluded = [s for s in sources if s in OFFLINE and exclude_task in SOURCE_TASKS[s]]
    sources = [s for s in sources if s not in excluded]
    if not sources:
        raise BenchError(f"public corpus '{name}' is the evaluation data of task '{exclude_task}'; choose another.")
    texts: list[str] = []
    for source in sources:
        if source in OFFLINE:
            texts += READERS[source]()
        elif re.fullmatch(r"[\w.\-/]+(:[\w.\-]+)?", source):
            texts += _hub(source, n)
        else:
            raise BenchError(f"unknown public corpus '{source}'; offline: {', '.join(OFFLINE)}, auto; "
                             "or a datasets name such as wikitext:wikitext-103-raw-v1.")
    texts = list(dict.fromkeys(texts))  # distinct, first occurrence kept
    if n is not None and n < len(texts):
        order = np.random.default_rng(seed).permutation(len(texts))[:n]
        texts = [texts[i] for i in sorted(order)]
    description = f"{'+'.join(sources)} ({len(texts)} sentences, simple regex sentence split)"
    if excluded:
        description += f"; left out {', '.join(excluded)} (evaluation data of {exclude_task})"
    digest = hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()
    return texts, description, digest
