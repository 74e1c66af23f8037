"""bench.analysis."""
