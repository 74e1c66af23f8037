"""bench.data.examples."""
