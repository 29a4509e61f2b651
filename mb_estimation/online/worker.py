"""The worker of the node core: each window estimated, judged, fused and published.

:class:`WindowWorker` is the part of :class:`~mb_estimation.online.core.EstimatorCore` that runs
on its background thread: it takes the windows cut by
:class:`~mb_estimation.online.intake.SampleIntake`, estimates them (warm-started from the last
accepted estimate), accepts or rejects them (:func:`~mb_estimation.online.windows.judge`), fuses
the accepted ones (:func:`~mb_estimation.online.fusion.fuse`), persists the fused estimate, hands
everything to the outputs and re-anchors the real-time filter. It is a mixin: the state it uses
is made in ``EstimatorCore.__init__`` and, besides it, it calls only the core's own
``warm_up`` (first, when ``node.warm_up``), ``_emit``, ``diagnostics``, ``on_message_error`` and
``_warm_config`` (never the intake); it takes ``self._lock`` only briefly, never while
estimating.
"""

from __future__ import annotations

import dataclasses
import threading

import numpy as np

from mb_estimation.errors import first_line
from mb_estimation.estimation import EstimationResult
from mb_estimation.online.fusion import ParameterEstimate, fuse, save_estimate
from mb_estimation.online.windows import (
    Window,
    WindowOutcome,
    judge,
    result_estimate,
    window_step,
)
from mb_estimation.signals import Recording
from mb_estimation.stamps import NS_PER_S

#: How often an idle worker checks that the main thread still runs [s]: the worker is not a
#: daemon (``EstimatorCore.start``), so it leaves by itself once the program has ended.
EXIT_POLL_S = 0.5


class WindowWorker:
    """The estimation worker's side of ``EstimatorCore``: windows in, estimates out."""

    def _work(self) -> None:
        if self.settings.warm_up:
            self._working = True
            self.warm_up()
            self._emit("diagnostics", self.diagnostics())
        while True:
            with self._wake:
                self._working = False
                while not self._pending and not self._stopping:
                    if not threading.main_thread().is_alive():  # the interpreter is exiting
                        return
                    self._wake.wait(EXIT_POLL_S)
                if self._stopping:
                    return
                window = self._pending.popleft()
                self._working = True
            try:
                outcome = self.process(window)
                with self._lock:
                    self._last["last_outcome"] = outcome
                self._emit("window", outcome)
            except Exception as error:  # the worker must outlive any one window
                self.on_message_error(f"window {window.index}: {first_line(error)}")
            self._emit("diagnostics", self.diagnostics())

    def process(self, window: Window) -> WindowOutcome:
        """Estimate on one window, judge it, fuse and publish when accepted (worker thread)."""
        started = self._clock()
        reason = self._unusable(window.recording)
        result = None
        if reason is None:
            try:
                result = self._estimator(self._warm_config(), window.recording)
                reason = judge(result, self.settings.max_cost)
            except Exception as error:  # a failed window must not stop the node
                reason = f"estimator failed: {type(error).__name__}: {first_line(error)}"
        outcome = WindowOutcome(window.index, window.start_ns, reason is None,
                                reason or "accepted", self._clock() - started, result)
        with self._lock:
            self.counters["windows_done"] += 1
            self.counters["windows_accepted" if outcome.accepted else "windows_rejected"] += 1
            self._last["last_window_s"] = outcome.elapsed_s
            if result is not None:
                self._last.update(last_iterations=result.iterations, last_cost=result.cost,
                                  last_status=str(result.status))
            if not outcome.accepted:
                self._last["last_error"] = f"window {window.index}: {outcome.reason}"
        if outcome.accepted:
            self._accept(window, result)
        return outcome

    def _unusable(self, recording: Recording) -> str | None:
        """Why a window cannot be estimated at all (checked before spending the worker)."""
        window_s = self.settings.window_s
        if len(recording.time_s) < 3 or recording.time_s[0] > 0 or recording.time_s[-1] < \
                window_s:
            return "joint states do not cover the window"
        if self.config.rig_spec.inputs:
            if len(recording.input_time_s) == 0:
                return (f"no voltage received on {self.config.recording.voltage_topic} "
                        "(a silent or mistyped voltage topic?)")
            if recording.input_time_s[0] > 0:
                return "voltage unknown at the window's start (its first message came later)"
        motion = np.ptp(recording.joint_angles, axis=0)
        if float(np.max(motion)) < self.settings.min_motion_rad:
            return (f"rig at rest (joints moved at most {float(np.max(motion)):.3g} rad < "
                    f"node.min_motion_rad {self.settings.min_motion_rad:g}): skipped")
        return joint_jump(recording, self.settings.max_joint_speed_rad_s,
                          tuple(self.config.rig_spec.joints))

    def _accept(self, window: Window, result: EstimationResult) -> None:
        """Fuse, persist and publish an accepted window.

        A ``~/reset`` while it was estimated makes it stale (the estimate it would join was
        forgotten: counted, dropped). A time jump does not: its samples were one stretch of the
        rig, so its parameters are fused and published; only its shadow states, stamped on the
        time base the stamps have left, are neither published nor used to re-anchor the filter.
        """
        estimate = result_estimate(result)
        with self._lock:
            if window.resets != self.counters["resets"]:  # reset while estimating
                self.counters["windows_stale"] += 1
                return
            same_time_base = window.generation == self._generation
            self._last_accepted = estimate
            self._fused = self._within_bounds(
                fuse(self._fused, estimate, forgetting=self.settings.forgetting))
            fused = self._fused
        if self._state_file is not None:
            try:
                save_estimate(self._state_file, fused)
            except OSError as error:
                with self._lock:
                    self._last["last_error"] = f"could not persist the estimate: {error}"
        stamp_ns = window.start_ns + int(round(self.settings.window_s * NS_PER_S))
        self._emit("parameters", estimate, stamp_ns)
        self._emit("fused_parameters", fused, stamp_ns)
        if not same_time_base:
            return
        states = result.recordings[0]
        at = nearest_points(states.time_s, window.recording.time_s)
        stamps = window.start_ns + np.round(states.time_s[at] * NS_PER_S).astype(np.int64)
        angles, rates = self._to_recorded(states.joint_angles[at], states.joint_rates[at])
        if np.all(np.isfinite(angles)) and np.all(np.isfinite(rates)):
            self._emit("shadow_joint_states", stamps, self.joint_names, angles, rates)
            self._reanchor(window.generation, stamps[-1], states.joint_angles[-1],
                           states.joint_rates[-1])

    def _within_bounds(self, estimate: ParameterEstimate) -> ParameterEstimate:
        """The estimate with scalar values clipped to the config's box.

        Each window respects the box, but with correlated windows the information-weighted
        mean of values at a bound (a friction at 0) can leave it.
        """
        values = dict(estimate.values)
        for name, bounds in self.config.free.items():
            if name in values and values[name].size == 1:
                values[name] = np.clip(values[name], bounds.lower, bounds.upper)
        return dataclasses.replace(estimate, values=values)

    def _reanchor(self, generation: int, stamp_ns: int, angles: np.ndarray,
                  rates: np.ndarray) -> None:
        std = self._filter.filters[0].settings.angle_noise_rad
        with self._lock:
            if generation != self._generation or self._epoch_ns is None:
                return  # the time base was reset since the window
            self._filter.reanchor((stamp_ns - self._epoch_ns) / NS_PER_S, angles, rates,
                                  [std] * len(angles), [10 * std / window_step(self.config)]
                                  * len(angles))
            self.counters["filter_reanchored"] += 1


