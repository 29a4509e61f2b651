"""Steady drives: where a constant input turns a joint at a steady speed, and what they imply.

Pure NumPy, no model beyond one physical law. Where an input ``u`` is held long enough for the
joint it drives to settle at a steady speed ``ω`` (a step response's end), the input's torque
``K u`` balances the joint's friction: ``K u = c + b ω`` with a dry part ``c ≥ 0`` and a
viscous part ``b ≥ 0`` (the rigid model's friction, paper (2.31) and the arm's viscous term;
back-EMF adds to ``b``; a torque ripple averages out over a revolution). So under one input gain
``K`` the input a steady speed needs grows with the speed, and the speed per input unit
``ω / u`` does not fall as the speed grows. Two recordings that break this by far more than
friction's departures from the law (:data:`CONFLICT_FACTOR`) cannot share one gain: their inputs
are not in the same unit, or the driver ran in another mode. A fit pooling them trades the
gain, the friction and the inertia against each other; this check says so before any fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mb_estimation.signals.preprocess import GridData

#: A held input counts where it stays constant this long [s]; its later half is the steady part.
STEADY_MIN_S = 1.0
#: The steady part's two halves turn at speeds within this fraction of each other.
STEADY_SPEED_TOLERANCE = 0.1
#: The steady part covers at least a revolution [rad], so that a torque ripple averages out.
STEADY_MIN_TURN_RAD = 2.0 * np.pi
#: Two steady drives conflict where one of the law's two orderings is broken by more than this
#: factor: friction is not exactly dry plus viscous (a Stribeck dip, a driver's saturation
#: at top speed move the speed per unit by tens of percent), a change of units or driver mode
#: by several times.
CONFLICT_FACTOR = 2.0


@dataclass(frozen=True)
class SteadyDrive:
    """A recording's steady drive: ``input`` held, its joint turning at ``speed_rad_s``.

    ``speed_rad_s``: the joint's mean speed over the steady part [rad/s] (signed, model
    convention); ``input``: the held input (the Furuta rig: its command, in the recording's
    unit); ``duration_s``: the steady part's length [s].
    """

    recording: str
    input: float
    speed_rad_s: float
    duration_s: float

    @property
    def speed_per_input(self) -> float:
        """The joint's speed per input unit [rad/s per unit]."""
        return self.speed_rad_s / self.input


def _slope(time_s: np.ndarray, angle: np.ndarray) -> float:
    """Least-squares slope of ``angle`` over ``time_s``."""
    return float(np.polyfit(time_s, angle, 1)[0])


