"""The callback path of the node core: samples in, windows cut (never waits on the estimator).

:class:`SampleIntake` is the part of :class:`~mb_estimation.online.core.EstimatorCore` the
transports' subscription callbacks call: it checks each joint state and voltage, keeps them in
the ring buffers, runs the real-time filter, and cuts windows on the header stamps for the
worker (:class:`~mb_estimation.online.worker.WindowWorker`). It is a mixin: the state it uses is
made in ``EstimatorCore.__init__``, and a method named ``*_locked`` runs under ``self._lock``;
besides that state it calls only the core's own ``_emit`` and ``on_message_error``.

Whatever arrives, what is kept is bounded by the config: the rings hold ``node.buffer_s`` at
``node.max_rate_hz``, a window holds its own span and a tenth of it on each side, at most
``node.pending_windows`` windows wait. Every sample that is not used is counted under the name
of its fault (:data:`REJECTED_SAMPLES`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.message_types import FLOAT64_MULTI_ARRAY, JOINT_STATE
from mb_estimation.online.windows import Window
from mb_estimation.signals import Recording
from mb_estimation.stamps import NS_PER_S

#: A stamp further than this from the newest accepted one [ns], back or ahead, is not on the
#: stream's time base: a stamp glitch, or the first sample of a new time base (a looped bag,
#: a restarted driver, a pause).
STAMP_JUMP_NS = NS_PER_S
#: Consecutive samples (each within :data:`STAMP_JUMP_NS` of the one before) that make such a
#: stamp a new time base; fewer are glitches, dropped.
STAMP_CONFIRMATIONS = 5
#: Beyond this |angle| [rad] (1.6e8 turns) a position is no encoder reading; below it float64
#: still resolves 1e-7 rad.
MAX_ABS_ANGLE_RAD = 1e9
#: Beyond this |input| (in the input's unit: V, A or N m) a command is no driver's.
MAX_ABS_INPUT = 1e6
#: Voltages with their own stamps held while the joint states may be moving to a new time base.
FAR_VOLTAGES = 4 * STAMP_CONFIRMATIONS
#: A window keeps samples up to this fraction of its length outside it (edge neighbours).
WINDOW_MARGIN_FRACTION = 0.1

#: The diagnostics counters of samples that were not used, with what each means.
REJECTED_SAMPLES = {
    "samples_empty": "a joint state with no names and no positions",
    "samples_unknown_joints": "a joint state without the config's joint names",
    "samples_short": "a joint state with fewer positions than names",
    "samples_non_finite": "a NaN or infinite position",
    "samples_out_of_range": f"a position beyond {MAX_ABS_ANGLE_RAD:g} rad",
    "samples_late": "a stamp up to 1 s older than the newest",
    "samples_repeated": "the newest stamp again",
    "samples_stamp_zero": "a header stamp of zero (the driver does not stamp?)",
    "samples_stamp_behind": "a lone stamp more than 1 s in the past",
    "samples_stamp_ahead": "a lone stamp more than 1 s in the future",
    "voltage_non_finite": "a NaN or infinite voltage",
    "voltage_out_of_range": f"a voltage beyond {MAX_ABS_INPUT:g}",
    "voltage_late": "a voltage stamped before the newest",
    "voltage_stamp_outliers": "a voltage stamped off the joint states' time base",
}


@dataclass(frozen=True)
class _Sample:
    """A checked joint state waiting to be taken.

    Its stamp [ns], model angles [rad], source timestamp [ns] (or None) and the voltage carried
    in its effort (or None).
    """

    stamp_ns: int
    angles: np.ndarray
    source_ns: int | None
    voltage: float | None


class SampleIntake:
    """Joint states and voltages in, windows out: the callback side of ``EstimatorCore``."""

    def on_joint_state(self, stamp_ns: int, names: Sequence[str], positions: Sequence[float],
                       source_ns: int | None = None,
                       efforts: Sequence[float] | None = None) -> None:
        """One sensor_msgs/JointState: header stamp [ns], names and recorded positions [rad].

        ``source_ns``: when its publisher wrote it [ns] (the middleware's source timestamp),
        if the transport knows it: header-less voltages are then paired by publication order
        (:meth:`on_voltage_message`). ``efforts``: the message's effort field, the voltage
        where ``recording.voltage_type`` is a JointState (taken on the same stamp).

        A stamp far from the stream's (:data:`STAMP_JUMP_NS`) is taken only once
        :data:`STAMP_CONFIRMATIONS` samples in a row agree on it: stamps jumping back reset
        the buffers and filters (a looped bag), jumping ahead restart the window schedule; a
        lone stamp far away is dropped and counted.
        """
        started = self._clock()
        filtered = []
        with self._lock:
            self.counters["joint_samples"] += 1
            angles = self._model_angles(names, positions)
            if angles is not None:
                voltage = None
                if self.config.recording.voltage_type == JOINT_STATE and \
                        self.config.rig_spec.inputs:
                    voltage = self._effort_voltage_locked(names, efforts)
                for sample in self._admitted_locked(_Sample(stamp_ns, angles, source_ns,
                                                            voltage)):
                    filtered.append((sample.stamp_ns, self._take_locked(sample)))
        for stamp, (angles, rates) in filtered:
            if np.all(np.isfinite(angles)) and np.all(np.isfinite(rates)):
                self._emit("filtered_joint_states", stamp, self.joint_names,
                           *self._to_recorded(angles, rates))
        self._note_latency(started)

    def _take_locked(self, sample: _Sample):
        """Buffer an admitted sample, place the voltages it carries, filter, cut windows."""
        self.counters["samples_used"] += 1
        stamp_ns = sample.stamp_ns
        angles = self._unwrapped_locked(sample.angles)
        self._joints.append(stamp_ns, angles)
        if self._epoch_ns is None:
            self._epoch_ns = self._next_start_ns = stamp_ns
        if self._voltage_before_joints is not None:  # held from the first joint state
            self._add_voltage_locked(stamp_ns, self._voltage_before_joints)
            self._voltage_before_joints = None
        if sample.source_ns:
            for placed in self._publication_order.joint_state(sample.source_ns, stamp_ns):
                self._add_voltage_locked(*placed)
        if sample.voltage is not None:
            self._add_voltage_locked(stamp_ns, sample.voltage)
        if self._voltage_script is not None:
            self._add_voltage_locked(stamp_ns, self._scripted_voltage(stamp_ns))
        filtered = self._filter.step((stamp_ns - self._epoch_ns) / NS_PER_S, angles)
        self._schedule_locked(stamp_ns)
        return filtered

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
        """One motor voltage [V] at ``stamp_ns`` (held until the next).

        A stamp off the joint states' time base is held until the joint states move there
        (a looped bag whose voltage arrives first), else counted as an outlier.
        """
        with self._lock:
            base = self._joints.last_stamp_ns
            if base is not None and abs(stamp_ns - base) > STAMP_JUMP_NS:
                if len(self._far_voltages) == FAR_VOLTAGES:
                    self.counters["voltage_stamp_outliers"] += 1
                self._far_voltages.append((stamp_ns, value))
                return
            self._add_voltage_locked(stamp_ns, value)

    def _add_voltage_locked(self, stamp_ns: int, value: float) -> None:
        self.counters["voltage_samples"] += 1
        if not math.isfinite(value):
            self._reject_locked("voltage_non_finite", "non-finite voltage dropped")
            return
        if abs(value) > MAX_ABS_INPUT:
            self._reject_locked("voltage_out_of_range", f"voltage {value:.3g} dropped (beyond "
                                f"{MAX_ABS_INPUT:g})")
            return
        last = self._voltage.last_stamp_ns
        if last is not None and stamp_ns < last:
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

    def _effort_voltage_locked(self, names, efforts) -> float | None:
        """The voltage in a joint state's effort (``recording.voltage_type`` JointState)."""
        joint = self.config.recording.voltage_joint or self.joint_names[0]
        names = list(names)
        if efforts is not None and joint in names and len(efforts) == len(names):
            return float(efforts[names.index(joint)])
        self.counters["message_errors"] += 1
        self._last["last_error"] = f"joint state without an effort for {joint}"
        return None

    def _note_latency(self, started: float) -> None:
        latency = self._clock() - started
        self._last["max_callback_s"] = max(self._last.get("max_callback_s", 0.0), latency)

    def _reject_locked(self, kind: str, error: str) -> None:
        self.counters[kind] += 1
        self._last["last_error"] = error

    def _model_angles(self, names, positions) -> np.ndarray | None:
        """The model's joint angles [rad] of a joint state, or None (rejected, counted)."""
        if len(names) == 0 and len(positions) == 0:
            self._reject_locked("samples_empty", "empty joint state dropped")
            return None
        index = {name: i for i, name in enumerate(names)}
        missing = [m.name for m in self._mappings if m.name not in index]
        if missing:
            self._reject_locked("samples_unknown_joints", (
                f"joint state without {', '.join(missing)} (it has "
                f"{', '.join(map(str, names)) or 'no names'}): map the joints in the config's "
                "recording.joints"))
            return None
        if len(positions) < len(names):
            self._reject_locked("samples_short", f"joint state with {len(positions)} "
                                f"positions for {len(names)} names dropped")
            return None
        raw = np.array([float(positions[index[m.name]]) for m in self._mappings])
        if not np.all(np.isfinite(raw)):
            self._reject_locked("samples_non_finite", "non-finite joint position dropped")
            return None
        if np.any(np.abs(raw) > MAX_ABS_ANGLE_RAD):
            self._reject_locked("samples_out_of_range", f"joint position beyond "
                                f"{MAX_ABS_ANGLE_RAD:g} rad dropped")
            return None
        return np.array([m.to_model(value) for m, value in zip(self._mappings, raw, strict=True)])

    def _admitted_locked(self, sample: _Sample) -> list[_Sample]:
        """The samples to take now: this one, a confirmed new time base's, or none."""
        last = self._joints.last_stamp_ns
        ahead = None if last is None else sample.stamp_ns - last
        if ahead is None or 0 < ahead <= STAMP_JUMP_NS:
            self._drop_unconfirmed_locked()
            return [sample]
        if -STAMP_JUMP_NS <= ahead <= 0:
            self.counters["samples_late" if ahead < 0 else "samples_repeated"] += 1
            return []
        if self._unconfirmed and \
                not 0 < sample.stamp_ns - self._unconfirmed[-1].stamp_ns <= STAMP_JUMP_NS:
            self._drop_unconfirmed_locked()
        self._unconfirmed.append(sample)
        if len(self._unconfirmed) < STAMP_CONFIRMATIONS:
            return []
        run, self._unconfirmed = self._unconfirmed, []
        self._new_time_base_locked(run[0].stamp_ns, last)
        return run

    def _drop_unconfirmed_locked(self) -> None:
        """Count the far stamps that no run confirmed (and the voltages held for them)."""
        last = self._joints.last_stamp_ns
        for sample in self._unconfirmed:
            if sample.stamp_ns == 0:
                self._reject_locked("samples_stamp_zero", "joint state stamped 0 dropped: "
                                    "does the driver set its header stamps?")
            else:
                behind = sample.stamp_ns < last
                self._reject_locked(
                    "samples_stamp_behind" if behind else "samples_stamp_ahead",
                    f"joint state stamped {abs(sample.stamp_ns - last) / NS_PER_S:.3g} s "
                    f"{'behind' if behind else 'ahead of'} the stream dropped")
        self._unconfirmed = []
        self.counters["voltage_stamp_outliers"] += len(self._far_voltages)
        self._far_voltages.clear()

    def _new_time_base_locked(self, first_ns: int, last_ns: int) -> None:
        """Stamps moved to ``first_ns`` from ``last_ns``: back is a reset, ahead a pause."""
        if first_ns < last_ns:
            self._clear_time_locked()
            self._voltage.drop_after(first_ns)  # what is left is on the new time base
            self.counters["time_jumps"] += 1
            self._last["last_reset"] = (f"stamps jumped back {(last_ns - first_ns) / NS_PER_S:.3g}"
                                        " s: buffers and filters reset")
        held = sorted(self._far_voltages)
        self._far_voltages.clear()
        for stamp_ns, value in held:
            if abs(stamp_ns - first_ns) <= STAMP_JUMP_NS * STAMP_CONFIRMATIONS:
                self._add_voltage_locked(stamp_ns, value)
            else:
                self.counters["voltage_stamp_outliers"] += 1

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
        self._drop_unconfirmed_locked()
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
        """Queue the window from ``start_ns``: its joint states and the voltage held over it.

        It holds the samples of its span and of a tenth of it on each side at most; the
        voltage held at its start (however long ago it was set) counts from the start.
        """
        window_ns = int(round(self.settings.window_s * NS_PER_S))
        end_ns = start_ns + window_ns
        stamps, angles = self._joints.between(
            start_ns, end_ns, int(WINDOW_MARGIN_FRACTION * window_ns))
        voltage_stamps, voltages = self._voltage.between(start_ns, end_ns)
        keep = voltage_stamps <= end_ns  # a held input needs nothing after the end
        voltage_stamps, voltages = np.maximum(voltage_stamps[keep], start_ns), voltages[keep]
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
        self._pending.append(Window(self._window_index, start_ns, recording, self._generation,
                                    self.counters["resets"]))
        self._wake.notify()
