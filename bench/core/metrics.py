"""Metric declarations: each component declares the metrics it computes (name, direction, range).

Keys in records are ``utility/<metric>`` (declared by the task), ``privacy/<attack>/<metric>`` and,
for the random-guess reference of the same attack in the same run, ``random/<attack>/<metric>``
(declared by the attack). For privacy and random keys, "higher is better" is the attack's point of
view: a higher value means more was recovered. Declarations are checked when a component registers,
so a cell can never run and then fail on an unknown metric.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from bench.core.errors import BenchError

METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Metric:
    """One metric a component computes."""

    name: str  # record key suffix: lower-case letters, digits and underscores
    higher_is_better: bool  # for attacks: higher = more recovered
    description: str
    low: float = 0.0  # smallest possible value (-inf when unbounded)
    high: float = 1.0  # largest possible value (inf when unbounded)


def check_declared(owner: str, metrics: object) -> tuple[Metric, ...]:
    """The component's metric declarations, or a BenchError saying what is wrong with them."""
    if not isinstance(metrics, tuple) or not metrics or not all(isinstance(m, Metric) for m in metrics):
        raise BenchError(f"{owner} must declare its metrics as a non-empty tuple of bench.Metric "
                         "(class attribute `metrics`).")
    names = [m.name for m in metrics]
    for metric in metrics:
        if not METRIC_NAME.match(metric.name):
            raise BenchError(f"{owner} metric name '{metric.name}' must match {METRIC_NAME.pattern}.")
        if not (metric.low <= metric.high) or math.isnan(metric.low) or math.isnan(metric.high):
            raise BenchError(f"{owner} metric '{metric.name}' has an empty range [{metric.low}, {metric.high}].")
    if len(set(names)) != len(names):
        raise BenchError(f"{owner} declares a metric twice: {', '.join(names)}.")
    return metrics


def check_values(owner: str, declared: tuple[Metric, ...], values: dict[str, float]) -> dict[str, float]:
    """``values`` in the order of the declaration, whatever order the component computed them in (a record lists
    a component's headline metric first, and readers rank by it); every computed metric must be declared (a bug
    in the component otherwise, named here)."""
    known = {m.name for m in declared}
    unknown = sorted(set(values) - known)
    if unknown:
        raise BenchError(f"{owner} computed undeclared metric(s) {', '.join(unknown)}; declare them in its "
                         "`metrics`.")
    return {m.name: values[m.name] for m in declared if m.name in values}




PROBE_PREFIX = "probe_"  # utility/probe_<metric>: the task's metric of the deterministic probe (bench.models.probe)


def probe_metrics(declared: tuple[Metric, ...]) -> tuple[Metric, ...]:
    """The declarations of a task's metrics as the deterministic probe on the server's frozen features scores
    them (``probe_<name>``, same direction and range); recorded after the task's own, so the headline stays."""
    return tuple(Metric(PROBE_PREFIX + m.name, m.higher_is_better,
                        f"{m.description}, of the float64 convex probe on the frozen features (docs/probe.md)",
                        m.low, m.high) for m in declared)
