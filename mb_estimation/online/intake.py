"""The callback path of the node core: samples in, windows cut (never waits on the estimator).

:class:`SampleIntake` is the part of :class:`~mb_estimation.online.core.EstimatorCore` the
transports' subscription callbacks call: it checks each joint state and voltage, keeps them in
the ring buffers, runs the real-time filter, and cuts windows on the header stamps for the
worker (:class:`~mb_estimation.online.worker.WindowWorker`). It is a mixin: the state it uses is
made in ``EstimatorCore.__init__``, and a method named ``*_locked`` runs under ``self._lock``;
besides that state it calls only the core's own ``_emit`` and ``on_message_error``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mb_estimation.message_types import FLOAT64_MULTI_ARRAY
from mb_estimation.online.windows import Window
from mb_estimation.signals import Recording
from mb_estimation.stamps import NS_PER_S

# A stamp this much older than the newest one is a jump back in time (reset), not a late sample.
JUMP_BACK_NS = NS_PER_S


class SampleIntake:
    """Joint states and voltages in, windows out: the callback side of ``EstimatorCore``."""

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
        self._pending.append(Window(self._window_index, start_ns, recording, self._generation,
                                    self.counters["resets"]))
        self._wake.notify()
