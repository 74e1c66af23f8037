"""One-file templates of a new defense, attack or task (``bench new``); each passes the component contract."""

from __future__ import annotations

from pathlib import Path

from bench.core.errors import BenchError
from bench.core.registry import ATTACKS, DEFENSES, NAME, TASKS

FOLDERS = {"defense": "defenses", "attack": "attacks", "task": "tasks"}

DEFENSE = '''"""{title}: Gaussian noise on sentence representations (replace with what the defense does).

Paper: none yet; cite the paper this defense follows (authors, title, venue, year, section).
Threat model: the adversary sees the noisy representation and knows sigma, not the sampled noise.
Deviations: none yet; list every way this implementation differs from the paper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench import RepresentationDefense, register_defense, require


@register_defense("{name}")
@dataclass
class {cls}(RepresentationDefense):
    """Adds N(0, sigma^2) noise to every coordinate of each sentence representation."""

    sigma: float = 0.5  # standard deviation of the noise added to each coordinate

    def __post_init__(self) -> None:
        require(0 <= self.sigma < float("inf"), f"{name} sigma must be finite and >= 0, got {{self.sigma}}.")

    def hide(self, reps, generator):
        """Add the noise, at training and at inference (the training split is hidden once; a defense whose paper
        re-hides each example every epoch sets the class attribute ``rehides_each_epoch = True``)."""
        return reps + self.sigma * torch.randn(reps.shape, generator=generator, dtype=reps.dtype)
'''

ATTACK = '''"""{title}: return the corpus text nearest to each released representation (replace with the attack).

Paper: none yet; cite the paper this attack follows (authors, title, venue, year, section).
Threat model: the adversary holds the public encoder, the task corpus and the released sentence
representations; it does not know which corpus texts were released.
Deviations: none yet; list every way this implementation differs from the paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Attack, Metric, PublicKnowledge, Release, ReleaseKind, Truth, register_attack, require


@register_attack("{name}")
@dataclass
class {cls}(Attack):
    """Guesses the top_k corpus texts of highest cosine similarity to each released row."""

    accepts: ClassVar[tuple[ReleaseKind, ...]] = (ReleaseKind.SENTENCE_EMBEDDINGS,)
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("identity", True, "fraction of released rows whose true text is among the guesses"),
    )
    # what the adversary knows besides the release, with the paper's reason (bench.KNOWLEDGE names the corpora)
    knowledge: ClassVar[dict[str, str]] = {{"index": "re-identification: the adversary's index holds the candidates"}}
    top_k: int = 1  # corpus texts guessed per released row; a row counts as recovered when any is right

    def __post_init__(self) -> None:
        require(self.top_k >= 1, f"{name} top_k must be >= 1, got {{self.top_k}}.")

    def attack(self, release: Release, public: PublicKnowledge) -> np.ndarray:
        """Indices of the top_k nearest corpus texts of each released row, ``(rows, top_k)``."""
        from bench.privacy.neighbours import cosine_search

        corpus_reps = public.encoder.encode(public.index)
        _, nearest = cosine_search(corpus_reps, np.asarray(release.data), k=min(self.top_k, len(public.index)))
        return nearest

    def random_guess(self, release: Release, public: PublicKnowledge, rng: np.random.Generator) -> np.ndarray:
        """Uniformly drawn corpus indices of the same shape."""
        return rng.integers(0, len(public.index), size=(len(release.owners), self.top_k))

    def score(self, guesses: np.ndarray, truth: Truth, public: PublicKnowledge) -> dict[str, float]:
        """The fraction of rows whose true text is guessed."""
        position = {{text: i for i, text in enumerate(public.index)}}
        true_rows = np.array([position[t] for t in truth.texts])
        return {{"identity": float(np.mean((np.asarray(guesses) == true_rows[:, None]).any(axis=1)))}}
'''

