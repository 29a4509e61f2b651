"""The online estimator node's core, shared by every transport.

Transports (:mod:`mb_estimation.ros`) feed it joint states and voltages from their
subscription callbacks and give it an :class:`NodeOutputs` to publish through. The core

* keeps the samples in bounded ring buffers and cuts windows on the header stamps (length and
  stride from the config's ``node`` section);
* hands each window to one background worker that estimates the free parameters and the states
  (:func:`.windows.estimate_window`: the config's estimator, on the consistent path one level
  at a fixed step; warm-started from the last accepted estimate) while
  the callbacks keep running: a callback never waits on the estimator; when the worker falls
  behind, the oldest pending window is dropped and counted;
* accepts a window when the rig moved, the solver converged, every value is finite and the cost
  is sane; accepted windows update the fused estimate (:func:`.fusion.fuse`, with forgetting),
  which is persisted atomically and reloaded on start;
* runs the per-joint Kalman filter (:mod:`.kalman`) on every sample for real-time shadow states,
  re-anchored to the estimator's states at the end of each accepted window;
* resets buffers and filters when the stamps jump backwards (a looped bag, a restarted driver);
  a lone stamp far off, late, repeated, non-finite or out-of-range samples and unknown joint
  names are dropped and counted, each under its own name (:data:`.intake.REJECTED_SAMPLES`).

Nothing non-finite is ever handed to the outputs.

The rooms: this module holds :class:`EstimatorCore` (its state, lifecycle and diagnostics) and
:class:`NodeOutputs`; the callback path is :mod:`.intake`, the worker :mod:`.worker`, a window
and its judgement :mod:`.windows` (its default estimator, :func:`estimate_window`, is imported
here too: the nodes pass it on).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mb_estimation.config import Config, ConfigError, apply_overrides
from mb_estimation.errors import first_line
from mb_estimation.estimation import EstimationResult
from mb_estimation.io.parameter_files import plain_value
from mb_estimation.online.buffers import PublicationOrder, SampleRing
from mb_estimation.online.fusion import ParameterEstimate, load_estimate
from mb_estimation.online.intake import FAR_VOLTAGES, SampleIntake
from mb_estimation.online.jerk_model import JerkFilterSettings
from mb_estimation.online.kalman import JointStateFilter
from mb_estimation.online.windows import Window, estimate_window, window_step
from mb_estimation.online.worker import WindowWorker
from mb_estimation.setup import warm_up_recording
from mb_estimation.signals import Recording, recorded_joint_states
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
    * ``shadow_joint_states(stamps_ns [n], names, angles [n, j], rates [n, j])``: the window's
      estimated states in the recording's joint convention (names, offset, sign);
    * ``filtered_joint_states(stamp_ns, names, angles [j], rates [j])``: the real-time filter;
    * ``diagnostics(snapshot)``: :meth:`EstimatorCore.diagnostics` after each window;
    * ``window(outcome)``: each finished window's :class:`.windows.WindowOutcome`.
    """

    parameters: Callable = _ignore
    fused_parameters: Callable = _ignore
    shadow_joint_states: Callable = _ignore
    filtered_joint_states: Callable = _ignore
    diagnostics: Callable = _ignore
    window: Callable = _ignore


