"""bench.privacy."""
