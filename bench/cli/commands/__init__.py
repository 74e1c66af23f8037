"""One module per ``bench`` command; ``bench.cli.main`` puts them together."""
