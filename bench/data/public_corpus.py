"""Public text for masked-LM pretraining and for measuring an MLM: offline files, or any hub corpus.

Offline sources (``$BENCH_DATA_DIR``, the layout of ../shared/data):

- ``squad``: the sentences of the SQuAD v1.1 dev contexts (Wikipedia), ``squad/dev-v1.1.json.zip``;
- ``conll2003``: the CoNLL-03 training sentences (Reuters news), rebuilt from ``conll2003/eng.train``'s
  tokens (joined by spaces, which WordPiece splits exactly as the original spacing);
- ``agnews``: the AG News dev texts, ``aia/agnews/dev.tsv``;
- ``auto`` (default): SQuAD + CoNLL-03.

A source that is the evaluation data of the task being measured (``exclude_task``) is left out and the
description says so. Contexts are split into sentences with nltk's punkt when its data is installed,
else with a simple regex (the description says which). Every offline source sets aside a fixed,
seeded slice of ``HELD_OUT`` sentences (a tenth of a small source) that no ``public_corpus`` call
returns: ``held_out`` gives it, to measure an MLM on text it was never trained on.

Online: any other name is a ``datasets`` corpus read by streaming, the first n non-empty texts of its
train split: ``name`` or ``name:config``, e.g. ``wikitext:wikitext-103-raw-v1`` or ``bookcorpus``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

from bench.core.errors import BenchError
from bench.core.examples import data_dir
from bench.core.files import read_utf8
from bench.core.hub import offline_unless_reachable, unreachable_note
from bench.core.seeding import numpy_generator

OFFLINE = ("squad", "conll2003", "agnews")
KNOWN = (*OFFLINE, "auto")
AUTO = ("squad", "conll2003")
HELD_OUT = 200  # sentences per offline source (a tenth if it has fewer than 2000) kept out of every corpus
HUB_EXAMPLE = "wikitext:wikitext-103-raw-v1"
# task names whose evaluation data a source is: exact names, or name parts that mark the source
TASK_NAMES = {"squad": ({"squad", "mrc"}, ("squad",)), "conll2003": ({"ner", "conll"}, ("conll",)),
              "agnews": ({"agnews"}, ("agnews", "ag_news", "ag-news"))}
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?(:[\w.\-]+)?")


@functools.lru_cache(maxsize=1)
def sentence_splitter() -> tuple[Callable[[str], list[str]], str]:
    """nltk's punkt sentence splitter when its data is installed, else a regex; and its name."""
    try:
        import nltk

        for resource in ("tokenizers/punkt_tab/english/", "tokenizers/punkt"):
            try:
                nltk.data.find(resource)
            except LookupError:
                continue
            nltk.sent_tokenize("Probe one. Probe two.")  # punkt_tab vs punkt: fail here, not later
            return nltk.sent_tokenize, "nltk punkt sentence split"
    except (ImportError, LookupError):
        pass
    return _SENTENCE_END.split, "simple regex sentence split (nltk punkt data not installed)"


def _file(root: str, *parts: str):
    path = Path(root).joinpath(*parts)
    if not path.is_file():
        raise BenchError(f"public corpus file {path} is missing: point BENCH_DATA_DIR at a copy of ../shared/data, "
                         f"or name a hub corpus such as {HUB_EXAMPLE} where the Hugging Face hub is reachable.")
    return path


def _read(source: str) -> tuple[str, ...]:
    """All distinct sentences of an offline source, in file order."""
    return _read_in(str(data_dir()), source)


@functools.lru_cache(maxsize=4)
def _read_in(root: str, source: str) -> tuple[str, ...]:
    if source == "squad":
        with zipfile.ZipFile(_file(root, "squad", "dev-v1.1.json.zip")) as archive:
            data = json.loads(archive.read("dev-v1.1.json"))
        split, _ = sentence_splitter()
        contexts = dict.fromkeys(p["context"] for article in data["data"] for p in article["paragraphs"])
        texts = [s.strip() for c in contexts for s in split(c)]
    elif source == "conll2003":
        texts, words = [], []
        lines = read_utf8(_file(root, "conll2003", "eng.train")).splitlines()
        for line in [*lines, ""]:
            if not line.strip() or line.startswith("-DOCSTART-"):
                texts.append(" ".join(words))
                words = []
            else:
                words.append(line.split(" ", 1)[0])
    else:
        lines = read_utf8(_file(root, "aia", "agnews", "dev.tsv")).splitlines()
        texts = [line.rsplit("\t", 1)[0].strip() for line in lines if line.strip() and line != "text\tlabel"]
    return tuple(dict.fromkeys(t for t in texts if len(t.split()) >= 4))  # no fragments, no duplicates


