"""Preprocessing of a recording onto the estimation grid (paper §4.4).

Pure NumPy/SciPy, no model: the estimator turns the filtered angles into initial states.

* angles are unwrapped (multi-turn), sorted by time, exact duplicate stamps dropped;
* a zero-phase second-order Butterworth low-pass (``scipy.signal.butter`` +
  ``sosfiltfilt``, forward and backward) smooths them for the initial states;
* the grid ``t_k = t_0 + k h`` starts where both angles and input are known;
* measured angles (unfiltered) and filtered angles are interpolated linearly onto the grid; on
  a grid finer than the samples only the point nearest each sample is observed;
* gaps (dropped samples: an interval longer than ``GAP_FACTOR`` median sample periods and than
  the step) are bridged: the grid keeps its times, and grid points inside a gap are marked
  unobserved, so only the dynamics carry the states across it;
* the input is held between its samples (zero-order hold) and averaged over each step
  ``[t_k, t_{k+1}]``, so that ``h·u_k`` is exactly the held input's integral over the step — the
  motor impulse ``K h u_k`` of (F.3) then matches the recording whatever the input rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import signal

from mb_estimation.errors import RecordingError

GAP_FACTOR = 3.0  # a sample interval this many median periods long is a gap


@dataclass(frozen=True)
class Recording:
    """One recording in model conventions (joint mapping, offsets and signs already applied).

    Attributes:
        name: where it came from (a bag path), for messages and outputs.
        time_s: joint-angle sample times ``[m]`` [s].
        joint_angles: model joint angles ``[m, n_joints]`` [rad], wrapped or multi-turn.
        input_time_s: times ``[q]`` [s] at which the input takes each value (held until the next).
        inputs: input values ``[q, n_inputs]`` (the Furuta rig: motor voltage [V]).
        notes: what reading it did to the data (stamps chosen, samples dropped, ...).
        joint_rates: the driver's joint velocities ``[m, n_joints]`` [rad/s] at ``time_s``,
            only when asked for (``recording.use_driver_velocities``); else None.
        start_ns: the stamp ``time_s`` counts from [ns since the epoch], when read from a
            recording; else None.
    """

    name: str
    time_s: np.ndarray
    joint_angles: np.ndarray
    input_time_s: np.ndarray
    inputs: np.ndarray
    notes: tuple[str, ...] = ()
    joint_rates: np.ndarray | None = None
    start_ns: int | None = None


@dataclass(frozen=True)
class GridData:
    """A recording on the estimation grid ``t_k = t_0 + k h``, ``k = 0..n-1``.

    Attributes:
        name: the recording's name.
        time_s: grid times ``[n]`` [s] (same time base as the recording).
        measured_angles: unwrapped, unfiltered angles on the grid ``[n, n_joints]`` [rad]: the
            observations ``y_k`` of (3.6).
        filtered_angles: low-passed angles on the grid ``[n, n_joints]`` [rad]: initial states.
        inputs: the held input averaged over each step ``[n-1, n_inputs]``.
        observed: ``[n]`` 1.0 where ``y_k`` enters the observation residuals, 0.0 where not.
        dt: the grid step h [s].
        initial_rates: low-passed driver joint velocities on the grid ``[n, n_joints]``
            [rad/s] for the initial states, or None (velocities from the filtered angles).
        locked: per joint, whether the recording holds it still (by a torque nobody recorded:
            a hand, a brake); empty where none is.
    """

    name: str
    time_s: np.ndarray
    measured_angles: np.ndarray
    filtered_angles: np.ndarray
    inputs: np.ndarray
    observed: np.ndarray
    dt: float
    initial_rates: np.ndarray | None = None
    locked: tuple[bool, ...] = ()

    @property
    def locked_mask(self) -> np.ndarray:
        """``[n_joints]``: 1.0 where the recording holds a joint still (:attr:`locked`), else 0."""
        if not self.locked:
            return np.zeros(self.measured_angles.shape[1])
        return np.asarray(self.locked, dtype=np.float64)

    @property
    def num_steps(self) -> int:
        return len(self.time_s)


def sorted_unique(time_s: np.ndarray, values: np.ndarray):
    """Samples sorted by time with exact repeats of a time dropped (the first one kept).

    Returns ``(time_s, values, out_of_order, repeated)``: the counts of samples that came before
    an earlier one and of those dropped.
    """
    out_of_order = int(np.sum(np.diff(time_s) < 0))
    order = np.argsort(time_s, kind="stable")
    time_s, values = time_s[order], values[order]
    keep = np.concatenate([[True], np.diff(time_s) > 0])
    return time_s[keep], values[keep], out_of_order, int(np.sum(~keep))


def _inside_gaps(time_s: np.ndarray, grid: np.ndarray, dt: float) -> np.ndarray:
    """Mask of the grid points that fall strictly inside a gap between samples."""
    intervals = np.diff(time_s)
    threshold = max(GAP_FACTOR * float(np.median(intervals)), dt)
    after = np.clip(np.searchsorted(time_s, grid, side="right"), 1, len(time_s) - 1)
    inside = (grid > time_s[after - 1]) & (grid < time_s[after])
    return inside & (intervals[after - 1] > threshold)


def _sampled(time_s: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``[n]`` 1.0 at the grid points nearest to a sample, 0.0 elsewhere.

    On a grid at least as coarse as the samples every point is someone's nearest and all are
    observed (with the angles interpolated there); on a finer grid only one point per sample
    carries its observation, so a sample is never counted twice and no interpolated value
    between samples poses as a measurement.
    """
    nearest = np.clip(np.searchsorted(grid, time_s), 1, len(grid) - 1)
    nearest -= (time_s - grid[nearest - 1]) < (grid[nearest] - time_s)
    inside = (time_s >= grid[0]) & (time_s <= grid[-1])
    observed = np.zeros(len(grid))
    observed[nearest[inside]] = 1.0
    step = grid[1] - grid[0]
    period = float(np.median(np.diff(time_s))) if len(time_s) > 1 else step
    return observed if step < period * (1.0 - 1e-6) else np.ones(len(grid))


