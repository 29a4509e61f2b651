"""Outputs of ``mb-estimation sweep``: a table (sweep.csv) and one figure per swept setting.

The figures are the paper's Figures 4, 6 and 7: the free parameters (± one standard
deviation), the observation MSE and the impulse MSE against κ, the step h or the hinge
compliance, each on a log axis, one line per combination of the other settings.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from mb_estimation.report.figures import legend_below, log_safe, new_figure, png_bytes

AXES = {"kappa": "state error weight κ", "dt": "step h [s]",
        "compliance": "hinge compliance [m/N, rad/(N m)]"}


def _scalar(values) -> float:
    """A parameter value as one number: scalars as they are, quaternions by their angle [rad]."""
    values = np.ravel(np.asarray(values, dtype=np.float64))
    if values.size == 1:
        return float(values[0])
    return float(2.0 * np.arccos(np.clip(abs(values[0]) / np.linalg.norm(values), 0.0, 1.0)))


def sweep_rows(points: Sequence) -> list[dict]:
    """One flat row per fit: the settings, each free parameter and its std, the MSEs, status."""
    rows = []
    for point in points:
        result = point.result
        row = {"dt": point.dt, "kappa": point.kappa,
               "compliance": "config" if point.compliance is None else point.compliance}
        for name in result.free:
            row[name] = _scalar(result.parameters[name])
            row[f"{name}_std"] = float(np.linalg.norm(np.ravel(result.std[name])))
        row.update(observation_mse=result.observation_mse, impulse_mse=result.impulse_mse,
                   cost=result.cost, status=str(result.status), iterations=result.iterations,
                   solve_time_s=round(result.solve_time_s, 3))
        rows.append(row)
    return rows


def swept_axes(points: Sequence) -> list[str]:
    """The settings that take more than one value in the sweep."""
    return [axis for axis in AXES if len({getattr(p, axis) for p in points}) > 1]


def sweep_figure(points: Sequence, axis: str, units: Mapping[str, str]):
    """Parameters, observation MSE and impulse MSE against one swept setting."""
    free = points[0].result.free
    others = [a for a in AXES if a != axis]
    groups: dict[tuple, list] = {}
    for point in points:
        groups.setdefault(tuple(getattr(point, a) for a in others), []).append(point)
    panels = [*free, "observation MSE", "impulse MSE"]
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure = new_figure(0.6 + 2.3 * rows)
    grid = figure.subplots(rows, columns, squeeze=False)
    for index, axes in enumerate(grid.ravel()):
        if index >= len(panels):
            axes.set_visible(False)
            continue
        panel = panels[index]
        for key, group in groups.items():
            group = sorted(group, key=lambda p: getattr(p, axis))
            x = [getattr(p, axis) for p in group]
            label = ", ".join(f"{a}={'config' if v is None else f'{v:g}'}"
                              for a, v in zip(others, key, strict=True)
                              if len({getattr(p, a) for p in points}) > 1) or None
            if panel in free:
                values = [_scalar(p.result.parameters[panel]) for p in group]
                std = [float(np.linalg.norm(np.ravel(p.result.std[panel]))) for p in group]
                std = np.where(np.isfinite(std), std, np.nan)
                axes.errorbar(x, values, yerr=std, marker="o", markersize=4, capsize=3,
                              label=label)
            else:
                attribute = "observation_mse" if panel.startswith("observation") else \
                    "impulse_mse"
                axes.plot(x, log_safe([getattr(p.result, attribute) for p in group]),
                          marker="o", markersize=4, label=label)
                axes.set_yscale("log")
        unit = units.get(panel, "")
        axes.set_title(panel + (f" [{unit}]" if unit and panel in free else "")
                       + (" (rotation angle [rad])" if unit == "quaternion" else ""),
                       fontsize=10)
        axes.set_xscale("log")
        axes.set_xlabel(AXES[axis])
        axes.grid(True, which="both", alpha=0.3)
    if len(groups) > 1:
        handles, labels = grid.ravel()[0].get_legend_handles_labels()
        legend_below(figure, handles, labels, min(4, len(groups)))
    figure.suptitle(f"fits against {AXES[axis]}")
    return figure


def write_sweep(directory: Path, points: Sequence, units: Mapping[str, str]) -> list[Path]:
    """Write sweep.csv and sweep_<setting>.png per swept setting; return the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rows = sweep_rows(points)
    table = directory / "sweep.csv"
    with open(table, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    written = [table]
    for axis in swept_axes(points):
        path = directory / f"sweep_{axis}.png"
        path.write_bytes(png_bytes(sweep_figure(points, axis, units)))
        written.append(path)
    return written
