"""bench.engine."""
