"""bench.cli: the command line (``bench``); it parses and prints, the engine does the work."""