TASK = '''"""{title}: binary sentiment of short sentences (replace with the task and where its data comes from).

Paper: none yet; cite the dataset's paper (authors, title, venue, year).
Threat model: the client's sentences and labels are private; the server trains on releases only.
Deviations: none yet; the template's inline examples stand in for the task's files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from bench import Examples, Metric, TaskData, TokenTask, register_task, require
from bench.core.scores import accuracy
from bench.core.seeding import numpy_generator
from bench.data.examples import sample_indices

# replace with the task's data (read files under bench.data.examples.data_dir())
EXAMPLES = [
    (int(good), f"the {{noun}} is {{word}}")
    for noun in ("film", "story", "cast", "plot", "ending", "score")
    for good, word in ((1, "warm"), (1, "funny"), (1, "sharp"), (0, "dull"), (0, "flat"), (0, "stale"))
]


@register_task("{name}")
@dataclass
class {cls}(TokenTask):  # the tokens path calls its hooks (bench.TokenTask); representations need none
    """Classify a sentence as positive (1) or negative (0); scored by accuracy."""

    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("accuracy", True, "fraction of evaluation examples classified correctly"),
    )
    protocols: ClassVar[tuple[str, ...]] = ("representations", "tokens")
    num_labels: ClassVar[int] = 2
    default_n_train: ClassVar[int] = 24
    default_n_eval: ClassVar[int] = 12
    eval_fraction: float = 0.33  # share of the examples held out for evaluation (a fixed split, not the run's seed)

    def __post_init__(self) -> None:
        require(0 < self.eval_fraction < 1, f"{name} eval_fraction must be in (0, 1), got {{self.eval_fraction}}.")

    def load(self, n_train: int, n_eval: int, seed: int) -> TaskData:
        """A fixed train/evaluation split, then seeded samples of the requested sizes."""
        texts = tuple(text for _, text in EXAMPLES)
        examples = Examples(texts, np.array([label for label, _ in EXAMPLES]))
        order = np.random.default_rng(12345).permutation(len(texts))
        cut = int(round(len(texts) * (1 - self.eval_fraction)))
        train, evaluation = examples.subset(order[:cut]), examples.subset(order[cut:])
        rng = numpy_generator(seed, "data", self.registry_name)
        train = train.subset(sample_indices(len(train), n_train, rng))
        evaluation = evaluation.subset(sample_indices(len(evaluation), n_eval, rng))
        return TaskData(train, evaluation, "inline")

    def score(self, predictions, labels) -> dict[str, float]:
        """Accuracy, the headline metric."""
        return {{"accuracy": accuracy(predictions, labels)}}

    def server(self, spec, training):
        """A sentence classifier: the server's encoder and an MLP head."""
        from bench.models.servers import SentenceServer

        return SentenceServer(self.num_labels, training, spec.seed)
'''

TEMPLATES = {"defense": DEFENSE, "attack": ATTACK, "task": TASK}


def write_template(kind: str, name: str, folder: Path | None = None) -> Path:
    """Write the template of a new ``kind`` component named ``name``; returns its path."""
    if kind not in TEMPLATES:
        raise BenchError(f"bench new makes a defense, an attack or a task, not '{kind}'.")
    if not NAME.match(name):
        raise BenchError(f"{kind} name '{name}' must be lower-case letters and digits joined by '-' or '_' "
                         "(as in santext-plus).")
    registry = {"defense": DEFENSES, "attack": ATTACKS, "task": TASKS}[kind]
    if name in registry.names():
        raise BenchError(f"a {kind} named '{name}' is registered already; choose another name.")
    stem = name.replace("-", "_")
    folder = Path(FOLDERS[kind]) if folder is None else Path(folder)
    path = folder / f"{stem}.py"
    if path.exists():
        raise BenchError(f"{path} already exists; choose another name or remove that file.")
    words = stem.split("_")
    text = TEMPLATES[kind].format(name=name, cls="".join(w.capitalize() for w in words),
                                  title=" ".join(words).capitalize())
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
