"""abs-rss: similarity on absolute values re-identifies sign-masked representations that signed RSS cannot."""

import numpy as np
import pytest
import torch

from bench import PublicKnowledge, Release, ReleaseKind
from bench.attacks.abs_rss import AbsRSS
from bench.attacks.rss import RSS
from bench.defenses.texthide import TextHide


class TableEncoder:
    """An encoder that returns fixed rows: corpus text ``"s<i>"`` -> row ``i``."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table

    def encode(self, texts):
        return self.table[[int(t[1:]) for t in texts]]


def corpus(n: int = 300, dim: int = 48, seed: int = 0) -> np.ndarray:
    """Sentence-like representations: a shared direction (as mean-pooled encoders have) plus per-sentence parts."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=dim) + 0.6 * rng.normal(size=(n, dim))).astype(np.float32)


def masked_release(table: np.ndarray, owners: np.ndarray, m) -> Release:
    """The owners' rows as TextHide's inference queries: masked by one of its pool's m masks, not mixed."""
    defense = TextHide(m=m, k=4)
    generator = torch.Generator().manual_seed(1)
    defense.setup(table.shape[1], generator)
    hidden = defense.hide_inference(torch.from_numpy(table[owners]), generator).numpy()
    return Release(ReleaseKind.SENTENCE_EMBEDDINGS, hidden, owners=owners)


@pytest.mark.parametrize("m", [1, 16, 256, "inf"])
def test_absolute_values_reidentify_masked_unmixed_rows_exactly(m):
    table = corpus()
    owners = np.arange(0, 300, 3)
    release = masked_release(table, owners, m)
    public = PublicKnowledge(TableEncoder(table), "sst2", frozenset({"index"}), [f"s{i}" for i in range(len(table))])
    assert np.array_equal(AbsRSS().attack(release, public), owners)  # identity 1.0, whatever the pool size
    signed = RSS().attack(release, public)
    assert np.mean(signed == owners) < 0.5  # signed search is lost under the masks, even under a single one


def test_without_a_mask_both_searches_find_every_row():
    """m = 0 sends the representation as it is: signed and absolute search both find every row."""
    table = corpus()
    owners = np.arange(50)
    public = PublicKnowledge(TableEncoder(table), "sst2", frozenset({"index"}), [f"s{i}" for i in range(len(table))])
    plain = masked_release(table, owners, 0)
    assert np.array_equal(RSS().attack(plain, public), owners)
    assert np.array_equal(AbsRSS().attack(plain, public), owners)


def test_abs_rss_is_rss_scored():
    """The same metrics and random reference as RSS: only the search differs."""
    assert AbsRSS.metrics == RSS.metrics and AbsRSS.random_guess is RSS.random_guess and AbsRSS.score is RSS.score
    assert AbsRSS.knowledge == RSS.knowledge
