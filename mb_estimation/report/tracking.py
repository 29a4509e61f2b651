"""``track``'s report: each parameter and its drift rate against time (drift.png, report.html).

Per free parameter (a tilt as ``tilt_rx/ry/rz`` [rad]) a row of two panels: on the left each
accepted window's value ± std (grey) with the fused value and its ±std band; on the right the
rate per hour with its ±std band, zero, and the alarm threshold's ±std band's edge. Time runs in
hours from the first accepted window's end; recordings are told apart by colour. Plain arrays
in, so that the figure knows nothing of the filter.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mb_estimation.pseudo_inverse import std_text
from mb_estimation.report.figures import new_figure, png_bytes

__all__ = ["ParameterSeries", "drift_figure", "write_tracking_report"]


@dataclass(frozen=True)
class ParameterSeries:
    """One parameter over the accepted windows ``[n]``: each window's, the fused, the rate.

    Standard deviations are ``inf`` where not determined (drawn as gaps).
    """

    label: str
    value: np.ndarray
    std: np.ndarray
    fused: np.ndarray
    fused_std: np.ndarray
    rate_per_hour: np.ndarray
    rate_std: np.ndarray


def _finite(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(values), values, np.nan)


def drift_figure(hours: np.ndarray, sources: Sequence[str], series: Sequence[ParameterSeries],
                 units: Mapping[str, str], alarm_std: float):
    """The parameters (left) and their rates per hour (right) against hours."""
    figure = new_figure(0.8 + 2.2 * len(series))
    grid = figure.subplots(len(series), 2, squeeze=False, sharex=True)
    names = list(dict.fromkeys(sources))
    colours = [f"C{names.index(source) % 10}" for source in sources]
    for row, one in zip(grid, series, strict=True):
        left, right = row
        std = _finite(one.std)
        left.scatter(hours, one.value, s=8, c=colours, zorder=3)
        left.errorbar(hours, one.value, yerr=std, fmt="none", ecolor="0.6", elinewidth=0.8)
        fused, spread = np.asarray(one.fused), _finite(one.fused_std)
        left.plot(hours, fused, color="k", linewidth=1.2, label="fused")
        left.fill_between(hours, fused - spread, fused + spread, color="k", alpha=0.15,
                          linewidth=0)
        unit = units.get(one.label, "rad" if one.label[-3:] in ("_rx", "_ry", "_rz") else "")
        left.set_title(f"{one.label}" + (f" [{unit}]" if unit else ""), fontsize=10)
        rate, rate_std = np.asarray(one.rate_per_hour), _finite(one.rate_std)
        right.plot(hours, rate, color="C3", linewidth=1.2)
        right.fill_between(hours, rate - rate_std, rate + rate_std, color="C3", alpha=0.2,
                           linewidth=0)
        right.plot(hours, alarm_std * rate_std, color="C3", linewidth=0.6, linestyle=":")
        right.plot(hours, -alarm_std * rate_std, color="C3", linewidth=0.6, linestyle=":")
        right.axhline(0.0, color="0.4", linewidth=0.8)
        right.set_title(f"{one.label} rate [per hour] ± std; ±{alarm_std:g} std dotted",
                        fontsize=10)
        for axes in row:
            axes.grid(True, alpha=0.3)
    for axes in grid[-1]:
        axes.set_xlabel("hours since the first window")
    figure.suptitle("parameters and their drift over the recordings")
    return figure


def write_tracking_report(directory: Path, hours: np.ndarray, sources: Sequence[str],
                          series: Sequence[ParameterSeries], units: Mapping[str, str], *,
                          alarm_std: float, alarms: Sequence[str], counts: tuple[int, int]
                          ) -> list[Path]:
    """Write drift.png and report.html (the last values and rates, the alarm, the figure)."""
    directory = Path(directory)
    png = png_bytes(drift_figure(hours, sources, series, units, alarm_std))
    figure_path = directory / "drift.png"
    figure_path.write_bytes(png)
    rows = "".join(
        f"<tr><td>{html.escape(one.label)}</td><td>{one.fused[-1]:.6g}</td>"
        f"<td>{std_text(one.fused_std[-1])}</td><td>{one.rate_per_hour[-1]:+.4g}</td>"
        f"<td>{std_text(one.rate_std[-1])}</td></tr>" for one in series)
    alarm = ", ".join(alarms) if alarms else "none"
    data = base64.b64encode(png).decode("ascii")
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>mb_estimation track</title>
<style>body{{font-family:sans-serif;max-width:72em;margin:auto}}td,th{{padding:2px 8px;
text-align:right}}img{{max-width:100%}}</style></head><body>
<h1>Parameters over the recordings</h1>
<p>{counts[0]} of {counts[1]} windows accepted, from {len(set(sources))} recording(s),
over {float(hours[-1]):.3g} h. Drift alarm: <b>{html.escape(alarm)}</b>.</p>
<table><tr><th>parameter</th><th>fused value</th><th>std</th><th>rate per hour</th>
<th>std</th></tr>{rows}</table>
<figure><img src="data:image/png;base64,{data}" alt="parameters and rates against time">
<figcaption>Left: each window's estimate ± std (colour: recording) and the fused value ± std;
right: the drift rate per hour ± std (drift.png)</figcaption></figure>
</body></html>
"""
    report_path = directory / "report.html"
    report_path.write_text(page, encoding="utf-8")
    return [figure_path, report_path]
