"""NDD now lives in ``bench.models.ndd`` (it runs an MLM); this alias stays for bench/analysis/ndd_perf.py, rewritten
alongside, until it imports from there."""

from bench.models.ndd import (  # noqa: F401 - re-exported
    OriginalDistributions,
    masked_log_probs,
    ndd_scores,
    ndd_scores_loop,
    ndd_select,
    prefilled_rows,
)
