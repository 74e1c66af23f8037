"""Reading a curve of (privacy, value) points at a privacy level, without extrapolating."""

from __future__ import annotations

from typing import Any


def bracketing(points: list[tuple[float, Any]], target: float
               ) -> tuple[tuple[float, Any], tuple[float, Any], float] | None:
    """The two neighbouring ``(privacy, key)`` points of a curve sorted by privacy that bracket ``target``, and
    ``target``'s weight between them (0 at the first); None when ``target`` lies outside the curve (never
    extrapolated)."""
    if not points or not points[0][0] <= target <= points[-1][0]:
        return None
    for (p0, v0), (p1, v1) in zip(points, points[1:] + points[-1:]):
        if p0 <= target <= p1:
            break
    return (p0, v0), (p1, v1), 0.0 if p1 == p0 else (target - p0) / (p1 - p0)
