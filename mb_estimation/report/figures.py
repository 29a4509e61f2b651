"""Matplotlib figures of the calibration report, rendered off-screen (Agg) to PNG bytes.

Every figure is a :class:`matplotlib.figure.Figure` with its own Agg canvas: no pyplot, no
global state. Angles are in rad, times in s; joint 0 is the arm (θ1), joint 1 the pendulum (θ2).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

DPI = 100
WIDTH_IN = 9.0
JOINT_LABELS = ("arm θ1", "pendulum θ2")
MISSING = "—"  # shown for a correlation that is not defined (infinite or zero variance)

MEASURED_STYLE = {"color": "0.25", "marker": ".", "markersize": 3.0, "linestyle": "none"}
SHADOW_STYLE = {"color": "tab:blue", "linewidth": 1.4}
SIMULATED_STYLE = {"color": "tab:red", "linewidth": 1.4}
RESIDUAL_STYLE = {"color": "tab:purple", "marker": ".", "markersize": 2.5, "linewidth": 0.5}


def joint_label(index: int) -> str:
    """Display name of joint ``index``."""
    return JOINT_LABELS[index] if index < len(JOINT_LABELS) else f"joint {index + 1}"


def tangent_labels(free: Sequence[str], std: Mapping[str, np.ndarray]) -> list[str]:
    """Row labels of the covariance: a name per scalar, ``name_rx/ry/rz`` per quaternion."""
    labels = []
    for name in free:
        size = np.asarray(std[name]).size
        labels += [name] if size == 1 else [f"{name}_r{axis}" for axis in "xyz"[:size]]
    return labels


def correlation_matrix(covariance: np.ndarray) -> np.ndarray:
    """Correlation ``C_ij / sqrt(C_ii C_jj)``, NaN where a variance is not finite and positive.

    Rows and columns of such entries (a parameter the data does not determine) are NaN, the
    diagonal is 1 elsewhere; values are clipped to [-1, 1] against round-off. No warnings.
    """
    covariance = np.asarray(covariance, dtype=np.float64)
    variance = np.diag(covariance)
    valid = np.isfinite(variance) & (variance > 0)
    scale = np.where(valid, np.sqrt(np.where(valid, variance, 1.0)), np.nan)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        correlation = covariance / np.outer(scale, scale)
    correlation = np.where(np.isfinite(correlation), np.clip(correlation, -1.0, 1.0), np.nan)
    correlation[np.diag_indices_from(correlation)] = np.where(valid, 1.0, np.nan)
    return correlation


def new_figure(height_in: float, width_in: float = WIDTH_IN) -> Figure:
    """An empty figure [in] with its own Agg canvas (tight layout).

    Tight rather than constrained layout: one measuring pass instead of several (an 8 s
    calibration's seven figures 10–20 % faster, measured), the same arrangement where a
    figure-wide legend has its strip reserved (:func:`legend_below`).
    """
    figure = Figure(figsize=(width_in, height_in), dpi=DPI, layout="tight")
    FigureCanvasAgg(figure)
    return figure


def legend_below(figure: Figure, handles, labels, columns: int, **style) -> None:
    """A figure-wide legend in a strip along the bottom, kept clear by the tight layout."""
    rows = math.ceil(len(labels) / columns)
    figure.legend(handles, labels, loc="lower center", ncols=columns, **style)
    strip_in = 0.12 + 0.25 * rows
    figure.get_layout_engine().set(rect=(0.0, strip_in / figure.get_figheight(), 1.0, 1.0))


def png_bytes(figure: Figure) -> bytes:
    """The figure rendered as PNG at :data:`DPI`."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def correlation_figure(correlation: np.ndarray, labels: Sequence[str]) -> Figure:
    """Heat map of the correlation matrix with the values written in the cells."""
    count = len(labels)
    side = min(WIDTH_IN, 2.5 + 0.65 * count)
    figure = new_figure(side - 0.6, side)
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(correlation), cmap=grey_nan_colormap("RdBu_r"),
                        vmin=-1.0, vmax=1.0)
    axes.set_xticks(range(count), labels, rotation=45, ha="right", rotation_mode="anchor")
    axes.set_yticks(range(count), labels)
    fontsize = 9 if count <= 10 else 7 if count <= 16 else 5
    for (row, column), value in np.ndenumerate(correlation):
        finite = np.isfinite(value)
        axes.text(column, row, f"{value:.2f}" if finite else MISSING, ha="center", va="center",
                  fontsize=fontsize, color="white" if finite and abs(value) > 0.6 else "black")
    figure.colorbar(image, ax=axes, shrink=0.8, label="correlation")
    axes.set_title("parameter correlation (tangent space)")
    return figure