class EstimatorCore(SampleIntake, WindowWorker):
    """Buffers, windows, the estimation worker, fusion and the real-time filter of the node.

    ``estimator(config, recording) -> EstimationResult`` is :func:`estimate_window` unless
    given (tests slow it down or make it fail). ``clock`` measures time per window and
    callback latency [s]. The callback path is :class:`~mb_estimation.online.intake.SampleIntake`'s,
    the worker :class:`~mb_estimation.online.worker.WindowWorker`'s; the state of both is made here.
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
        rig_joints = config.rig_spec.joints
        self._mappings = tuple(config.recording.joints[joint] for joint in rig_joints)
        self.joint_names = tuple(mapping.name for mapping in self._mappings)
        capacity = max(int(math.ceil(settings.buffer_s * settings.max_rate_hz)), 16)
        self._joints = SampleRing(capacity, len(rig_joints))
        self._voltage = SampleRing(capacity, 1)
        self._filter = JointStateFilter(self.joint_names, filter_settings)
        self._lock = threading.Lock()  # buffers, window schedule, filter, counters: held briefly
        self._pending: collections.deque[Window] = collections.deque()
        self._wake = threading.Condition(self._lock)
        self._worker: threading.Thread | None = None
        self._stopping = False
        self._working = False  # the worker is on a window or the warm-up
        self._epoch_ns: int | None = None  # stamp of the first sample since the last reset
        self._generation = 0  # counts time bases (resets and time jumps): older stamps are stale
        self._voltage_before_joints: float | None = None  # received before any joint state
        self._unconfirmed: list = []  # joint states stamped far off, until a run confirms them
        self._far_voltages = collections.deque(maxlen=FAR_VOLTAGES)  # stamped far off
        self._publication_order = PublicationOrder(capacity)  # voltages with source stamps
        script = config.recording.voltage_script if config.rig_spec.inputs else None
        # [time since the first joint state, value] held: the input of bags recorded without it
        self._voltage_script = None if script is None else np.asarray(script, dtype=np.float64)
        self._next_start_ns: int | None = None
        self._window_index = 0
        self._fused: ParameterEstimate | None = None
        self._last_accepted: ParameterEstimate | None = None
        self.counters = collections.Counter()
        self._last: dict = {}
        self._state_file = Path(settings.state_file) if settings.state_file else None
        if self._state_file is not None:
            self._fused = self._load_state(self._state_file)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker; it first compiles the solver (``node.warm_up``), then estimates.

        Returns at once: the callbacks buffer samples and the real-time filter runs while the
        solver compiles, so no data are lost to the start-up; a window cut meanwhile waits for
        the compiled solver (diagnostics: ``warming_up``, then ``warm_up_s``).
        """
        if self._worker is not None:
            raise RuntimeError("the estimator worker is still running (stop() timed out)")
        self._stopping = False
        if self.settings.warm_up:
            with self._lock:
                self._last["warming_up"] = True
        # Not a daemon: the interpreter waits for it at exit, since leaving XLA compiling (the
        # warm-up, a first window) while the interpreter shuts down crashes the process.
        self._worker = threading.Thread(target=self._work, name="mb_estimation-worker")
        self._worker.start()
        if self._fused is not None:
            self._emit("fused_parameters", self._fused, 0)

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the worker after the window (or warm-up) it is on; pending windows are dropped."""
        with self._wake:
            self._stopping = True
            self._pending.clear()
            self._wake.notify_all()
        if self._worker is not None:
            self._worker.join(timeout)
            if not self._worker.is_alive():
                self._worker = None

    @property
    def busy(self) -> bool:
        """Whether the worker is compiling or estimating a window (or did not stop in time)."""
        worker = self._worker
        return worker is not None and worker.is_alive() and (self._working or self._stopping)

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
            self._last.pop("warming_up", None)
            self._last["warm_up_s"] = elapsed
            if error is not None:
                self._last["warm_up_error"] = error
        return elapsed

    def reset(self, reason: str = "reset requested") -> None:
        """Forget buffered samples, pending windows, the filter and the fused estimate."""
        with self._lock:
            self._clear_time_locked()
            self._voltage.clear()
            self._pending.clear()
            self._fused = None
            self._last_accepted = None
            self.counters["resets"] += 1
            self._last["last_reset"] = reason

    def calibrate_now(self) -> tuple[bool, str]:
        """Queue a window of the newest buffered ``window_s`` of data at once."""
        with self._lock:
            last = self._joints.last_stamp_ns
            if last is None or self._epoch_ns is None:
                return False, "no joint states buffered yet"
            start = last - int(self.settings.window_s * NS_PER_S)
            if start < self._epoch_ns:
                return False, (f"only {(last - self._epoch_ns) / NS_PER_S:.2f} s buffered; a "
                               f"window needs {self.settings.window_s:g} s")
            self._cut_locked(start)
        return True, f"window from {start / NS_PER_S:.3f} s queued"

    def on_message_error(self, what: str) -> None:
        """A transport could not use a message (wrong type, undecodable): count and report."""
        with self._lock:
            self.counters["message_errors"] += 1
            self._last["last_error"] = what

    def _emit(self, output: str, *args) -> None:
        """Call one of the outputs; a transport error is counted, never stops the node."""
        try:
            getattr(self.outputs, output)(*args)
        except Exception as error:
            with self._lock:
                self.counters["output_errors"] += 1
                self._last["last_error"] = f"publishing {output}: {first_line(error)}"

    def _warm_config(self) -> Config:
        """The config started from the last accepted (else the fused) estimate's values."""
        with self._lock:
            source = self._last_accepted or self._fused
        if source is None:
            return self.config
        return apply_overrides(self.config, set_values={
            name: plain_value(value) for name, value in source.values.items()
            if name in self.config.free})

    def _to_recorded(self, angles, rates):
        return recorded_joint_states(self._mappings, angles, rates)

    def _load_state(self, path: Path) -> ParameterEstimate | None:
        try:
            estimate = load_estimate(path)
        except ValueError as error:
            self._last["last_error"] = f"ignored the persisted estimate: {error}"
            return None
        if estimate is not None and tuple(estimate.names) != tuple(self.config.free):
            self._last["last_error"] = (f"ignored the persisted estimate in {path}: it holds "
                                        f"{', '.join(estimate.names)}, the config frees "
                                        f"{', '.join(self.config.free)}")
            return None
        return estimate

    # --- what the node reports ---------------------------------------------------------------

    @property
    def latest_stamp_ns(self) -> int | None:
        """Header stamp of the newest buffered joint state [ns] (None when empty)."""
        return self._joints.last_stamp_ns

    @property
    def fused(self) -> ParameterEstimate | None:
        """The fused estimate (None before the first accepted window)."""
        return self._fused

    def diagnostics(self) -> dict:
        """A snapshot: counters, the last window's numbers, buffer use, the last error."""
        with self._lock:
            snapshot = {key: int(value) for key, value in self.counters.items()}
            for key in ("windows_done", "windows_accepted", "windows_rejected",
                        "windows_dropped"):
                snapshot.setdefault(key, 0)
            last = dict(self._last)
            outcome = last.pop("last_outcome", None)
            snapshot.update(last)
            if outcome is not None:
                snapshot["last_window"] = f"{outcome.index}: {outcome.reason}"
            snapshot["pending_windows"] = len(self._pending)
            snapshot["buffered_samples"] = len(self._joints)
            snapshot["buffer_bytes"] = self._joints.nbytes + self._voltage.nbytes
            filters = self._filter.counters()
            snapshot["filter_gated"] = sum(c.gated for c in filters.values())
            snapshot["filter_reinitialised"] = sum(c.reinitialised for c in filters.values())
            snapshot["fused_windows"] = 0 if self._fused is None else self._fused.windows
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
