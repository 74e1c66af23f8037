"""The privacy-utility scatter of the dashboard, and the one style each defense has on every chart.

A defense's style is a colour and a shape, fixed by its place among the registered defenses, so it is the same in
every view and for both sources. The registered defenses are ordered by what they release, then by name
(``bench.results.views.defense_order``), so defenses compared on the same attacks sit together; along that order
the colour cycles through the seven colours of the Okabe-Ito palette (told apart with the common colour-vision
deficiencies; its black is left to the Pareto frontier) and the shape alternates circle and square, so defenses of
one release kind differ in colour and no two of up to 14 registered defenses look alike. ``none``, the undefended
reference, is grey. A defense that is not registered (a plugin's, in your runs) takes a style from a hash of its
name.

Annotations stay off the data: references (random guess, majority class) are in the legend with their values; the
better direction, which encoder is filled, the no-utility-signal mark and your runs' ring are named in the title.
The axes fit the points and their error bars, padded; a reference outside them is not drawn, and its legend entry
says where it lies. No Streamlit here: the chart is a function of the ranked table.
"""

from __future__ import annotations

import math
import zlib
from typing import Iterable

import altair as alt
import pandas as pd

from bench.results.views import ADVANTAGE, SIGNAL, axis_title

# Okabe & Ito (2008), "Color Universal Design", without black; yellow, the faintest on white, late in the cycle
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#F0E442", "#56B4E9"]
NEUTRAL = "#666666"  # none: the undefended reference
SHAPES = ["circle", "square", "triangle-up", "diamond"]
PAD = 0.08  # each axis is padded by this share of its data span
YOURS = "your runs"  # the source name of your runs when they are shown beside the published board
NO_SIGNAL = "M-1,-1L1,1M-1,1L1,-1"  # a thin ×, drawn over a cell that carries no utility signal


def defense_style(name: str, order: list[str]) -> tuple[str, str]:
    """(colour, shape) of ``name``: by its place in ``order`` (``bench.results.views.defense_order``), else by a
    hash of the name."""
    if name == "none":
        return NEUTRAL, SHAPES[0]
    if name in order:
        i = order.index(name)
    else:
        i = zlib.crc32(name.encode("utf-8")) % (2 * len(OKABE_ITO))
    rounds = i // (2 * len(OKABE_ITO))  # past 14 names, two more shapes
    return OKABE_ITO[i % len(OKABE_ITO)], SHAPES[(i % 2 + 2 * rounds) % len(SHAPES)]


def style_scales(names: Iterable[str], order: list[str]) -> tuple[alt.Scale, alt.Scale]:
    """The colour and shape scales of the defenses ``names`` (a chart's)."""
    names = sorted(set(names))
    styles = [defense_style(n, order) for n in names]
    return (alt.Scale(domain=names, range=[c for c, _ in styles]),
            alt.Scale(domain=names, range=[s for _, s in styles]))


def fitted(low: Iterable[float], high: Iterable[float]) -> list[float]:
    """An axis domain from the smallest ``low`` to the largest ``high``, padded by ``PAD`` of the span each side
    (a span of 0 is padded as if it were 2% of the value, at least 0.01)."""
    lows = [v for v in low if v is not None and math.isfinite(v)]
    highs = [v for v in high if v is not None and math.isfinite(v)]
    a, b = min(lows), max(highs)
    span = b - a if b > a else max(abs(a) * 0.02, 0.01) / PAD / 2
    return [a - PAD * span, b + PAD * span]


def _where(value: float, domain: list[float], before: str, after: str) -> str:
    """``before``/``after`` when ``value`` lies outside ``domain``, else ""."""
    return f", {before}" if value < domain[0] else f", {after}" if value > domain[1] else ""