def steady_drive(grid: GridData, input_index: int, joint_index: int) -> SteadyDrive | None:
    """The recording's steady drive of joint ``joint_index`` by input ``input_index``, if any.

    The longest stretch where the input (held means per step) is constant and non-zero for at
    least :data:`STEADY_MIN_S`; its later half is the steady part when the joint turns through
    :data:`STEADY_MIN_TURN_RAD` or more there, at speeds within
    :data:`STEADY_SPEED_TOLERANCE` between that half's two halves. None where no stretch
    qualifies (a free swing, a sine, a stalled joint).
    """
    inputs = np.asarray(grid.inputs, dtype=np.float64)
    if inputs.size == 0:
        return None
    u = inputs[:, input_index]
    scale = float(np.max(np.abs(u), initial=0.0))
    if scale == 0.0:
        return None
    changes = np.flatnonzero(np.abs(np.diff(u)) > 1e-9 * scale) + 1
    starts = np.concatenate(([0], changes))
    ends = np.concatenate((changes, [len(u)]))
    held = [(start, end) for start, end in zip(starts, ends, strict=True)
            if abs(u[start]) > 1e-9 * scale and (end - start) * grid.dt >= STEADY_MIN_S]
    if not held:
        return None
    start, end = max(held, key=lambda run: run[1] - run[0])
    later = slice((start + end) // 2, end + 1)  # grid points; step k spans points k, k+1
    time_s = np.asarray(grid.time_s)[later]
    angle = np.asarray(grid.measured_angles)[later, joint_index]
    observed = np.asarray(grid.observed)[later] > 0
    time_s, angle = time_s[observed], angle[observed]
    if len(time_s) < 8 or abs(angle[-1] - angle[0]) < STEADY_MIN_TURN_RAD:
        return None
    middle = len(time_s) // 2
    speed = _slope(time_s, angle)
    halves = _slope(time_s[:middle], angle[:middle]), _slope(time_s[middle:], angle[middle:])
    if abs(halves[0] - halves[1]) > STEADY_SPEED_TOLERANCE * abs(speed):
        return None
    return SteadyDrive(grid.name, float(u[start]), speed, float(time_s[-1] - time_s[0]))


@dataclass(frozen=True)
class DriveConflict:
    """Two steady drives no single input gain explains (module docstring).

    ``slower`` turns slower than ``faster``; ``factor``: by how much the law's ordering is
    broken; ``how``: which ordering, in words.
    """

    slower: SteadyDrive
    faster: SteadyDrive
    factor: float
    how: str


def drive_conflicts(drives: Sequence[SteadyDrive]) -> tuple[DriveConflict, ...]:
    """Pairs of ``drives`` that one input gain and a friction growing with speed cannot explain.

    With ``e = u·sign(ω)`` the input pushing along the motion and ``s = |ω|``: the law
    ``K e = c + b s`` wants ``e > 0``, ``e`` non-decreasing in ``s`` and ``e/s`` non-increasing
    in ``s``. A pair conflicts where the slower drive needs more than :data:`CONFLICT_FACTOR`
    times the faster one's input, or turns more than that factor faster per unit. Worst first.
    """
    conflicts = []
    ordered = sorted(drives, key=lambda drive: abs(drive.speed_rad_s))
    for i, slower in enumerate(ordered):
        for faster in ordered[i + 1:]:
            e_slow = slower.input * np.sign(slower.speed_rad_s)
            e_fast = faster.input * np.sign(faster.speed_rad_s)
            if e_slow <= 0 or e_fast <= 0:
                continue  # a drive against its input is not friction's: not this law's case
            more_input = e_slow / e_fast
            more_speed = abs(slower.speed_per_input) / abs(faster.speed_per_input)
            if more_input > CONFLICT_FACTOR and more_input >= more_speed:
                conflicts.append(DriveConflict(slower, faster, more_input,
                                               "with more input"))
            elif more_speed > CONFLICT_FACTOR:
                conflicts.append(DriveConflict(slower, faster, more_speed,
                                               "with more speed per input unit"))
    return tuple(sorted(conflicts, key=lambda conflict: -conflict.factor))


def drive_groups(drives: Sequence[SteadyDrive]) -> tuple[tuple[SteadyDrive, ...], ...]:
    """``drives`` grouped by speed per input unit, slowest per unit first.

    A new group where the speed per unit jumps by more than :data:`CONFLICT_FACTOR` from one
    drive to the next; within a group, in the order given.
    """
    order = sorted(range(len(drives)), key=lambda i: abs(drives[i].speed_per_input))
    groups: list[list[int]] = []
    for i in order:
        if groups and (abs(drives[i].speed_per_input)
                       <= CONFLICT_FACTOR * abs(drives[groups[-1][-1]].speed_per_input)):
            groups[-1].append(i)
        else:
            groups.append([i])
    return tuple(tuple(drives[i] for i in sorted(group)) for group in groups)


def drives_note(drives: Sequence[SteadyDrive]) -> str | None:
    """One line naming the worst conflict and the groups of drives; None without a conflict."""
    conflicts = drive_conflicts(drives)
    if not conflicts:
        return None

    def group_text(group):
        rates = [abs(drive.speed_per_input) for drive in group]
        low, high = f"{min(rates):.3g}", f"{max(rates):.3g}"
        names = ", ".join(Path(drive.recording).name for drive in group)
        return f"{names} {low if low == high else f'{low}–{high}'}"

    worst = conflicts[0]
    return (f"the recordings' steady drives disagree: {Path(worst.slower.recording).name} "
            f"turns slower ({abs(worst.slower.speed_rad_s):.3g} rad/s at "
            f"{worst.slower.input:.3g}) than {Path(worst.faster.recording).name} "
            f"({abs(worst.faster.speed_rad_s):.3g} rad/s at {worst.faster.input:.3g}) "
            f"{worst.how} ({worst.factor:.3g}×), which no friction growing with speed gives "
            "under one input gain; speed per input unit [rad/s]: "
            + "; ".join(group_text(group) for group in drive_groups(drives)))