def _held_out_indices(source: str) -> np.ndarray:
    count = len(_read(source))
    return numpy_generator(0, "public-corpus-held-out", source).permutation(count)[: min(HELD_OUT, count // 10)]


def _describe(source: str) -> str:
    return {"squad": f"SQuAD v1.1 dev contexts (Wikipedia), {sentence_splitter()[1]}",
            "conll2003": "CoNLL-03 eng.train sentences (Reuters), rebuilt from tokens",
            "agnews": "AG News dev texts"}[source]


def source_of_task(task: str | None) -> str | None:
    """The offline source that is task ``task``'s evaluation data, if any."""
    if not task:
        return None
    name = task.lower()
    for source, (exact, parts) in TASK_NAMES.items():
        if name == source or name in exact or any(p in name for p in parts):
            return source
    return None


def _hub(name: str, n: int | None) -> list[str]:
    """The first n non-empty texts of the train split of a ``datasets`` corpus, streamed."""
    corpus, _, config = name.partition(":")

    if offline_unless_reachable() and unreachable_note():  # a stream cannot come from the cache: fail now
        raise BenchError(f"public corpus '{name}' is not an offline one ({', '.join(KNOWN)}; files in "
                         f"BENCH_DATA_DIR) and {unreachable_note()}; use an offline corpus.")
    try:
        import datasets

        stream = datasets.load_dataset(corpus, config or None, split="train", streaming=True)
        texts: list[str] = []
        for row in stream:
            text = row.get("text")
            if text is None:  # no "text" column: the first string column
                text = next((v for v in row.values() if isinstance(v, str)), "")
            if text.strip():
                texts.append(text.strip())
            if n is not None and len(texts) >= n:
                break
    except Exception as exc:  # datasets raises many kinds when the hub is out of reach or the name is wrong
        raise BenchError(f"public corpus '{name}' is not an offline one ({', '.join(KNOWN)}; files in "
                         f"BENCH_DATA_DIR) and the hub could not stream it ({exc.__class__.__name__}: "
                         f"{str(exc)[:120]}); use an offline corpus, or run where the Hugging Face hub is "
                         "reachable (HF_HUB_OFFLINE unset).") from exc
    if not texts:
        raise BenchError(f"public corpus '{name}' streamed no text.")
    return texts


def check_corpus_name(name: str) -> None:
    """Raise ``BenchError`` unless ``name`` is an offline source, ``auto``, or shaped like a ``datasets`` name."""
    if name not in KNOWN and not _HUB_NAME.fullmatch(name):
        raise BenchError(f"unknown public corpus '{name}'; offline: {', '.join(KNOWN)}; online: a datasets name "
                         f"such as {HUB_EXAMPLE} or bookcorpus.")


def public_corpus(name: str = "auto", exclude_task: str | None = None, n: int | None = None,
                  seed: int = 0) -> tuple[list[str], str, str]:
    """Public sentences, what they are, and the sha256 of the exact list.

    Args:
        name: an offline source (squad, conll2003, agnews), ``auto`` (squad + conll2003), or a ``datasets``
            corpus ``name[:config]`` streamed from the hub.
        exclude_task: the task being measured; an offline source that is its evaluation data is left out.
        n: sentences wanted (None = all); offline, a seeded sample kept in corpus order; online, the first n.
        seed: the sample's seed.
    """
    if n is not None and n < 1:
        raise BenchError(f"a public corpus needs n >= 1 sentences (or all), got {n}.")
    check_corpus_name(name)
    sources = list(AUTO) if name == "auto" else [name]
    excluded = [s for s in sources if s == source_of_task(exclude_task)]
    sources = [s for s in sources if s not in excluded]
    if not sources:
        raise BenchError(f"public corpus '{name}' is the evaluation data of task '{exclude_task}'; choose another "
                         f"({', '.join(k for k in KNOWN if k != name)}).")
    texts: list[str] = []
    parts = []
    for source in sources:
        if source in OFFLINE:
            held = set(_held_out_indices(source).tolist())
            texts += [t for i, t in enumerate(_read(source)) if i not in held]
            parts.append(f"{source}: {_describe(source)}")
        else:
            texts += _hub(source, n)
            parts.append(f"{source}: the first texts of its train split (datasets, streamed)")
    texts = list(dict.fromkeys(texts))
    if n is not None and n < len(texts):
        chosen = numpy_generator(seed, "public-corpus", name).permutation(len(texts))[:n]
        texts = [texts[i] for i in np.sort(chosen)]
    description = f"{name}, {len(texts)} sentences ({'; '.join(parts)})"
    if any(s in OFFLINE for s in sources):
        description += "; without each source's held-out sentences"
    if excluded:
        description += f"; left out {', '.join(excluded)}: the evaluation data of task {exclude_task}"
    return texts, description, text_hash(texts)


def held_out(exclude_task: str | None = None, n: int = HELD_OUT) -> tuple[list[str], str, str]:
    """The fixed held-out slice of public text (first ``n`` of it): SQuAD's, or CoNLL-03's when the task
    being measured is SQuAD. No ``public_corpus`` call returns these sentences."""
    source = "conll2003" if source_of_task(exclude_task) == "squad" else "squad"
    indices = _held_out_indices(source)
    if not 1 <= n <= len(indices):
        raise BenchError(f"the held-out public text of {source} has {len(indices)} sentences; asked for {n}.")
    everything = _read(source)
    texts = [everything[i] for i in np.sort(indices[:n])]
    return texts, f"{len(texts)} held-out sentences of {source} ({_describe(source)})", text_hash(texts)


def text_hash(texts: list[str]) -> str:
    """sha256 of a list of texts, in order."""
    return hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()
