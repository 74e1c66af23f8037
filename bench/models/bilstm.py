"""``bilstm``: a BiLSTM sentence encoder over the frozen WordPiece embedding table of ``minilm``.

Qu et al. (CIKM 2021, Tables 4-5) compare privacy-constrained fine-tuning of BERT with a BiLSTM
that reads the same frozen word-piece embeddings; this is that second encoder. It has no
pretrained weights, so it only makes sense when it trains (``--mode finetune``); the input
embedding table is the client's side and never trains. Size: one layer, hidden 192 per direction,
so sentence representations have the table's 384 dimensions (the paper's sizes are not given here;
this is the offline choice). Pooling as for transformers: mean over tokens (default) or the first
position (``cls``). Weights are initialised from the run's seed.
"""

from __future__ import annotations

from types import SimpleNamespace

from bench.core.cache import FeatureCache
from bench.core.errors import BenchError
from bench.core.seeding import derive_seed
from bench.models.encoders import DEFAULT_ENCODER, Encoder, locate

BILSTM = "bilstm"


def _module(table, hidden: int):
    """The torch module: frozen embedding lookup, then a bidirectional LSTM (built lazily: torch is heavy)."""
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    class BiLSTMModule(nn.Module):
        """Embedding (frozen) -> BiLSTM; returns ``last_hidden_state`` like a transformers model."""

        def __init__(self) -> None:
            super().__init__()
            self.embeddings = nn.Embedding.from_pretrained(table, freeze=True)
            self.lstm = nn.LSTM(table.shape[1], hidden, batch_first=True, bidirectional=True)
            self.config = SimpleNamespace(hidden_size=2 * hidden)

        def get_input_embeddings(self):
            return self.embeddings

        def forward(self, input_ids=None, inputs_embeds=None, attention_mask=None, token_type_ids=None):
            vectors = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
            if attention_mask is None:
                attention_mask = torch.ones(vectors.shape[:2], dtype=torch.long, device=vectors.device)
            lengths = attention_mask.sum(dim=1).clamp(min=1).cpu()
            packed = pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=False)
            states, _ = self.lstm(packed)
            states, _ = pad_packed_sequence(states, batch_first=True, total_length=vectors.shape[1])
            return SimpleNamespace(last_hidden_state=states, pooler_output=None)

    return BiLSTMModule()


class BiLSTMEncoder(Encoder):
    """The ``Encoder`` interface over a seeded, untrained BiLSTM and minilm's tokenizer and table."""

    def __init__(self, device: str = "cpu", pooling: str = "mean", max_length: int = 128, cache: bool = True,
                 seed: int = 0, hidden: int = 192):
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging


        if pooling == "pooler":
            raise BenchError("the bilstm encoder has no pooler; use pooling=mean or cls.")
        path, table_revision = locate(DEFAULT_ENCODER)
        self.name, self.device, self.pooling, self.max_length, self.cache = BILSTM, device, pooling, max_length, cache
        hf_logging.disable_progress_bar()  # as Encoder: our own bars report the long steps
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        table = AutoModel.from_pretrained(path).get_input_embeddings().weight.detach().clone()
        with torch.random.fork_rng():
            torch.manual_seed(derive_seed(seed, "bilstm-init"))
            self.model = _module(table, hidden).to(device).eval()
        self.revision = f"bilstm-{hidden}x2-seed{seed}-table:{table_revision}"
        self.dim = 2 * hidden
        self._cache = FeatureCache()
        self._known: dict[str, dict] = {}  # Encoder.encode's rows of this process
