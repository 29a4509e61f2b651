"""The online estimator node's core, shared by every transport (DESIGN §7, issue 5).

Transports (:mod:`mb_estimation.transport`) feed it joint states and voltages from their
subscription callbacks and give it an :class:`NodeOutputs` to publish through. The core

* keeps the samples in bounded ring buffers and cuts windows on the header stamps (length and
  stride from the config's ``node`` section);
* hands each window to one background worker that estimates the free parameters and the states
  (:func:`mb_estimation.pipeline.calibrate`, warm-started from the last accepted estimate) while
  the callbacks keep running: a callback never waits on the estimator; when the worker falls
  behind, the oldest pending window is dropped and counted;
* accepts a window when the rig moved, the solver converged, every value is finite and the cost
  is sane; accepted windows update the fused estimate (:func:`.fusion.fuse`, with forgetting),
  which is persisted atomically and reloaded on start;
* runs the per-joint Kalman filter (:mod:`.kalman`) on every sample for real-time shadow states,
  re-anchored to the estimator's states at the end of each accepted window;
* resets buffers and filters when the stamps jump backwards (a looped bag, a restarted driver);
  late, repeated and non-finite samples and unknown joint names are dropped and counted.

Nothing non-finite is ever handed to the outputs.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mb_estimation.config import Config, apply_overrides
from mb_estimation.errors import first_line
from mb_estimation.estimation import EstimationResult, FitStatus
from mb_estimation.message_types import FLOAT64_MULTI_ARRAY
from mb_estimation.online.buffers import PublicationOrder, SampleRing
from mb_estimation.online.fusion import ParameterEstimate, fuse, load_estimate, save_estimate
from mb_estimation.online.kalman import JerkFilterSettings, JointStateFilter
from mb_estimation.signals import Recording, prepare_recording, recorded_joint_states
from mb_estimation.stamps import NS_PER_S

# A stamp this much older than the newest one is a jump back in time (reset), not a late sample.
JUMP_BACK_NS = NS_PER_S
ACCEPTED_STATUSES = (FitStatus.GRADIENT, FitStatus.STEP)


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
    * ``diagnostics(snapshot)``: :meth:`EstimatorCore.diagnostics` after each window.
    """

    parameters: Callable = _ignore
    fused_parameters: Callable = _ignore
    shadow_joint_states: Callable = _ignore
    filtered_joint_states: Callable = _ignore
    diagnostics: Callable = _ignore


@dataclass(frozen=True)
class Window:
    """A window cut from the buffers: its number, start stamp and the samples as a recording."""

    index: int
    start_ns: int
    recording: Recording  # times [s] from start_ns
    generation: int = 0  # the time base it was cut on (a reset or time jump starts a new one)


@dataclass(frozen=True)
class WindowOutcome:
    """What became of one window: accepted or the reason it was not, and the solver's result."""

    index: int
    start_ns: int
    accepted: bool
    reason: str
    elapsed_s: float
    result: EstimationResult | None = field(default=None, repr=False)


def estimate_window(config: Config, recording: Recording) -> EstimationResult:
    """Estimate the config's free parameters and the states on one window (the default worker).

    The grid covers exactly ``[0, window_s]`` of the recording's time (so every window has the
    same number of steps and the compiled solver is reused).
    """
    from mb_estimation import pipeline

    method = config.method
    first = float(recording.time_s[0])
    grid = prepare_recording(recording, method.dt, method.filter_cutoff_hz,
                             start_s=-first, end_s=config.node.window_s - first)
    return pipeline.calibrate(config, [grid])


def result_estimate(result: EstimationResult, windows: int = 1) -> ParameterEstimate:
    """The free parameters of a result as a :class:`ParameterEstimate`."""
    return ParameterEstimate(
        names=tuple(result.free),
        values={name: np.atleast_1d(np.asarray(result.parameters[name], dtype=np.float64))
                for name in result.free},
        covariance=np.asarray(result.covariance, dtype=np.float64), windows=windows)


def judge(result: EstimationResult, max_cost: float) -> str | None:
    """Why a window's result is not accepted, or None when it is."""
    if result.status not in ACCEPTED_STATUSES:
        return f"not converged ({result.status} after {result.iterations} iterations)"
    values = [np.asarray(result.parameters[name], dtype=np.float64) for name in result.free]
    if not all(np.all(np.isfinite(v)) for v in values) or not math.isfinite(result.cost):
        return "non-finite estimate"
    if result.cost > max_cost:
        return f"cost {result.cost:.3g} above node.max_cost {max_cost:.3g}"
    if not any(result.excited.values()):
        return "no free parameter excited by this window"
    return None


