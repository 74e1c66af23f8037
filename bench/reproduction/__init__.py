"""Our records read against the papers: reference tables with claim verdicts, and plausible deniability."""