def scatter(table: pd.DataFrame, utility: str, privacy: str, up: dict, order: list[str]
            ) -> alt.LayerChart | None:
    """Attack success against utility: one point per setting (colour and shape = defense; filled: the view's most
    frequent encoder, hollow: the others), error bars of ± one std, the Pareto frontier, the random guess and the
    majority class of the same cells (legend "references"), a cross on cells whose utility does not beat the
    majority class, a ring on your runs when they are shown beside the published board."""
    if table.empty or utility not in table or privacy not in table:
        return None
    points = table.dropna(subset=[utility, privacy]).copy()
    if points.empty:
        return None
    points["label"] = [f"{d}({a})" if a else d for d, a in zip(points["defense"], points["defense_args"])]
    points["utility"], points["privacy"] = points[utility], points[privacy]
    for column, metric in (("u_std", utility), ("p_std", privacy)):
        points[column] = points.get(f"{metric} std", pd.Series(0.0, index=points.index)).fillna(0.0)
    points = points.assign(u_lo=points["utility"] - points["u_std"], u_hi=points["utility"] + points["u_std"],
                           p_lo=points["privacy"] - points["p_std"], p_hi=points["privacy"] + points["p_std"])
    u_up, p_up = up.get(utility, True), up.get(privacy, True)
    x_domain = fitted(points["u_lo"], points["u_hi"])
    y_domain = fitted(points["p_lo"], points["p_hi"])

    def x(field: str) -> alt.X:  # every layer has the same title and scale, so no title is merged with a field name
        return alt.X(f"{field}:Q", title=axis_title(utility, u_up),
                     scale=alt.Scale(domain=x_domain, nice=False, zero=False))

    def y(field: str) -> alt.Y:
        return alt.Y(f"{field}:Q", title=axis_title(privacy, p_up),
                     scale=alt.Scale(domain=y_domain, nice=False, zero=False))

    colour, shape = style_scales(points["defense"], order)
    undefended = "datum.label == 'none' ? 'none (undefended)' : datum.label"
    legend = alt.Legend(title="defense", labelExpr=undefended, symbolStrokeWidth=2)
    counts = points["encoder"].astype(str).value_counts()
    main = sorted(counts.index, key=lambda e: (-counts[e], e))[0]  # filled; the other encoders hollow
    tooltip = [c for c in ("label", "encoder", "mode", "attack_args", "n") if c in points]
    tooltip += [alt.Tooltip("utility:Q", format=".3f"),
               alt.Tooltip("u_std:Q", format=".3f"), alt.Tooltip("privacy:Q", format=".3f"),
               alt.Tooltip("p_std:Q", format=".3f"), "frontier"]
    tooltip += [c for c in ("source", SIGNAL, "strongest", "strongest_args", "missing") if c in points]
    by_defense = {"color": alt.Color("defense:N", scale=colour, legend=legend),
                  "shape": alt.Shape("defense:N", scale=shape, legend=legend)}  # one legend, in every layer

    chart = None
    for filled, rows in ((True, points[points["encoder"].astype(str) == main]),
                         (False, points[points["encoder"].astype(str) != main])):
        if len(rows):
            layer = alt.Chart(rows).mark_point(filled=filled, size=90, strokeWidth=2, opacity=0.9, clip=True).encode(
                x=x("utility"), y=y("privacy"), tooltip=tooltip, **by_defense)
            chart = layer if chart is None else chart + layer
    spread = points[(points["u_std"] > 0) | (points["p_std"] > 0)]
    if not spread.empty:
        bars = alt.Chart(spread)
        bar_colour = alt.Color("defense:N", scale=colour, legend=legend)
        chart += bars.mark_rule(opacity=0.5, clip=True).encode(x=x("u_lo"), x2="u_hi:Q", y=y("privacy"),
                                                               color=bar_colour)
        chart += bars.mark_rule(opacity=0.5, clip=True).encode(x=x("utility"), y=y("p_lo"), y2="p_hi:Q",
                                                               color=bar_colour)
    # one frontier per encoder (``views.rank_rows``): settings on different encoders do not share a server
    front = points[points["frontier"] == 1].sort_values(["encoder", "utility"], ascending=[True, u_up])
    if len(front):
        front = front.assign(what="Pareto frontier (per encoder)")
        chart += alt.Chart(front).mark_line(color="black", strokeWidth=2, interpolate="step-before", clip=True,
                                            point=alt.OverlayMarkDef(color="black", size=20)).encode(
            x=x("utility"), y=y("privacy"), detail="encoder:N", tooltip=["what", "label", "encoder"])

    references, dashes = [], []
    random_key = "random/" + privacy.split("/", 1)[1] if "/" in privacy else ""
    if privacy == ADVANTAGE:  # the scale's 0 is the random guess itself
        what = "as good as guessing (advantage 0)" + _where(0.0, y_domain, "below the axis", "above the axis")
        references.append((pd.DataFrame({"random": [0.0], "what": [what]}), "y", "random"))
        dashes.append((what, [6, 4]))
    elif random_key in points and points[random_key].notna().any():
        values = points[random_key].dropna()
        mean = values.mean()
        what = (f"random guess {mean:.3f} ({len(values)} cells)"
                + _where(mean, y_domain, "below the axis", "above the axis"))
        rule = pd.DataFrame({"random": [mean], "low": [values.min()], "high": [values.max()], "what": [what]})
        references.append((rule, "y", "random"))
        dashes.append((what, [6, 4]))
        chart += alt.Chart(rule).mark_rect(opacity=0.12, color="gray", clip=True).encode(y=y("low"), y2="high:Q")
    if "majority" in points and points["majority"].notna().any():
        floors = points["majority"].dropna()
        mean = floors.mean()
        what = (f"majority class {mean:.3f} ({len(floors)} cell{'s' if len(floors) > 1 else ''})"
                + _where(mean, x_domain, "left of the axis", "right of the axis"))
        references.append((pd.DataFrame({"majority": [mean], "what": [what]}), "x", "majority"))
        dashes.append((what, [2, 3]))
    if references:
        dash = alt.StrokeDash("what:N", scale=alt.Scale(domain=[w for w, _ in dashes], range=[d for _, d in dashes]),
                              legend=alt.Legend(title="references", symbolType="stroke", symbolStrokeColor="gray",
                                                labelLimit=360))
        for frame, channel, field in references:
            position = {channel: x(field) if channel == "x" else y(field)}
            chart += alt.Chart(frame).mark_rule(color="gray", strokeWidth=1.5, clip=True).encode(
                strokeDash=dash, tooltip=["what"], **position)

    others = sorted(set(points["encoder"].astype(str)) - {main})
    notes = [f"filled: {main} · hollow: {', '.join(others)}"] if others else []
    if SIGNAL in points and points[SIGNAL].str.startswith("no").any():
        chart += alt.Chart(points[points[SIGNAL].str.startswith("no")]).mark_point(
            shape=NO_SIGNAL, size=160, filled=False, color="#222", strokeWidth=1.2, clip=True).encode(
            x=x("utility"), y=y("privacy"), tooltip=["label", SIGNAL])
        notes.append("× no utility signal: the utility does not beat the majority class")
    if "source" in points and (points["source"] == YOURS).any() and points["source"].nunique() > 1:
        chart += alt.Chart(points[points["source"] == YOURS]).mark_point(
            shape="circle", size=380, filled=False, color="black", strokeWidth=1.2, clip=True).encode(
            x=x("utility"), y=y("privacy"), tooltip=["label", "source"])
        notes.append("ringed: your runs (the others are the published board)")
    better = (f"better: to the {'right' if u_up else 'left'} (more useful) and "
              f"{'down' if p_up else 'up'} (less recovered)")
    title = alt.TitleParams(text=f"★ {better}", subtitle=notes or "", anchor="start",
                            fontSize=13, fontWeight="normal", subtitleColor="#444")
    return chart.properties(height=420, title=title, padding={"top": 12, "left": 5, "right": 5, "bottom": 5})
