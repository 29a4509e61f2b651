"""Playing a designed input on a rig, safely: the exciter's state, without ROS.

The exciter node (:mod:`mb_estimation.ros.ros_exciter`) hands this object each joint state as
it arrives and publishes the input it answers with, as a controller does: the input of the
rig's sample ``k`` goes out right after the rig's sample ``k``, so the rig and the estimator
both take it for the period that follows. It plays the designed input (``excite``'s
``excitation.csv``, sample ``j`` at ``j / rate_hz`` after the first joint state's stamp) within
a bound faded in and out over :attr:`ExcitationRun.ramp_s` (``excite`` fades its design the same
way, so it plays unchanged; any other input starts without a step on the motor), and it **stops
for good, answering zero**, when

- the arm leaves its angle limit (measured from where it stood at the start) or its rate limit,
- a joint state is not finite (a broken encoder, a driver fault),
- no joint state has arrived for :attr:`ExcitationRun.timeout_s` (a lost stream: seen at the
  node's timer ticks, :meth:`Exciter.tick`),
- or it is told to (the node's ``~/stop`` service, a deactivation).

Times: ``now_s`` on one monotonic clock (arrival), ``stamp_s`` the joint states' header stamps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mb_estimation.fade import RAMP_S, fade

WAITING = "waiting for the first joint state"
PLAYING = "playing"
DONE = "done"
STOPPED = "stopped"


@dataclass(frozen=True)
class ExcitationRun:
    """What to play and the limits it is played within.

    ``inputs [n]``: the input at each sample [the rig's input units, e.g. V], held for
    ``1/rate_hz`` [s]; ``max_input`` the largest magnitude ever published (a value beyond it is
    clipped); ``max_arm_rad`` [rad] from the arm's angle at the start and ``max_arm_rate``
    [rad/s] (None: no limit); ``ramp_s`` [s] the fade in and out; ``timeout_s`` [s] the longest
    gap between joint states.
    """

    inputs: np.ndarray
    rate_hz: float
    max_input: float
    max_arm_rad: float | None = None
    max_arm_rate: float | None = None
    ramp_s: float = RAMP_S
    timeout_s: float = 0.1

    def __post_init__(self):
        inputs = np.asarray(self.inputs, dtype=np.float64).reshape(-1)
        problems = []
        if len(inputs) < 2 or not np.all(np.isfinite(inputs)):
            problems.append("the input needs at least two finite samples")
        for name in ("rate_hz", "max_input", "timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                problems.append(f"{name} must be a positive number, got {value}")
        for name in ("max_arm_rad", "max_arm_rate"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                problems.append(f"{name} must be a positive number or unset, got {value}")
        if not (math.isfinite(self.ramp_s) and self.ramp_s >= 0):
            problems.append(f"ramp_s must be a non-negative number, got {self.ramp_s}")
        if problems:
            raise ValueError("; ".join(problems))
        object.__setattr__(self, "inputs", inputs)

    @property
    def duration_s(self) -> float:
        """How long the input plays [s]."""
        return len(self.inputs) / self.rate_hz

    def played(self) -> np.ndarray:
        """The input as it is played: within the bound faded in and out over ``ramp_s``.

        The bound rises from 0 to ``max_input`` and falls back (:func:`~mb_estimation.fade.fade`),
        so ``excite``'s design, faded the same way, plays unchanged, and any other input starts
        and ends without a step.
        """
        bound = self.max_input * fade(len(self.inputs), self.rate_hz, self.ramp_s)
        return np.clip(self.inputs, -bound, bound)


class Exciter:
    """One run of an :class:`ExcitationRun`: its state, the events that change it.

    :attr:`state` is one of ``WAITING``, ``PLAYING``, ``DONE`` (played to its end) and
    ``STOPPED`` (:attr:`reason` says why); the last two are final.
    """

    def __init__(self, run: ExcitationRun):
        self.run = run
        self._played = run.played()
        self.state = WAITING
        self.reason = ""
        self.started_s: float | None = None  # the first joint state's stamp
        self.arm_start_rad: float | None = None
        self.last_joint_state_s: float | None = None
        self.arm_peak_rad = 0.0  # the largest excursion from the start so far
        self.arm_rate_peak = 0.0

    @property
    def finished(self) -> bool:
        return self.state in (DONE, STOPPED)

    def stop(self, reason: str) -> bool:
        """Stop for good (no-op once finished); True when this call stopped it."""
        if self.finished:
            return False
        self.state, self.reason = STOPPED, reason
        return True

    def joint_state(self, now_s: float, stamp_s: float, arm_rad: float,
                    arm_rate: float | None, finite: bool = True) -> float:
        """A joint state arrived; the input to publish in answer [input units].

        ``now_s`` its arrival, ``stamp_s`` its header stamp [s]; the arm's angle [rad] and rate
        [rad/s] (None: not sent); ``finite``: whether every position and velocity in it is.
        Zero unless playing (it stops here on a breach, and ends after the last sample).
        """
        if self.finished:
            return 0.0
        if not (finite and math.isfinite(arm_rad)
                and (arm_rate is None or math.isfinite(arm_rate))):
            self.stop("a joint state is not finite")
            return 0.0
        self.last_joint_state_s = now_s
        if self.state == WAITING:
            self.state, self.started_s, self.arm_start_rad = PLAYING, stamp_s, arm_rad
        excursion = abs(arm_rad - self.arm_start_rad)
        self.arm_peak_rad = max(self.arm_peak_rad, excursion)
        limits = self.run
        if limits.max_arm_rad is not None and excursion > limits.max_arm_rad:
            self.stop(f"the arm left its limit: {excursion:.3g} rad from its start (limit "
                      f"{limits.max_arm_rad:g} rad)")
            return 0.0
        if arm_rate is not None:
            self.arm_rate_peak = max(self.arm_rate_peak, abs(arm_rate))
            if limits.max_arm_rate is not None and abs(arm_rate) > limits.max_arm_rate:
                self.stop(f"the arm turned at {abs(arm_rate):.3g} rad/s (limit "
                          f"{limits.max_arm_rate:g} rad/s)")
                return 0.0
        sample = int(math.floor((stamp_s - self.started_s) * limits.rate_hz + 1e-6))
        if sample >= len(self._played):
            self.state = DONE
            return 0.0
        return float(self._played[max(sample, 0)])

    def tick(self, now_s: float) -> float | None:
        """The node's timer: zero to publish, or None while playing (the joint states answer).

        Stops the run when no joint state has arrived for the timeout.
        """
        if self.state != PLAYING:
            return 0.0
        if now_s - self.last_joint_state_s > self.run.timeout_s:
            self.stop(f"no joint state for {now_s - self.last_joint_state_s:.3g} s "
                      f"(timeout {self.run.timeout_s:g} s)")
            return 0.0
        return None


def excitation_run(path, *, max_input: float = 0.0, max_arm_rad: float = 0.0,
                   max_arm_rate: float = 0.0, ramp_s: float = RAMP_S,
                   timeout_s: float = 0.1) -> ExcitationRun:
    """The :class:`ExcitationRun` of an ``excitation.csv``, with the given limits.

    A limit of 0 takes the one of the ``excitation.yaml`` beside the file (``excite`` writes
    both), else none; the input bound then defaults to the file's peak. Raises ``UserError``
    or ``ValueError`` (one line).
    """
    from mb_estimation.io.excitation_files import read_excitation, read_limits

    time_s, inputs = read_excitation(path)
    designed = read_limits(path)

    def chosen(value, name):
        return float(value) if value > 0 else (designed or {}).get(name)

    return ExcitationRun(
        inputs, rate_hz=(len(time_s) - 1) / float(time_s[-1] - time_s[0]),
        max_input=chosen(max_input, "max_input") or float(np.max(np.abs(inputs))),
        max_arm_rad=chosen(max_arm_rad, "max_arm_rad"),
        max_arm_rate=chosen(max_arm_rate, "max_arm_rate"),
        ramp_s=float(ramp_s), timeout_s=float(timeout_s))