def lowpass(time_s: np.ndarray, values: np.ndarray, cutoff_hz: float) -> np.ndarray:
    """Zero-phase 2nd-order Butterworth low-pass of ``values [m, c]`` sampled at ``time_s``.

    Non-uniform samples are first interpolated onto a uniform base at the median period; the
    result is returned at the original times. Each stretch between gaps (intervals over
    ``GAP_FACTOR`` median periods) is filtered on its own: a filter across a gap would smear
    one side into the other, and a uniform base across it would grow with the gap instead of
    with the samples (at most ``GAP_FACTOR`` points per sample).
    """
    period = float(np.median(np.diff(time_s)))
    rate_hz = 1.0 / period
    if cutoff_hz >= 0.5 * rate_hz:
        raise RecordingError(f"filter cutoff {cutoff_hz} Hz must lie below the Nyquist "
                             f"frequency {0.5 * rate_hz:g} Hz of the {rate_hz:g} Hz recording")
    sos = signal.butter(2, cutoff_hz, fs=rate_hz, output="sos")
    smoothed = np.array(values, dtype=np.float64)
    breaks = np.flatnonzero(np.diff(time_s) > GAP_FACTOR * period) + 1
    for stretch in np.split(np.arange(len(time_s)), breaks):
        if len(stretch) < 2:
            continue
        times = time_s[stretch]
        count = int(np.floor((times[-1] - times[0]) / period + 1e-9)) + 1
        uniform_t = times[0] + period * np.arange(count)
        uniform = np.stack([np.interp(uniform_t, times, v) for v in values[stretch].T], axis=1)
        padlen = min(3 * (2 * len(sos) + 1), count - 1)
        filtered = signal.sosfiltfilt(sos, uniform, axis=0, padlen=padlen)
        smoothed[stretch] = np.stack([np.interp(times, uniform_t, v) for v in filtered.T],
                                     axis=1)
    return smoothed


def held_input_integral(input_time_s: np.ndarray, inputs: np.ndarray, at_s: np.ndarray):
    """The zero-order-held input's integral ``[len(at_s), c]`` [input units · s] at ``at_s``.

    From the first stamp (its value held before it too); continuous in ``at_s``.
    """
    durations = np.diff(input_time_s)
    integral_at_changes = np.concatenate(
        [np.zeros((1, inputs.shape[1])), np.cumsum(inputs[:-1] * durations[:, None], axis=0)])
    index = np.clip(np.searchsorted(input_time_s, at_s, side="right") - 1, 0, None)
    return integral_at_changes[index] + inputs[index] * (at_s - input_time_s[index])[:, None]


