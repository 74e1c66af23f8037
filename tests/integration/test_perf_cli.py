"""bench perf end to end with the real offline encoder on 20 SST-2 sentences (checks figures, not speed).

It runs at the smoke budget, so DP-MLM's masked LM is the one-layer smoke MLM, trained in seconds, not the full
offline MLM (minutes): the figures checked are counts and ratios, which do not depend on the MLM."""

import json

from typer.testing import CliRunner

from bench import DEFENSES, RepresentationDefense, SpanDefense, TokenDefense
from bench.cli.main import app
from bench.core.smoke import smoke_budget


def test_perf_times_every_token_mechanism_on_the_fixed_batch(tmp_path, monkeypatch):
    from bench.models.loading import load_encoder
    from bench.performance.mechanisms import fixed_batch
    from bench.privacy.mechanisms import client_token_ids, regular_token_ids

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "perf.json"
    with smoke_budget():
        result = CliRunner().invoke(app, ["perf", "--sentences", "20", "--repeats", "1", "--json", str(path)])
    assert result.exit_code == 0, result.output
    data = json.loads(path.read_text())

    encoder = load_encoder("minilm")
    tokens = sum(len(x) for x in client_token_ids(encoder, fixed_batch(20)))
    settings = data["settings"]
    assert (settings["sentences"], settings["tokens"]) == (20, tokens)
    assert settings["vocabulary"] == len(regular_token_ids(encoder.tokenizer.get_vocab()))
    rows = {m["defense"]: m for m in data["mechanisms"]}
    token_level = {n for n in DEFENSES.names() if issubclass(DEFENSES.get(n), TokenDefense)
                   and not issubclass(DEFENSES.get(n), (RepresentationDefense, SpanDefense))}
    assert token_level <= set(rows) and "dchi-sequence" in rows
    for name in token_level:
        assert rows[name]["items"] == tokens and rows[name]["ratio"] > 0, rows[name]
    assert rows["dchi-sequence"]["items"] == 20 and rows["dchi-sequence"]["unit"] == "sentences/s"
    assert data["gflops"]["float32"] > 0 and data["machine"]["cpu_count"] >= 1
    assert "dchi-text" in result.output and "ceiling" in result.output
