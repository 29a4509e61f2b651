"""``track``'s files: the window time series (``windows.csv``) and the summary (``tracking.yaml``).

``windows.csv``: one row per window in stamp order: ``end_s`` (the window's end, seconds since
the epoch of the recordings' stamps), ``recording``, ``window``, ``accepted``, ``reason``,
``fit_s``; per free parameter (a tilt as ``tilt_rx/ry/rz`` [rad]) the window's value and std,
and after each accepted window the fused value and std and the rate per hour and its std (the
drift filter's). Empty cells where a window was rejected; a std of −1 where the data do not
determine it, as on the node's topics.

``tracking.yaml``: the last fused value of each parameter with its std, rate per hour and
rate std, the drift alarm, each recording's windows fused as a steady parameter, the counts
(``contradicting``: accepted windows whose values contradict the fused ones, their reason
saying so) and the settings that made them.

``report.html`` and ``drift.png``: each parameter and its rate against time
(:mod:`mb_estimation.report.tracking`).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import yaml

from mb_estimation.config import Config
from mb_estimation.io.files import write_text_atomically
from mb_estimation.online.drift import alarms
from mb_estimation.online.messages import parameter_matrix, rate_matrix
from mb_estimation.report.tracking import ParameterSeries, write_tracking_report

__all__ = ["write_tracking"]


def _number(value: float) -> float | None:
    return None if value < 0 else float(value)


def write_tracking(directory: Path, config: Config, tracking) -> list[Path]:
    """Write ``windows.csv``, ``tracking.yaml`` and the report of a :class:`.windows.Tracking`.

    Returns the paths written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    accepted = [w for w in tracking.windows if w.accepted]
    labels = parameter_matrix(accepted[0].estimate)[0] if accepted else ()
    header = ["end_s", "recording", "window", "accepted", "reason", "fit_s"]
    for label in labels:
        header += [label, f"{label}_std", f"{label}_fused", f"{label}_fused_std",
                   f"{label}_rate_per_hour", f"{label}_rate_std"]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    drift = iter(tracking.drift)
    for window in tracking.windows:
        row = [f"{window.end_s:.6f}", window.source, window.index, int(window.accepted),
               window.reason, f"{window.elapsed_s:.3f}"]
        if window.accepted:
            drifting = next(drift)
            own = parameter_matrix(window.estimate)[1]
            fused = parameter_matrix(drifting.estimate)[1]
            rates = rate_matrix(drifting)[1]
            for k in range(len(labels)):
                row += [f"{own[0, k]:.9g}", f"{own[1, k]:.3g}", f"{fused[0, k]:.9g}",
                        f"{fused[1, k]:.3g}", f"{rates[0, k]:.6g}", f"{rates[1, k]:.3g}"]
        else:
            row += [""] * (6 * len(labels))
        writer.writerow(row)
    csv_path = directory / "windows.csv"
    write_text_atomically(csv_path, text.getvalue())

    node = config.node
    summary = {
        "windows": len(tracking.windows), "accepted": len(accepted),
        "contradicting": tracking.contradicting,
        "settings": {"window_s": node.window_s, "stride_s": node.stride_s,
                     "drift_noise": node.drift_noise,
                     "drift_noise_by_parameter": node.drift_noise_by_parameter,
                     "drift_prior": node.drift_prior, "drift_alarm_std": node.drift_alarm_std,
                     "drift_alarm_s": node.drift_alarm_s},
    }
    final = tracking.final
    if final is not None:
        names, fused = parameter_matrix(final.estimate)
        rates = rate_matrix(final)[1]
        summary["drift_alarm"] = list(alarms(final, node.drift_alarm_s))
        summary["parameters"] = {
            label: {"value": float(fused[0, k]), "std": _number(fused[1, k]),
                    "rate_per_hour": float(rates[0, k]), "rate_std": _number(rates[1, k])}
            for k, label in enumerate(names)}
        summary["recordings"] = {}
        for source, estimate in tracking.by_source.items():
            names, matrix = parameter_matrix(estimate)
            summary["recordings"][source] = {
                "windows": estimate.windows,
                "parameters": {label: {"value": float(matrix[0, k]),
                                       "std": _number(matrix[1, k])}
                               for k, label in enumerate(names)}}
    yaml_path = directory / "tracking.yaml"
    write_text_atomically(yaml_path, yaml.safe_dump(summary, sort_keys=False))
    written = [csv_path, yaml_path]
    if final is not None:
        written += _report(directory, config, tracking, accepted, labels)
    return written


def _report(directory: Path, config: Config, tracking, accepted, labels) -> list[Path]:
    """drift.png and report.html from the accepted windows and the drift after each."""
    def spread(values):
        return np.where(values < 0, np.inf, values)

    own = np.stack([parameter_matrix(w.estimate)[1] for w in accepted])  # [n, 2, p]
    fused = np.stack([parameter_matrix(d.estimate)[1] for d in tracking.drift])
    rates = np.stack([rate_matrix(d)[1] for d in tracking.drift])
    series = [ParameterSeries(label, own[:, 0, k], spread(own[:, 1, k]), fused[:, 0, k],
                              spread(fused[:, 1, k]), rates[:, 0, k], spread(rates[:, 1, k]))
              for k, label in enumerate(labels)]
    ends = np.array([w.end_s for w in accepted])
    spec = config.rig_spec
    units = {name: spec.parameter(name).unit for name in accepted[0].estimate.names}
    return write_tracking_report(
        directory, (ends - ends[0]) / 3600.0, [w.source for w in accepted], series, units,
        alarm_std=config.node.drift_alarm_std,
        alarms=alarms(tracking.final, config.node.drift_alarm_s),
        counts=(len(accepted), len(tracking.windows)))
