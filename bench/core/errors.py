"""The one exception type for bad user input; the CLI turns it into one sentence and exit code 2."""


class BenchError(Exception):
    """A problem with what the user asked for (a name, a value, a file), not a bug in the harness."""