class EstimatorCore:
    """Buffers, windows, the estimation worker, fusion and the real-time filter of the node.

    ``estimator(config, recording) -> EstimationResult`` is :func:`estimate_window` unless
    given (tests slow it down or make it fail). ``clock`` measures time per window and
    callback latency [s].
    """

    def __init__(self, config: Config, outputs: NodeOutputs = NodeOutputs(), *,
                 estimator: Callable[[Config, Recording], EstimationResult] = estimate_window,
                 filter_settings: JerkFilterSettings | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        settings = config.node
        if settings.window_s < 3 * config.method.dt:
            raise ValueError(f"node.window_s {settings.window_s} s is shorter than three "
                             f"estimation steps of {config.method.dt} s")
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
        self._epoch_ns: int | None = None  # stamp of the first sample since the last reset
        self._generation = 0  # counts resets and time jumps: older windows are stale
        self._voltage_before_joints: float | None = None  # received before any joint state
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

    def start(self) -> float:
        """Start the worker (after the warm-up compile if configured); returns warm-up [s]."""
        if self._worker is not None:
            raise RuntimeError("the estimator worker is still running (stop() timed out)")
        warm_up_s = self.warm_up() if self.settings.warm_up else 0.0
        self._stopping = False
        self._worker = threading.Thread(target=self._work, name="mb_estimation-worker",
                                        daemon=True)
        self._worker.start()
        if self._fused is not None:
            self._emit("fused_parameters", self._fused, 0)
        return warm_up_s

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the worker after the window it is on; pending windows are discarded."""
        with self._wake:
            self._stopping = True
            self._pending.clear()
            self._wake.notify_all()
        if self._worker is not None:
            self._worker.join(timeout)
            if not self._worker.is_alive():
                self._worker = None

    def warm_up(self) -> float:
        """Run the estimator once on a synthetic window so the first real one is not late.

        Compiles the solver for the window's shape; returns the time it took [s].
        """
        started = self._clock()
        rate_hz = min(self.settings.max_rate_hz, 1000.0)
        time_s = np.arange(0.0, self.settings.window_s + 2.0 / rate_hz, 1.0 / rate_hz)
        angles = np.stack([0.3 * np.sin(2.0 * np.pi * 0.5 * time_s + j)
                           for j in range(len(self._mappings))], axis=1)
        recording = Recording("warm-up", time_s, angles, np.array([0.0]),
                              np.zeros((1, len(self.config.rig_spec.inputs))))
        try:
            self._estimator(self._warm_config(), recording)
        except Exception as error:  # the synthetic data may not fit; compiling is the point
            self._last["warm_up_error"] = first_line(error)
        elapsed = self._clock() - started
        self._last["warm_up_s"] = elapsed
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

    # --- the callback path (never waits on the estimator) ------------------------------------

    def on_joint_state(self, stamp_ns: int, names: Sequence[str], positions: Sequence[float],
                       source_ns: int | None = None) -> None:
        """One sensor_msgs/JointState: header stamp [ns], names and recorded positions [rad].

        ``source_ns``: when its publisher wrote it [ns] (the middleware's source timestamp),
        if the transport knows it: header-less voltages are then paired by publication order
        (:meth:`on_voltage_message`).
        """
        started = self._clock()
        with self._lock:
            self.counters["joint_samples"] += 1
            angles = self._model_angles(names, positions)
            if angles is None:
                self._note_latency(started)
                return
            filtered = None
            if self._accept_stamp_locked(stamp_ns):
                angles = self._unwrapped_locked(angles)
                self._joints.append(stamp_ns, angles)
                if self._voltage_before_joints is not None:  # held from the first joint state
                    self._add_voltage_locked(stamp_ns, self._voltage_before_joints)
                    self._voltage_before_joints = None
                if source_ns:
                    for placed in self._publication_order.joint_state(source_ns, stamp_ns):
                        self._add_voltage_locked(*placed)
                if self._voltage_script is not None:
                    self._add_voltage_locked(stamp_ns, self._scripted_voltage(stamp_ns))
                filtered = self._filter.step((stamp_ns - self._epoch_ns) / NS_PER_S, angles)
                self._schedule_locked(stamp_ns)
        if filtered is not None and all(np.all(np.isfinite(v)) for v in filtered):
            self._emit("filtered_joint_states", stamp_ns, self.joint_names,
                       *self._to_recorded(*filtered))
        self._note_latency(started)

    def _scripted_voltage(self, stamp_ns: int) -> float:
        """``recording.voltage_script`` held at the time since the first joint state.

        The first joint state after a start, a reset or a time jump is the script's time 0 (a
        bag recorded without its input, replayed, perhaps in a loop); before the script's
        first time its first value holds.
        """
        script = self._voltage_script
        elapsed_s = (stamp_ns - self._epoch_ns) / NS_PER_S
        index = max(int(np.searchsorted(script[:, 0], elapsed_s, side="right")) - 1, 0)
        return float(script[index, 1])

    def on_voltage(self, stamp_ns: int, value: float) -> None:
        """One motor voltage [V] at ``stamp_ns`` (held until the next)."""
        with self._lock:
            self._add_voltage_locked(stamp_ns, value)

    def _add_voltage_locked(self, stamp_ns: int, value: float) -> None:
        self.counters["voltage_samples"] += 1
        if not math.isfinite(value):
            self.counters["voltage_non_finite"] += 1
            self._last["last_error"] = "non-finite voltage dropped"
            return
        last = self._voltage.last_stamp_ns
        if last is not None and stamp_ns < last:
            if last - stamp_ns > JUMP_BACK_NS:
                self._voltage.clear()  # the joint states reset the rest on their jump
            else:
                self.counters["voltage_late"] += 1
                return
        self._voltage.append(stamp_ns, (value,))

    def on_voltage_message(self, data, source_ns: int | None = None) -> None:
        """The ``data`` of a voltage message without a header.

        A std_msgs/Float64's number, or a Float64MultiArray's sequence holding the voltage at
        ``recording.voltage_index``. It takes effect at the stamp of the joint state published
        last before it: the rig's clock as the rig saw it, whatever clock the transport stamps
        messages with (a replayed bag, sim time). With the source timestamps [ns] of both
        (``source_ns``) that is exact, the voltage held until a later joint state arrives
        (:class:`~mb_estimation.online.buffers.PublicationOrder`); without them, the newest
        joint state received stands in (one sample off when the transport delivers the voltage
        after the next joint state). Before any joint state (at start, after a reset) it is held
        and takes effect at the first joint state's stamp.
        """
        recording = self.config.recording
        if recording.voltage_type == FLOAT64_MULTI_ARRAY:
            index = recording.voltage_index
            if index >= len(data):
                self.on_message_error(f"{recording.voltage_topic}: data has {len(data)} "
                                      f"entries, voltage_index {index}")
                return
            data = data[index]
        with self._lock:
            if source_ns:
                placed = self._publication_order.voltage(source_ns, float(data))
                if placed is not None:
                    self._add_voltage_locked(*placed)
            elif self._joints.last_stamp_ns is None:
                self._voltage_before_joints = float(data)
            else:
                self._add_voltage_locked(self._joints.last_stamp_ns, float(data))

    def on_joint_effort(self, stamp_ns: int, names: Sequence[str], efforts: Sequence[float]
                        ) -> None:
        """The voltage as a joint state's effort (``recording.voltage_type`` JointState)."""
        joint = self.config.recording.voltage_joint or self.joint_names[0]
        names = list(names)
        if joint in names and len(efforts) == len(names):
            self.on_voltage(stamp_ns, float(efforts[names.index(joint)]))
        else:
            self.on_message_error(f"joint state without an effort for {joint}")

    def on_message_error(self, what: str) -> None:
        """A transport could not use a message (wrong type, undecodable): count and report."""
        with self._lock:
            self.counters["message_errors"] += 1
            self._last["last_error"] = what

    def _note_latency(self, started: float) -> None:
        latency = self._clock() - started
        self._last["max_callback_s"] = max(self._last.get("max_callback_s", 0.0), latency)

    def _model_angles(self, names, positions) -> np.ndarray | None:
        index = {name: i for i, name in enumerate(names)}
        missing = [m.name for m in self._mappings if m.name not in index]
        if missing or len(positions) < len(names):
            self.counters["samples_unknown_joints"] += 1
            self._last["last_error"] = (
                f"joint state without {', '.join(missing) or 'positions for every name'} "
                f"(it has {', '.join(map(str, names)) or 'no names'}): map the joints in the "
                "config's recording.joints")
            return None
        angles = np.array([m.to_model(float(positions[index[m.name]])) for m in self._mappings])
        if not np.all(np.isfinite(angles)):
            self.counters["samples_non_finite"] += 1
            self._last["last_error"] = "non-finite joint position dropped"
            return None
        return angles

    def _accept_stamp_locked(self, stamp_ns: int) -> bool:
        last = self._joints.last_stamp_ns
        if last is not None and stamp_ns <= last:
            if last - stamp_ns > JUMP_BACK_NS:
                self._clear_time_locked()
                self._voltage.drop_after(stamp_ns)  # what is left is on the new time base
                self.counters["time_jumps"] += 1
                self._last["last_reset"] = (f"stamps jumped back "
                                            f"{(last - stamp_ns) / NS_PER_S:.3g} s: "
                                            "buffers and filters reset")
            else:
                self.counters["samples_late" if stamp_ns < last else "samples_repeated"] += 1
                return False
        if self._epoch_ns is None:
            self._epoch_ns = stamp_ns
            self._next_start_ns = stamp_ns
        return True

    def _unwrapped_locked(self, angles: np.ndarray) -> np.ndarray:
        """Angles continued across ±π from the previous sample (multi-turn, as the filter needs).

        A driver that wraps its angles (a pendulum balancing at π crosses it all the time)
        would otherwise look like a 2π jump to the filter.
        """
        previous = self._joints.last_values
        if previous is None:
            return angles
        return angles + 2.0 * np.pi * np.round((previous - angles) / (2.0 * np.pi))

    def _clear_time_locked(self) -> None:
        self._generation += 1
        self._joints.clear()
        self._publication_order.forget_joint_states()
        self._filter.reset()
        self._epoch_ns = None
        self._next_start_ns = None

    def _schedule_locked(self, stamp_ns: int) -> None:
        window_ns = int(round(self.settings.window_s * NS_PER_S))
        stride_ns = int(round(self.settings.stride_s * NS_PER_S))
        if stamp_ns < self._next_start_ns + window_ns:
            return
        self._cut_locked(self._next_start_ns)
        self._next_start_ns += stride_ns
        if stamp_ns >= self._next_start_ns + window_ns:  # a jump forward: restart the schedule
            self._next_start_ns = stamp_ns
            self.counters["time_gaps"] += 1

    def _cut_locked(self, start_ns: int) -> None:
        end_ns = start_ns + int(round(self.settings.window_s * NS_PER_S))
        stamps, angles = self._joints.between(start_ns, end_ns)
        voltage_stamps, voltages = self._voltage.between(start_ns, end_ns)
        self._window_index += 1
        inputs = len(self.config.rig_spec.inputs)
        if inputs and len(voltage_stamps):
            input_time_s, values = (voltage_stamps - start_ns) / NS_PER_S, voltages
        else:
            input_time_s, values = np.zeros(0), np.zeros((0, inputs))
        recording = Recording(f"window {self._window_index}", (stamps - start_ns) / NS_PER_S,
                              angles, input_time_s, values)
        if len(self._pending) >= self.settings.pending_windows:
            self._pending.popleft()
            self.counters["windows_dropped"] += 1
        self._pending.append(Window(self._window_index, start_ns, recording, self._generation))
        self._wake.notify()

    # --- the worker ----------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
                window = self._pending.popleft()
            try:
                outcome = self.process(window)
                with self._lock:
                    self._last["last_outcome"] = outcome
            except Exception as error:  # the worker must outlive any one window
                self.on_message_error(f"window {window.index}: {first_line(error)}")
            self._emit("diagnostics", self.diagnostics())

    def _emit(self, output: str, *args) -> None:
        """Call one of the outputs; a transport error is counted, never stops the node."""
        try:
            getattr(self.outputs, output)(*args)
        except Exception as error:
            with self._lock:
                self.counters["output_errors"] += 1
                self._last["last_error"] = f"publishing {output}: {first_line(error)}"

    def _warm_config(self) -> Config:
        with self._lock:
            source = self._last_accepted or self._fused
        if source is None:
            return self.config
        return apply_overrides(self.config, set_values={
            name: (value.tolist() if value.size > 1 else float(value[0]))
            for name, value in source.values.items() if name in self.config.free})

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
        return None

    def _accept(self, window: Window, result: EstimationResult) -> None:
        estimate = result_estimate(result)
        with self._lock:
            if window.generation != self._generation:  # reset or time jump while estimating
                self.counters["windows_stale"] += 1
                return
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
        states = result.recordings[0]
        stamps = window.start_ns + np.round(states.time_s * NS_PER_S).astype(np.int64)
        angles, rates = self._to_recorded(states.joint_angles, states.joint_rates)
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
                                  [std] * len(angles), [10 * std / self.config.method.dt]
                                  * len(angles))
            self.counters["filter_reanchored"] += 1

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


def with_node(config: Config, **changes) -> Config:
    """``config`` with node settings changed (tests, benchmarks)."""
    return dataclasses.replace(config, node=dataclasses.replace(config.node, **changes))
