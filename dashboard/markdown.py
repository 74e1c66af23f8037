"""Text from result files shown literally where Streamlit renders Markdown (headings, captions, labels, notes).

Names and arguments come from files anyone can edit, so ``**x**``, ``# h`` or ``[a](javascript:...)`` must
not become bold text, headings or links: ``literal`` backslash-escapes every ASCII punctuation character
(CommonMark allows an escape before each, and the escaped character shows as itself) and folds newlines,
which would start a new block; ``code`` makes an inline code span no backtick in the text can close.
"""

from __future__ import annotations

import re
import string

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")


def literal(value: object) -> str:
    """``value`` as Markdown source that renders as exactly its text, on one line."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(str(value).split()))


def code(value: object) -> str:
    """``value`` as an inline code span (on one line) whose fence is longer than any run of backticks in it."""
    text = " ".join(str(value).split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"
