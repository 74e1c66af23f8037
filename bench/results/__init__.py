"""bench.results."""
