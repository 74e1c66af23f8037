"""bench perf: the ceiling arithmetic, the timing of a real mechanism on a small table, the report's
shape and flags, mechanism discovery, and bad input (no timing is compared against a threshold)."""

import json
import time

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from bench import DEFENSES, RepresentationDefense, SpanDefense, TokenDefense
from bench.cli.main import app
from bench.performance.mechanisms import (
    TARGET_RATIO,
    PerfReport,
    Timing,
    matmul_gflops,
    mechanism_classes,
    perf_table,
    report_dict,
    search_ceiling,
    search_flops,
    time_calls,
    time_token_mechanism,
    write_json,
)

runner = CliRunner()


def test_ceiling_is_throughput_over_two_v_n():
    # DESIGN.md: 197 GFLOP/s over a 30,522 x 384 table bounds exact search at ~8,400 tokens/s
    assert search_flops(30522, 384) == 2 * 30522 * 384
    assert search_ceiling(197.0, search_flops(30522, 384)) == pytest.approx(8404, abs=1)


def test_matmul_throughput_is_positive():
    assert matmul_gflops(32, 16, 256, "float32", repeats=2) > 0
    bf16 = matmul_gflops(32, 16, 256, "bfloat16", repeats=2)
    assert bf16 is None or bf16 > 0


def test_time_calls_warms_up_once_then_times_each_repeat():
    calls = []
    times = time_calls(lambda: calls.append("run"), 3, warmup=lambda: calls.append("warm"))
    assert calls == ["warm", "run", "run", "run"] and len(times) == 3 and min(times) >= 0


class TinySpace:
    """A WordPiece-like space over a random 50 x 8 table whose id 0 is special."""

    format = "wordpiece"

    def __init__(self):
        self.table = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
        self.candidates = np.arange(1, 50)


def test_time_token_mechanism_times_a_real_mechanism():
    defense = DEFENSES.get("dchi-text")(eta=1e6)  # tiny noise: every token maps to itself
    ids = [np.array([1, 2, 3]), np.array([4, 5]), np.array([], dtype=np.int64)]
    timing = time_token_mechanism(defense, ids, TinySpace(), repeats=2)
    assert (timing.defense, timing.level, timing.items, len(timing.run_s)) == ("dchi-text", "token", 5, 2)
    assert timing.search_flops == 2 * 49 * 8 and timing.rate > 0
    assert timing.args["eta"] == 1e6
    assert timing.backend is not None  # dchi-text searched the space
    space = TinySpace()
    time_token_mechanism(defense, ids, space, repeats=1)
    sampled = time_token_mechanism(DEFENSES.get("santext")(eps=1.0), ids, space, repeats=1)
    assert sampled.backend is None  # SanText samples; the search dchi-text built for the same space is not its own


def fake_report() -> PerfReport:
    """Ceiling 100e9 / (2 * 1000 * 10) = 5e6 tokens/s; 'slow' runs 5x under it, 'fast' at it."""
    settings = {"sentences": 10, "tokens": 1000, "vocabulary": 1000, "dim": 10, "repeats": 3}
    flops = search_flops(1000, 10)
    timings = [
        Timing("slow", {}, "token", 1_000_000, 0.0, [2.0, 1.0, 1.0], flops),
        Timing("fast", {}, "token", 5_000_000, 0.5, [1.0, 1.0, 3.0], flops),
        Timing("sentences", {}, "sentence", 200, 0.0, [0.1]),
    ]
    return PerfReport(settings, {"float32": 100.0, "bfloat16": None}, timings, {"cpu_count": 2}, {"torch": "x"})


def test_report_ratios_and_flags():
    data = report_dict(fake_report())
    assert data["ceiling_tokens_per_s"] == pytest.approx(5e6)
    slow, fast, sentences = data["mechanisms"]
    assert slow["median_s"] == 1.0 and slow["rate"] == 1e6
    assert slow["ratio"] == pytest.approx(5.0) and slow["within_target"] is False
    assert fast["ratio"] == pytest.approx(1.0) and fast["within_target"] is True
    assert sentences["unit"] == "sentences/s" and sentences["ratio"] is None and sentences["within_target"] is None
    assert data["target_ratio"] == TARGET_RATIO


def test_json_round_trips(tmp_path):
    path = tmp_path / "out" / "perf.json"
    write_json(fake_report(), path)
    data = json.loads(path.read_text())
    assert [m["defense"] for m in data["mechanisms"]] == ["slow", "fast", "sentences"]
    assert data["machine"] == {"cpu_count": 2} and data["gflops"]["bfloat16"] is None


def test_table_flags_only_the_mechanism_beyond_the_target():
    console = Console(record=True, width=200)
    console.print(perf_table(fake_report()))
    lines = {line.split()[1]: line for line in console.export_text().splitlines() if line.startswith("│")}
    assert "5.00×  > 3×" in lines["slow"]
    assert "1.00×" in lines["fast"] and "> 3×" not in lines["fast"]
    assert "2,000 sentences/s" in lines["sentences"]


def test_every_input_defense_is_discovered_and_none_is_left_out():
    found = mechanism_classes()
    token_level = {n for n in DEFENSES.names() if issubclass(DEFENSES.get(n), TokenDefense)
                   and not issubclass(DEFENSES.get(n), (RepresentationDefense, SpanDefense))}
    assert {"dchi-text", "dchi-token"} <= token_level <= set(found)
    assert "dchi-sequence" in found and "none" not in found


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sentences", "0"], "at least 1"),
        (["--repeats", "0"], "at least 1"),
        (["--defense", "nope"], "unknown defense 'nope'"),
        (["--defense", "dchi-text", "--defense-args", "eta=-1"], "eta must be > 0"),
        (["--defense", "dchi-text", "--defense-args", "bogus=1"], "no parameter 'bogus'"),
        (["--defense-args", "eta=1"], "applies to one defense"),
        (["--defense", "dchi-text", "--encoder", "mock"], "WordPiece encoder"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(tiny_data, tmp_path, args, message):
    path = tmp_path / "perf.json"
    result = runner.invoke(app, ["perf", *args, "--json", str(path)])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not path.exists()


def test_time_calls_stops_at_its_budget_after_the_least_count():
    from bench.performance.mechanisms import time_calls

    calls = []
    times = time_calls(lambda: calls.append(time.sleep(0.02)), 10, budget_s=0.01, least=3)
    assert len(times) == 3 and len(calls) == 4  # one untimed warm-up, then the least count
    assert len(time_calls(lambda: None, 10, budget_s=60.0)) == 10