def grey_nan_colormap(name: str):
    """A copy of a registered colormap that draws undefined (NaN) cells light grey."""
    return colormaps[name].with_extremes(bad="0.85")


def log_safe(values: Sequence[float]) -> np.ndarray:
    """Values with the ones a log axis cannot show (≤ 0, not finite) replaced by NaN."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(values) & (values > 0), values, np.nan)


def cost_figure(history: Sequence) -> Figure:
    """Cost per accepted LM iterate (log scale): total, observation and impulse parts."""
    figure = new_figure(3.4)
    axes = figure.add_subplot()
    iteration = [record.iteration for record in history]
    for label, values, style in (
            ("total", [r.cost for r in history], {"color": "black", "linewidth": 2.0}),
            ("observation", [r.observation_mse for r in history], {"color": "tab:blue"}),
            ("impulse", [r.impulse_mse for r in history], {"color": "tab:orange"})):
        axes.plot(iteration, log_safe(values), marker="o", markersize=3.5, label=label, **style)
    axes.set_yscale("log")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel("LM iteration (0 = initial guess)")
    axes.set_ylabel("mean squared error per step")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes.set_title("cost per iteration")
    return figure


def _quaternion_angle_deg(quaternions: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Rotation angle [deg] from ``reference`` to each quaternion (sign-invariant)."""
    dot = np.abs(quaternions @ reference) / (np.linalg.norm(quaternions, axis=-1)
                                             * np.linalg.norm(reference))
    return np.degrees(2.0 * np.arccos(np.clip(dot, 0.0, 1.0)))


def parameter_history_figure(history: Sequence, free: Sequence[str],
                             units: Mapping[str, str],
                             kept: Mapping[str, object] | None = None) -> Figure:
    """One small panel per free parameter with its value per iteration.

    A quaternion's panel shows its rotation angle from the final estimate. ``kept``: the
    calibration's values, where a later fit (the simulation-error stage) moved them from the
    history's last: a dashed line and the title name both.
    """
    columns = min(3, max(1, len(free)))
    rows = math.ceil(len(free) / columns)
    figure = new_figure(0.4 + 2.1 * rows)
    iteration = [record.iteration for record in history]
    grid = figure.subplots(rows, columns, squeeze=False, sharex=True)
    refined = False
    for index, axes in enumerate(grid.ravel()):
        if index >= len(free):
            axes.set_visible(False)
            continue
        name = free[index]
        values = np.array([np.asarray(r.parameters[name], dtype=np.float64).ravel()
                           for r in history])
        if values.shape[1] == 4:
            axes.plot(iteration, _quaternion_angle_deg(values, values[-1]), marker="o",
                      markersize=3)
            axes.set_ylabel("angle to final [deg]")
            axes.set_title(f"{name} (rotation from the final value)", fontsize=10)
        else:
            axes.plot(iteration, values[:, 0], marker="o", markersize=3)
            unit = units.get(name, "")
            axes.set_ylabel(f"[{unit}]" if unit else "value")
            last = values[-1, 0]
            value = last if kept is None else float(np.ravel(kept[name])[0])
            if value != last:
                refined = True
                axes.axhline(value, color="tab:orange", linestyle="--", linewidth=1.2)
                axes.set_title(f"{name}: {last:.4g}, kept {value:.4g}", fontsize=10)
            else:
                axes.set_title(f"{name}, final {last:.4g}", fontsize=10)
        axes.grid(True, alpha=0.3)
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        if index + columns >= len(free):
            axes.set_xlabel("LM iteration")
            axes.xaxis.set_tick_params(labelbottom=True)
    figure.suptitle("free parameters per iteration of the joint fit" + (
        " (dashed: the simulation-error fit's, kept)" if refined else ""))
    return figure


