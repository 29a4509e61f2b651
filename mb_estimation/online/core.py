"""The online estimator node's core, shared by the rclpy node and the tests: one owner.

The rclpy node (:mod:`mb_estimation.ros.ros_node`) feeds it joint states and voltages from its
subscription callbacks and gives it a :class:`NodeOutputs` to publish through.
:class:`EstimatorCore` owns the node's state and lends parts of it to two collaborators:

* the sample intake (:class:`~mb_estimation.online.intake.SampleIntake`): bounded ring buffers,
  the stamps' time base, the real-time filter (:mod:`.kalman`) on every sample, and windows cut
  on the header stamps (length and stride from the config's ``node`` section). Stamps jumping
  backwards (a looped bag, a restarted driver) reset buffers and filters; a lone stamp far off,
  late, repeated, non-finite or out-of-range samples and unknown joint names are dropped and
  counted, each under its own name (:data:`.intake.REJECTED_SAMPLES`);
* the window worker (:class:`~mb_estimation.online.worker.WindowWorker`): one background thread
  that estimates the windows in turn while the callbacks keep running — a callback never waits
  on the estimator; when the worker falls behind, the oldest pending window is dropped and
  counted.

The core itself estimates each window (:func:`.windows.estimate_window`: the config's
estimator, on the consistent path one level at a fixed step; warm-started from the last
accepted estimate), accepts it when the rig moved, the solver converged, every value is finite
and the cost is sane, fuses the accepted ones tracking each parameter's drift
(:func:`.drift.track`: a value and a rate per parameter), persists that state atomically
(reloaded on start) and re-anchors the filter on the window's states. Its counters and latest
values are one :class:`~.diagnostics.NodeDiagnostics`; one lock guards all of it, held briefly.
Nothing non-finite is ever handed to the outputs.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mb_estimation.config import Config, ConfigError, apply_overrides
from mb_estimation.errors import first_line
from mb_estimation.estimation import EstimationResult
from mb_estimation.io.parameter_files import plain_value
from mb_estimation.online.diagnostics import NodeDiagnostics
from mb_estimation.online.drift import (
    DriftingEstimate,
    drift_values,
    load_drifting,
    save_drifting,
)
from mb_estimation.online.fusion import ParameterEstimate
from mb_estimation.online.intake import SampleIntake
from mb_estimation.online.jerk_model import JerkFilterSettings
from mb_estimation.online.messages import DROPPED
from mb_estimation.online.windows import (
    Window,
    WindowOutcome,
    check_drift_names,
    disagreeing,
    estimate_window,
    judged,
    nearest_points,
    new_data_s,
    result_estimate,
    window_step,
    with_window,
)
from mb_estimation.online.worker import WindowWorker
from mb_estimation.setup import warm_up_recording
from mb_estimation.signals import Recording
from mb_estimation.stamps import NS_PER_S

__all__ = ["STOP_WAIT_S", "EstimatorCore", "NodeOutputs", "estimate_window", "leave_now",
           "with_node"]


def _ignore(*_args) -> None:
    return None


@dataclass(frozen=True)
class NodeOutputs:
    """What the core publishes, as callables a transport provides (unset: not published).

    * ``parameters(estimate, stamp_ns)`` / ``fused_parameters(estimate, stamp_ns)``: a window's
      accepted :class:`.fusion.ParameterEstimate` and the fused one;
    * ``parameter_rates(drifting, stamp_ns)``: the fused values' rates, a
      :class:`.drift.DriftingEstimate`;
    * ``shadow_joint_states(stamps_ns [n], names, angles [n, j], rates [n, j])``: the window's
      estimated states in the recording's joint convention (names, offset, sign);
    * ``filtered_joint_states(stamp_ns, names, angles [j], rates [j])``: the real-time filter;
    * ``diagnostics(snapshot)``: :meth:`EstimatorCore.diagnostics` after each window;
    * ``window(outcome)``: each finished window's :class:`.windows.WindowOutcome`.
    """

    parameters: Callable = _ignore
    fused_parameters: Callable = _ignore
    parameter_rates: Callable = _ignore
    shadow_joint_states: Callable = _ignore
    filtered_joint_states: Callable = _ignore
    diagnostics: Callable = _ignore
    window: Callable = _ignore


class EstimatorCore:
    """The node's state and what it does with it: samples in, windows estimated, fused, out.

    ``estimator(config, recording) -> EstimationResult`` is :func:`estimate_window` unless
    given (tests slow it down or make it fail). ``clock`` measures time per window and
    callback latency [s].
    """

    def __init__(self, config: Config, outputs: NodeOutputs = NodeOutputs(), *,
                 estimator: Callable[[Config, Recording], EstimationResult] = estimate_window,
                 filter_settings: JerkFilterSettings | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        settings = config.node
        step = window_step(config)
        if settings.window_s < 3 * step:
            raise ConfigError(f"node.window_s {settings.window_s} s is shorter than three "
                              f"estimation steps of {step} s")
        self.config = config
        self.settings = settings
        self.outputs = outputs
        self._estimator = estimator
        self._clock = clock
        self._lock = threading.Lock()  # everything below: held briefly, never while estimating
        self._diagnostics = NodeDiagnostics()
        self.worker = WindowWorker(self._lock, settings.pending_windows, self._diagnostics,
                                   self._run_window,
                                   self._warm_up_and_report if settings.warm_up else None)
        self.intake = SampleIntake(config, self._diagnostics, self.worker.put, filter_settings)
        check_drift_names(config)
        self._drifting: DriftingEstimate | None = None
        self._last_accepted: ParameterEstimate | None = None
        self._fused_end: tuple[int, int] | None = None  # (time base, stamp [ns]) fused up to
        self._stopped = False  # stop() called: the window being estimated is not published
        self._state_file = Path(settings.state_file) if settings.state_file else None
        if self._state_file is not None:
            self._drifting = self._load_state(self._state_file)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The rig's joints as the recordings name them."""
        return self.intake.joint_names

    # --- the callbacks' path: samples in ------------------------------------------------------

    def on_joint_state(self, stamp_ns: int, names: Sequence[str], positions: Sequence[float],
                       source_ns: int | None = None,
                       efforts: Sequence[float] | None = None) -> None:
        """One sensor_msgs/JointState (:meth:`.intake.SampleIntake.joint_state`).

        Its filtered states are published; the windows it completes are queued for the worker.
        """
        started = self._clock()
        with self._lock:
            filtered = self.intake.joint_state(stamp_ns, names, positions, source_ns, efforts)
        for stamp, (angles, rates) in filtered:
            if np.all(np.isfinite(angles)) and np.all(np.isfinite(rates)):
                self._emit("filtered_joint_states", stamp, self.joint_names,
                           *self.intake.to_recorded(angles, rates))
        latency = self._clock() - started
        with self._lock:
            latest = self._diagnostics.latest
            latest["max_callback_s"] = max(latest.get("max_callback_s", 0.0), latency)

    def on_voltage(self, stamp_ns: int, value: float) -> None:
        """One motor voltage [V] with its own stamp (``SampleIntake.voltage_sample``)."""
        with self._lock:
            self.intake.voltage_sample(stamp_ns, value)

    def on_voltage_message(self, data, source_ns: int | None = None) -> None:
        """A voltage message without a header (:meth:`.intake.SampleIntake.voltage_message`)."""
        with self._lock:
            self.intake.voltage_message(data, source_ns)

    def on_message_error(self, what: str) -> None:
        """A transport could not use a message (wrong type, undecodable): count and report."""
        with self._lock:
            self._diagnostics.message_error(what)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker; it first compiles the solver (``node.warm_up``), then estimates.

        Returns at once: the callbacks buffer samples and the real-time filter runs while the
        solver compiles, so no data are lost to the start-up; a window cut meanwhile waits for
        the compiled solver (diagnostics: ``warming_up``, then ``warm_up_s``).
        """
        if self.settings.warm_up and not self.worker.running:  # (a running one: start raises)
            with self._lock:
                self._diagnostics.latest["warming_up"] = True
        self._stopped = False
        self.worker.start()
        if self._drifting is not None:
            self._emit("fused_parameters", self._drifting.estimate, 0)
            self._emit("parameter_rates", self._drifting, 0)

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the worker after the window (or warm-up) it is on; pending windows are dropped.

        The window it is on is neither fused nor published (``windows_stale``): a stopped
        node publishes nothing, and one configured anew must not receive the old one's window.
        """
        self._stopped = True
        self.worker.stop(timeout)

    @property
    def busy(self) -> bool:
        """Whether the worker is compiling or estimating a window (or did not stop in time)."""
        return self.worker.busy

    def warm_up(self) -> float:
        """Run the estimator once on a synthetic window so the first real one is not late.

        Compiles the solver for the window's shape; returns the time it took [s] (also in the
        diagnostics as ``warm_up_s``). :meth:`start` runs it on the worker thread.
        """
        started = self._clock()
        recording = warm_up_recording(self.config, self.settings.window_s,
                                      min(self.settings.max_rate_hz, 1000.0))
        config = self._warm_config()  # one iteration compiles every program a window runs
        config = dataclasses.replace(config, method=dataclasses.replace(config.method,
                                                                        max_iterations=1))
        error = None
        try:
            self._estimator(config, recording)
        except Exception as failure:  # the synthetic data may not fit; compiling is the point
            error = first_line(failure)
        elapsed = self._clock() - started
        with self._lock:
            latest = self._diagnostics.latest
            latest.pop("warming_up", None)
            latest["warm_up_s"] = elapsed
            if error is not None:
                latest["warm_up_error"] = error
        return elapsed

    def reset(self, reason: str = "reset requested") -> None:
        """Forget buffered samples, pending windows, the filter and the fused estimate."""
        with self._lock:
            self.intake.clear()
            self.worker.pending.clear()
            self._drifting = None
            self._last_accepted = None
            self._fused_end = None
            self._diagnostics.count("resets")
            self._diagnostics.latest["last_reset"] = reason

    def calibrate_now(self) -> tuple[bool, str]:
        """Queue a window of the newest buffered ``window_s`` of data at once."""
        with self._lock:
            window = self.intake.newest_window()  # queued as it is cut
        if isinstance(window, str):
            return False, window
        return True, f"window from {window.start_ns / NS_PER_S:.3f} s queued"

    # --- the worker's path: a window estimated, judged, fused, published ---------------------

    def _warm_up_and_report(self) -> None:
        self.warm_up()
        self._emit("diagnostics", self.diagnostics())

    def _run_window(self, window: Window) -> None:
        """The worker's handling of one window: :meth:`process`, whatever it raises."""
        try:
            outcome = self.process(window)
            with self._lock:
                self._diagnostics.latest["last_outcome"] = outcome
            self._emit("window", outcome)
        except Exception as error:  # the worker must outlive any one window
            self.on_message_error(f"window {window.index}: {first_line(error)}")
        self._emit("diagnostics", self.diagnostics())

    def process(self, window: Window) -> WindowOutcome:
        """Estimate on one window, judge it, fuse and publish when accepted (worker thread)."""
        started = self._clock()
        result, reason = judged(self.config, window.recording, self._estimator,
                                self._warm_config())
        if reason is None:
            stale = self._accept(window, result)
            reason = None if stale is None else f"{DROPPED}{stale}"
        outcome = WindowOutcome(window.index, window.start_ns, reason is None,
                                reason or "accepted", self._clock() - started, result)
        with self._lock:  # counted once published: windows_done says the window is through
            diagnostics = self._diagnostics
            diagnostics.count("windows_done")
            diagnostics.count("windows_accepted" if outcome.accepted else "windows_stale"
                              if outcome.reason.startswith(DROPPED) else "windows_rejected")
            diagnostics.latest["last_window_s"] = outcome.elapsed_s
            if result is not None:
                diagnostics.latest.update(last_iterations=result.iterations,
                                          last_cost=result.cost,
                                          last_status=str(result.status))
            if not outcome.accepted:
                diagnostics.latest["last_error"] = f"window {window.index}: {outcome.reason}"
        return outcome

    def _stale(self, window: Window, end_ns: int) -> str | None:
        """Why an accepted window is dropped (``windows_stale``), or None; the lock held.

        A ``~/reset`` while it was estimated (the estimate it would join was forgotten), a stop
        (nothing is published after it), or every sample of it already fused
        (``~/calibrate_now`` again on the same data).
        """
        if window.resets != self._diagnostics.counters["resets"]:
            return "the node was reset while it was estimated"
        if self._stopped:
            return "the node stopped while it was estimated"
        fused_end = self._fused_end
        if fused_end is not None and fused_end[0] == window.generation and end_ns <= fused_end[1]:
            return "every sample of it is already in the fused estimate"
        return None

    def _accept(self, window: Window, result: EstimationResult) -> str | None:
        """Fuse, persist and publish an accepted window; or say why it is :meth:`_stale`.

        Its samples after the last window fused count whole, the others not again
        (:func:`~.windows.counted_once`). A time jump while it was estimated does not make it
        stale: its samples were one stretch of the rig, so its parameters are fused and
        published; only its shadow states, stamped on the time base the stamps have left, are
        neither published nor used to re-anchor the filter.
        """
        estimate = result_estimate(result)
        stamp_ns = window.start_ns + int(round(self.settings.window_s * NS_PER_S))
        with self._lock:
            stale = self._stale(window, stamp_ns)
            if stale is not None:
                return stale
            same_time_base = window.generation == self.intake.generation
            fused_end = self._fused_end
            since_fused_s = (None if fused_end is None or fused_end[0] != window.generation
                             else (stamp_ns - fused_end[1]) / NS_PER_S)
            self._fused_end = (window.generation, stamp_ns)
            self._last_accepted = estimate
            if result.std_include_model_error:
                self._diagnostics.count("windows_model_error")
            disagrees = disagreeing(self.config, self._drifting, estimate, stamp_ns / NS_PER_S)
            if disagrees is None:
                self._diagnostics.latest.pop("disagreement", None)
            else:
                self._diagnostics.count("windows_disagreeing")
                self._diagnostics.latest["disagreement"] = f"window {window.index}: {disagrees}"
            drifting = with_window(self.config, self._drifting, estimate, stamp_ns / NS_PER_S,
                                   new_data_s(self.config, since_fused_s))
            self._drifting = drifting
        if self._state_file is not None:
            try:
                save_drifting(self._state_file, drifting)
            except OSError as error:
                with self._lock:
                    self._diagnostics.latest["last_error"] = (
                        f"could not persist the estimate: {error}")
        self._emit("parameters", estimate, stamp_ns)
        self._emit("fused_parameters", drifting.estimate, stamp_ns)
        self._emit("parameter_rates", drifting, stamp_ns)
        if not same_time_base:
            return None
        states = result.recordings[0]
        at = nearest_points(states.time_s, window.recording.time_s)
        stamps = window.start_ns + np.round(states.time_s[at] * NS_PER_S).astype(np.int64)
        angles, rates = self.intake.to_recorded(states.joint_angles[at], states.joint_rates[at])
        if np.all(np.isfinite(angles)) and np.all(np.isfinite(rates)):
            self._emit("shadow_joint_states", stamps, self.joint_names, angles, rates)
            with self._lock:
                self.intake.reanchor(window.generation, stamps[-1], states.joint_angles[-1],
                                     states.joint_rates[-1])
        return None

    def _emit(self, output: str, *args) -> None:
        """Call one of the outputs; a transport error is counted, never stops the node.

        Nothing after :meth:`stop` (the transport's publishers may belong to a newer node).
        """
        if self._stopped:
            return
        try:
            getattr(self.outputs, output)(*args)
        except Exception as error:
            with self._lock:
                self._diagnostics.count("output_errors")
                self._diagnostics.latest["last_error"] = (
                    f"publishing {output}: {first_line(error)}")

    def _warm_config(self) -> Config:
        """The config started from the last accepted (else the fused) estimate's values."""
        with self._lock:
            source = self._last_accepted or self.fused
        if source is None:
            return self.config
        return apply_overrides(self.config, set_values={
            name: plain_value(value) for name, value in source.values.items()
            if name in self.config.free})

    def _load_state(self, path: Path) -> DriftingEstimate | None:
        try:
            drifting = load_drifting(path)
        except ValueError as error:
            self._diagnostics.latest["last_error"] = f"ignored the persisted estimate: {error}"
            return None
        if drifting is None:
            return None
        estimate = drifting.estimate
        if tuple(estimate.names) != tuple(self.config.free):
            self._diagnostics.latest["last_error"] = (
                f"ignored the persisted estimate in {path}: it holds "
                f"{', '.join(estimate.names)}, the config frees {', '.join(self.config.free)}")
            return None
        return drifting

    # --- what the node reports ---------------------------------------------------------------

    @property
    def latest_stamp_ns(self) -> int | None:
        """Header stamp of the newest buffered joint state [ns] (None when empty)."""
        return self.intake.latest_stamp_ns

    @property
    def fused(self) -> ParameterEstimate | None:
        """The fused estimate (None before the first accepted window)."""
        drifting = self._drifting
        return None if drifting is None else drifting.estimate

    @property
    def drifting(self) -> DriftingEstimate | None:
        """The fused values with their rates (None before the first accepted window)."""
        return self._drifting

    def diagnostics(self) -> dict:
        """A snapshot: counters, the last window's numbers, buffer use, the last error."""
        with self._lock:
            snapshot = {key: int(value) for key, value in self._diagnostics.counters.items()}
            for key in ("windows_done", "windows_accepted", "windows_rejected",
                        "windows_dropped"):
                snapshot.setdefault(key, 0)
            last = dict(self._diagnostics.latest)
            outcome = last.pop("last_outcome", None)
            snapshot.update(last)
            if outcome is not None:
                snapshot["last_window"] = f"{outcome.index}: {outcome.reason}"
            intake = self.intake
            snapshot["pending_windows"] = len(self.worker.pending)
            snapshot["buffered_samples"] = len(intake.joints)
            snapshot["buffer_bytes"] = intake.joints.nbytes + intake.voltage.nbytes
            filters = intake.filter.counters()
            snapshot["filter_gated"] = sum(c.gated for c in filters.values())
            snapshot["filter_reinitialised"] = sum(c.reinitialised for c in filters.values())
            drifting = self._drifting
            snapshot["fused_windows"] = 0 if drifting is None else drifting.estimate.windows
            if drifting is not None:
                snapshot.update(drift_values(drifting, self.settings.drift_alarm_s))
        return snapshot


#: How long a stopping node waits for its worker [s] before leaving without it (:func:`leave_now`).
STOP_WAIT_S = 2.0


def leave_now(status: int) -> None:
    """End the process at once with ``status``, without waiting for the estimator's worker.

    For a node's entry point whose worker is still busy after :data:`STOP_WAIT_S`
    (:attr:`EstimatorCore.busy`): the interpreter would wait for the worker (not a daemon,
    since leaving XLA compiling at interpreter exit crashes the process) for up to a window's
    time limit or a whole compile. The persisted estimate is only ever replaced whole.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def with_node(config: Config, **changes) -> Config:
    """``config`` with node settings changed (tests, benchmarks)."""
    return dataclasses.replace(config, node=dataclasses.replace(config.node, **changes))