#: A step between two samples this much beyond the speed limit [rad] is a jump: above encoder
#: counts (4096 per turn: 1.5e-3 rad) and angle noise at any sample rate.
JUMP_FLOOR_RAD = 0.02


def joint_jump(recording: Recording, max_speed_rad_s: float,
               joints: tuple[str, ...]) -> str | None:
    """Why a window holds a jump no rig makes, or None.

    A jump: two consecutive samples of a joint further apart than ``max_speed_rad_s`` times
    their stamps' distance plus :data:`JUMP_FLOOR_RAD` (a driver restart, an encoder glitch).
    Fused, it would bend every estimate of the window; the window is rejected instead.
    """
    steps = np.abs(np.diff(recording.joint_angles, axis=0))
    allowed = max_speed_rad_s * np.diff(recording.time_s)[:, None] + JUMP_FLOOR_RAD
    excess = steps - allowed
    if not np.any(excess > 0.0):
        return None
    k, j = np.unravel_index(int(np.argmax(excess)), excess.shape)
    return (f"a jump no rig makes: {joints[j]} moved {steps[k, j]:.3g} rad in "
            f"{1e3 * (recording.time_s[k + 1] - recording.time_s[k]):.3g} ms, "
            f"{recording.time_s[k]:.3f} s into the window (over "
            f"node.max_joint_speed_rad_s {max_speed_rad_s:g}): a driver restart or an encoder "
            "glitch? rejected")


def nearest_points(grid_s: np.ndarray, sample_s: np.ndarray) -> np.ndarray:
    """Indices of the points of ``grid_s`` nearest to the samples at ``sample_s`` [s], each once.

    The shadow states are published there: at the rig's own rate, however fine the
    estimation grid (a 1 ms grid under a 100 Hz rig would otherwise publish ten per sample).
    """
    grid_s = np.asarray(grid_s, dtype=np.float64)
    right = np.clip(np.searchsorted(grid_s, sample_s), 1, len(grid_s) - 1)
    left_nearer = np.asarray(sample_s) - grid_s[right - 1] <= grid_s[right] - np.asarray(sample_s)
    return np.unique(right - left_nearer)