def joint_time_figure(time_s: np.ndarray, series: Sequence[tuple[str, np.ndarray, dict]], *,
                      title: str, ylabel: str, axis_titles: Sequence[str] = ()) -> Figure:
    """Stacked per-joint time plot: one axes per joint, shared time axis, one legend on top.

    ``series`` holds ``(label, values [n, n_joints], plot style)``; NaN values are not drawn.
    """
    time_s = np.asarray(time_s, dtype=np.float64)
    joints = np.asarray(series[0][1]).shape[1]
    figure = new_figure(1.0 + 2.3 * joints)
    grid = figure.subplots(joints, 1, sharex=True, squeeze=False)[:, 0]
    for joint, axes in enumerate(grid):
        for label, values, style in series:
            axes.plot(time_s, np.asarray(values, dtype=np.float64)[:, joint], label=label,
                      **style)
        axes.set_ylabel(f"{joint_label(joint)} {ylabel}")
        axes.grid(True, alpha=0.3)
        if joint < len(axis_titles):
            axes.set_title(axis_titles[joint], fontsize=9, loc="left")
    grid[-1].set_xlabel("time [s]")
    handles, labels = grid[0].get_legend_handles_labels()
    legend_below(figure, handles, labels, len(labels), markerscale=3.0)
    figure.suptitle(title, x=0.02, ha="left")
    return figure


def short_name(name: str) -> str:
    """A recording's name without its folders (figure titles)."""
    return name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or name


def observed_only(values: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """``values [n, j]`` as float64 with the rows of unobserved grid points set to NaN."""
    values = np.array(values, dtype=np.float64)
    values[np.asarray(observed) <= 0] = np.nan
    return values


def wrapped(angles: np.ndarray) -> np.ndarray:
    """Angles wrapped to (-π, π]."""
    return np.angle(np.exp(1j * np.asarray(angles, dtype=np.float64)))


def residual_rms(residuals: np.ndarray) -> np.ndarray:
    """Per-joint RMS of ``residuals [n, j]`` over the finite entries (NaN when there are none)."""
    finite = np.isfinite(residuals)
    count = finite.sum(axis=0)
    total = np.where(finite, residuals, 0.0) ** 2
    return np.where(count > 0, np.sqrt(total.sum(axis=0) / np.maximum(count, 1)), np.nan)


def shadow_figure(name: str, grid, estimate) -> Figure:
    """Measured (observed points only) and shadow (estimated) joint angles over time."""
    return joint_time_figure(
        grid.time_s,
        [("measured", observed_only(grid.measured_angles, grid.observed), MEASURED_STYLE),
         ("shadow (estimated)", estimate.joint_angles, SHADOW_STYLE)],
        title=f"{short_name(name)}: measured vs shadow joint angles", ylabel="[rad]")


def residual_figure(name: str, grid, estimate) -> Figure:
    """Residuals measured − shadow over time at the observed grid points, RMS per joint."""
    residuals = observed_only(wrapped(grid.measured_angles - estimate.joint_angles),
                              grid.observed)
    rms = residual_rms(residuals)
    return joint_time_figure(
        grid.time_s, [("measured − shadow", residuals, RESIDUAL_STYLE)],
        title=f"{short_name(name)}: residuals at observed points", ylabel="[rad]",
        axis_titles=[f"RMS {value:.3g} rad" for value in rms])


def open_loop_figure(name: str, check, observed: np.ndarray | None = None) -> Figure:
    """Open-loop simulation vs measured angles, RMS over the first seconds and over all."""
    measured = check.measured if observed is None else observed_only(check.measured, observed)
    first, total = np.atleast_1d(check.rms_first), np.atleast_1d(check.rms_all)
    return joint_time_figure(
        check.time_s,
        [("measured", measured, MEASURED_STYLE), ("open-loop simulation", check.simulated,
                                                  SIMULATED_STYLE)],
        title=f"{short_name(name)}: open-loop simulation vs measured", ylabel="[rad]",
        axis_titles=[f"RMS (wrapped error) {first[j]:.3g} rad over the first "
                     f"{check.first_s:g} s, {total[j]:.3g} rad over all"
                     for j in range(min(len(first), len(total)))])


def prediction_figure(name: str, check) -> Figure:
    """RMS prediction error per joint against the lead time (short-horizon validation)."""
    figure = new_figure(3.2)
    axes = figure.add_subplot()
    rms = np.asarray(check.rms, dtype=np.float64)
    for joint in range(rms.shape[1]):
        axes.plot(check.horizons_s, rms[:, joint], marker="o", markersize=3.5,
                  label=joint_label(joint))
    axes.set_xlabel("prediction lead time [s]")
    axes.set_ylabel("RMS angle error [rad]")
    axes.set_ylim(bottom=0.0)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left")
    axes.set_title(f"{short_name(name)}: {check.starts} predictions from the estimated states",
                   fontsize=10)
    return figure