def held_input_means(input_time_s: np.ndarray, inputs: np.ndarray, grid_s: np.ndarray):
    """Means ``[n-1, c]`` of the zero-order-held input over ``[grid_k, grid_{k+1}]``."""
    integral = held_input_integral(input_time_s, inputs, grid_s)
    return np.diff(integral, axis=0) / np.diff(grid_s)[:, None]


def _check_not_mostly_gap(name: str, time_s: np.ndarray, begin: float, finish: float) -> None:
    """Raise when one interval between joint samples spans most of ``[begin, finish]`` [s].

    A stamp glitch (a sample stamped far from the others) would otherwise make a grid sized by
    the glitch, not by the data.
    """
    inside = time_s[(time_s >= begin) & (time_s <= finish)]
    if finish <= begin or len(inside) < 2:
        return
    stamps = np.concatenate([[begin], inside, [finish]])
    intervals = np.diff(stamps)
    longest = int(np.argmax(intervals))
    if intervals[longest] > 0.5 * (finish - begin) and intervals[longest] > 1.0:
        raise RecordingError(
            f"{name}: no joint state for {intervals[longest]:.6g} s (between t = "
            f"{stamps[longest]:.6g} s and {stamps[longest + 1]:.6g} s), more than half of the "
            "recording: "
            "a stamp glitch? choose the span with --start/--end")


def prepare_recording(recording: Recording, dt: float, cutoff_hz: float, *,
                      start_s: float | None = None, end_s: float | None = None) -> GridData:
    """Put ``recording`` on the grid of step ``dt`` [s] (paper §4.4).

    ``start_s``/``end_s`` trim the recording, in seconds from its first joint-angle sample. The
    grid starts at the latest of: the first angle sample, the first input sample, ``start_s``.
    Raises :class:`~mb_estimation.errors.RecordingError` when fewer than three grid points remain.
    """
    if dt <= 0:
        raise ValueError(f"the estimation step dt must be positive, got {dt}")
    joints = np.asarray(recording.joint_angles, float)
    with_rates = recording.joint_rates is not None
    if with_rates:
        joints = np.concatenate([joints, np.asarray(recording.joint_rates, float)], axis=1)
    time_s, joints, _, _ = sorted_unique(np.asarray(recording.time_s, float), joints)
    count_joints = np.shape(recording.joint_angles)[1]
    angles = np.unwrap(joints[:, :count_joints], axis=0)
    begin, finish = time_s[0], time_s[-1]
    num_inputs = recording.inputs.shape[1] if np.ndim(recording.inputs) == 2 else 0
    if num_inputs:
        input_time, inputs, _, _ = sorted_unique(np.asarray(recording.input_time_s, float),
                                            np.asarray(recording.inputs, float))
        begin = max(begin, input_time[0])
    if start_s is not None:
        begin = max(begin, time_s[0] + start_s)
    if end_s is not None:
        finish = min(finish, time_s[0] + end_s)
    count = int(np.floor((finish - begin) / dt + 1e-9)) + 1 if finish > begin else 0
    _check_not_mostly_gap(recording.name, time_s, begin, finish)
    if count < 3:
        raise RecordingError(f"{recording.name}: {max(finish - begin, 0.0):.3g} s of usable "
                             f"data is too short for estimation steps of {dt} s (need at least 3 "
                             "points)")
    grid = begin + dt * np.arange(count)
    filtered = lowpass(time_s, angles, cutoff_hz)
    measured_grid = np.stack([np.interp(grid, time_s, a) for a in angles.T], axis=1)
    filtered_grid = np.stack([np.interp(grid, time_s, a) for a in filtered.T], axis=1)
    observed = _sampled(time_s, grid)
    observed[_inside_gaps(time_s, grid, dt)] = 0.0
    grid_inputs = (held_input_means(input_time, inputs, grid) if num_inputs
                   else np.zeros((count - 1, 0)))
    initial_rates = None
    if with_rates:
        rates = lowpass(time_s, joints[:, count_joints:], cutoff_hz)
        initial_rates = np.stack([np.interp(grid, time_s, r) for r in rates.T], axis=1)
    return GridData(
        name=recording.name,
        time_s=grid,
        measured_angles=measured_grid,
        filtered_angles=filtered_grid,
        inputs=grid_inputs,
        observed=observed,
        dt=float(dt),
        initial_rates=initial_rates,
    )
