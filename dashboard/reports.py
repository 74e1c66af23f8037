"""Reading the JSON reports the dashboard shows (deniability analyses, reproduction reports)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_json_reports(folder: Path, pattern: str, required: tuple[str, ...]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every readable report matching ``pattern`` in ``folder`` that has the ``required`` keys (with its ``path``),
    and one sentence per file skipped."""
    reports, problems = [], []
    for path in sorted(folder.glob(pattern)) if folder.is_dir() else []:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: skipped, not readable JSON ({exc.__class__.__name__}).")
            continue
        missing = [key for key in required if key not in report] if isinstance(report, dict) else list(required)
        if missing:
            problems.append(f"{path}: skipped, missing {', '.join(missing)}.")
            continue
        reports.append({**report, "path": str(path)})
    return reports, problems
