"""Reading ``excite``'s files back: the input (excitation.csv) and its limits (excitation.yaml).

For ``simulate --input``, ``rig-sim --input`` and the exciter node: plain NumPy and YAML, no
model (the exciter node starts without JAX). ``excite`` writes them
(:mod:`mb_estimation.report.excitation`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from mb_estimation.errors import UserError, first_line


def read_excitation(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(time_s, input)`` of an excitation.csv, its samples equally spaced.

    Raises :class:`~mb_estimation.errors.UserError` (one line) for a file that is not one.
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        raise UserError(f"{path}: cannot read the input file ({error.strerror})") from None
    if not lines or lines[0].strip() != "time_s,input":
        raise UserError(f"{path}: not an input file: its first line must be 'time_s,input' "
                        "(excite writes one)")
    try:
        rows = np.array([[float(value) for value in line.split(",")] for line in lines[1:]
                         if line.strip()])
    except ValueError:
        raise UserError(f"{path}: a row is not two numbers") from None
    if rows.ndim != 2 or rows.shape[1] != 2 or len(rows) < 2:
        raise UserError(f"{path}: expected two columns and at least two rows")
    steps = np.diff(rows[:, 0])
    if not np.all(np.isfinite(rows)) or np.any(steps <= 0) or np.ptp(steps) > 1e-6 * steps[0]:
        raise UserError(f"{path}: the times must be finite and equally spaced")
    return rows[:, 0], rows[:, 1]


def read_limits(path: Path) -> dict | None:
    """The limits of the ``excitation.yaml`` beside an excitation.csv, or None where none is.

    ``{"max_input": float, "max_arm_rad": float or None, "max_arm_rate": float or None}``
    [input units, rad, rad/s].
    """
    return _beside(path, lambda document: {
        "max_input": float(document["limits"]["max_input"]),
        "max_arm_rad": _optional(document["limits"].get("max_arm_rad")),
        "max_arm_rate": _optional(document["limits"].get("max_arm_rate_rad_s"))}, "limits")


def read_prediction(path: Path) -> tuple[float, float] | None:
    """The worst relative std predicted for the design and the multisine, or None.

    Read from the ``excitation.yaml`` beside an excitation.csv; None where there is none.
    """
    return _beside(path, lambda document: (
        float(document["design"]["worst_relative_std"]),
        float(document["multisine"]["worst_relative_std"])), "prediction")


def _beside(path: Path, read, what: str):
    """``read`` applied to the ``excitation.yaml`` beside ``path``; None where there is none."""
    beside = Path(path).with_name("excitation.yaml")
    try:
        return read(yaml.safe_load(beside.read_text(encoding="utf-8")) or {})
    except FileNotFoundError:
        return None
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as error:
        raise UserError(f"{beside}: cannot read its {what} ({first_line(error)})") from None


def _optional(value) -> float | None:
    return None if value is None else float(value)
