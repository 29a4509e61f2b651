"""The node core's samples: joint states and voltages in, windows cut on their stamps.

:class:`SampleIntake` owns everything the subscription callbacks feed: it checks each joint
state and voltage, keeps them in the ring buffers, places header-less voltages, follows the
stamps' time base (resets on a jump back), runs the real-time filter and cuts windows on the
header stamps. It knows nothing of the estimator: each window is handed, as it is cut, to the
``on_window`` it was given (the node core, :class:`~mb_estimation.online.core.EstimatorCore`,
queues it for its worker), and :meth:`SampleIntake.joint_state` returns the filtered states to
publish. It is not thread-safe by itself: the core calls it under the core's lock, briefly.

Whatever arrives, what is kept is bounded by the config: the rings hold ``node.buffer_s`` at
``node.max_rate_hz``, a window holds its own span and a tenth of it on each side. Every sample
that is not used is counted under the name of its fault (:data:`REJECTED_SAMPLES`).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.config import Config
from mb_estimation.message_types import FLOAT64_MULTI_ARRAY, JOINT_STATE
from mb_estimation.online.buffers import PublicationOrder, SampleRing
from mb_estimation.online.diagnostics import NodeDiagnostics
from mb_estimation.online.jerk_model import JerkFilterSettings
from mb_estimation.online.kalman import JointStateFilter
from mb_estimation.online.windows import COVERAGE_TOLERANCE_S, Window, window_step
from mb_estimation.signals import Recording, recorded_joint_states
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
    """The node's samples: buffers, time base, voltage placement, real-time filter, windows.

    ``diagnostics``: where rejected samples and errors are counted (the core's);
    ``on_window(window)``: takes each window as it is cut.
    """

    def __init__(self, config: Config, diagnostics: NodeDiagnostics,
                 on_window: Callable[[Window], None],
                 filter_settings: JerkFilterSettings | None = None) -> None:
        self.config = config
        self.settings = config.node
        self.diagnostics = diagnostics
        self.mappings = tuple(config.recording.joints[joint] for joint in config.rig_spec.joints)
        self.joint_names = tuple(mapping.name for mapping in self.mappings)
        capacity = max(int(math.ceil(self.settings.buffer_s * self.settings.max_rate_hz)), 16)
        self.joints = SampleRing(capacity, len(self.mappings))
        self.voltage = SampleRing(capacity, 1)
        self.filter = JointStateFilter(self.joint_names, filter_settings)
        self.epoch_ns: int | None = None  # stamp of the first sample since the last reset
        self.generation = 0  # counts time bases (resets and time jumps): older stamps are stale
        self.voltage_before_joints: float | None = None  # received before any joint state
        self.unconfirmed: list[_Sample] = []  # stamped far off, until a run confirms them
        self.far_voltages = collections.deque(maxlen=FAR_VOLTAGES)  # stamped far off
        self.publication_order = PublicationOrder(capacity)  # voltages with source stamps
        script = config.recording.voltage_script if config.rig_spec.inputs else None
        # [time since the first joint state, value] held: the input of bags recorded without it
        self.voltage_script = None if script is None else np.asarray(script, dtype=np.float64)
        self.next_start_ns: int | None = None
        self.window_index = 0
        self._on_window = on_window

    @property
    def latest_stamp_ns(self) -> int | None:
        """Header stamp of the newest buffered joint state [ns] (None when empty)."""
        return self.joints.last_stamp_ns

    def to_recorded(self, angles, rates):
        """Model joint angles and rates in the recording's convention (names, offset, sign)."""
        return recorded_joint_states(self.mappings, angles, rates)

    def joint_state(self, stamp_ns: int, names: Sequence[str], positions: Sequence[float],
                    source_ns: int | None = None, efforts: Sequence[float] | None = None
                    ) -> list:
        """One sensor_msgs/JointState: header stamp [ns], names and recorded positions [rad].

        Returns the filtered states to publish, ``(stamp_ns, (angles, rates))`` per sample
        taken; the windows it completes go to ``on_window``. ``source_ns``: when its publisher wrote
        it [ns] (the middleware's source timestamp), if the transport knows it: header-less
        voltages are then paired by publication order (:meth:`voltage_message`). ``efforts``:
        the message's effort field, the voltage where ``recording.voltage_type`` is a
        JointState (taken on the same stamp).

        A stamp far from the stream's (:data:`STAMP_JUMP_NS`) is taken only once
        :data:`STAMP_CONFIRMATIONS` samples in a row agree on it: stamps jumping back reset
        the buffers and filters (a looped bag), jumping ahead restart the window schedule; a
        lone stamp far away is dropped and counted.
        """
        self.diagnostics.count("joint_samples")
        filtered = []
        angles = self._model_angles(names, positions)
        if angles is not None:
            voltage = None
            if self.config.recording.voltage_type == JOINT_STATE and \
                    self.config.rig_spec.inputs:
                voltage = self._effort_voltage(names, efforts)
            for sample in self._admitted(_Sample(stamp_ns, angles, source_ns, voltage)):
                filtered.append((sample.stamp_ns, self._take(sample)))
        return filtered

    def _take(self, sample: _Sample):
        """Buffer an admitted sample, place the voltages it carries, filter, cut windows."""
        self.diagnostics.count("samples_used")
        stamp_ns = sample.stamp_ns
        angles = self._unwrapped(sample.angles)
        self.joints.append(stamp_ns, angles)
        if self.epoch_ns is None:
            self.epoch_ns = self.next_start_ns = stamp_ns
        if self.voltage_before_joints is not None:  # held from the first joint state
            self._add_voltage(stamp_ns, self.voltage_before_joints)
            self.voltage_before_joints = None
        if sample.source_ns:
            for placed in self.publication_order.joint_state(sample.source_ns, stamp_ns):
                self._add_voltage(*placed)
        if sample.voltage is not None:
            self._add_voltage(stamp_ns, sample.voltage)
        if self.voltage_script is not None:
            self._add_voltage(stamp_ns, self._scripted_voltage(stamp_ns))
        filtered = self.filter.step((stamp_ns - self.epoch_ns) / NS_PER_S, angles)
        self._schedule(stamp_ns)
        return filtered

    def _scripted_voltage(self, stamp_ns: int) -> float:
        """``recording.voltage_script`` held at the time since the first joint state.

        The first joint state after a start, a reset or a time jump is the script's time 0 (a
        bag recorded without its input, replayed, perhaps in a loop); before the script's
        first time its first value holds.
        """
        script = self.voltage_script
        elapsed_s = (stamp_ns - self.epoch_ns) / NS_PER_S
        index = max(int(np.searchsorted(script[:, 0], elapsed_s, side="right")) - 1, 0)
        return float(script[index, 1])

    def voltage_sample(self, stamp_ns: int, value: float) -> None:
        """One motor voltage [V] at ``stamp_ns`` (held until the next).

        A stamp off the joint states' time base is held until the joint states move there
        (a looped bag whose voltage arrives first), else counted as an outlier.
        """
        base = self.joints.last_stamp_ns
        if base is not None and abs(stamp_ns - base) > STAMP_JUMP_NS:
            if len(self.far_voltages) == FAR_VOLTAGES:
                self.diagnostics.count("voltage_stamp_outliers")
            self.far_voltages.append((stamp_ns, value))
            return
        self._add_voltage(stamp_ns, value)

    def _add_voltage(self, stamp_ns: int, value: float) -> None:
        self.diagnostics.count("voltage_samples")
        if not math.isfinite(value):
            self._reject("voltage_non_finite", "non-finite voltage dropped")
            return
        if abs(value) > MAX_ABS_INPUT:
            self._reject("voltage_out_of_range",
                         f"voltage {value:.3g} dropped (beyond {MAX_ABS_INPUT:g})")
            return
        last = self.voltage.last_stamp_ns
        if last is not None and stamp_ns < last:
            self.diagnostics.count("voltage_late")
            return
        self.voltage.append(stamp_ns, (value,))

    def voltage_message(self, data, source_ns: int | None = None) -> None:
        """The ``data`` of a voltage message without a header.

        A std_msgs/Float64's number, or a Float64MultiArray's sequence holding the voltage at
        ``recording.voltage_index``. It takes effect at the stamp of the joint state published
        nearest to it: the rig's clock as the rig saw it, whatever clock the transport stamps
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
                self.diagnostics.message_error(f"{recording.voltage_topic}: data has "
                                               f"{len(data)} entries, voltage_index {index}")
                return
            data = data[index]
        if source_ns:
            placed = self.publication_order.voltage(source_ns, float(data))
            if placed is not None:
                self._add_voltage(*placed)
        elif self.joints.last_stamp_ns is None:
            self.voltage_before_joints = float(data)
        else:
            self._add_voltage(self.joints.last_stamp_ns, float(data))

    def _effort_voltage(self, names, efforts) -> float | None:
        """The voltage in a joint state's effort (``recording.voltage_type`` JointState)."""
        joint = self.config.recording.voltage_joint or self.joint_names[0]
        names = list(names)
        if efforts is not None and joint in names and len(efforts) == len(names):
            return float(efforts[names.index(joint)])
        self.diagnostics.message_error(f"joint state without an effort for {joint}")
        return None

    def _reject(self, kind: str, error: str) -> None:
        self.diagnostics.reject(kind, error)

    def _model_angles(self, names, positions) -> np.ndarray | None:
        """The model's joint angles [rad] of a joint state, or None (rejected, counted)."""
        if len(names) == 0 and len(positions) == 0:
            self._reject("samples_empty", "empty joint state dropped")
            return None
        index = {name: i for i, name in enumerate(names)}
        missing = [m.name for m in self.mappings if m.name not in index]
        if missing:
            self._reject("samples_unknown_joints", (
                f"joint state without {', '.join(missing)} (it has "
                f"{', '.join(map(str, names)) or 'no names'}): map the joints in the config's "
                "recording.joints"))
            return None
        if len(positions) < len(names):
            self._reject("samples_short", f"joint state with {len(positions)} "
                                f"positions for {len(names)} names dropped")
            return None
        raw = np.array([float(positions[index[m.name]]) for m in self.mappings])
        if not np.all(np.isfinite(raw)):
            self._reject("samples_non_finite", "non-finite joint position dropped")
            return None
        if np.any(np.abs(raw) > MAX_ABS_ANGLE_RAD):
            self._reject("samples_out_of_range", f"joint position beyond "
                                f"{MAX_ABS_ANGLE_RAD:g} rad dropped")
            return None
        return np.array([m.to_model(value) for m, value in zip(self.mappings, raw, strict=True)])

    def _admitted(self, sample: _Sample) -> list[_Sample]:
        """The samples to take now: this one, a confirmed new time base's, or none."""
        last = self.joints.last_stamp_ns
        ahead = None if last is None else sample.stamp_ns - last
        if ahead is None or 0 < ahead <= STAMP_JUMP_NS:
            self._drop_unconfirmed()
            return [sample]
        if -STAMP_JUMP_NS <= ahead <= 0:
            self.diagnostics.count("samples_late" if ahead < 0 else "samples_repeated")
            return []
        if self.unconfirmed and \
                not 0 < sample.stamp_ns - self.unconfirmed[-1].stamp_ns <= STAMP_JUMP_NS:
            self._drop_unconfirmed()
        self.unconfirmed.append(sample)
        if len(self.unconfirmed) < STAMP_CONFIRMATIONS:
            return []
        run, self.unconfirmed = self.unconfirmed, []
        self._new_time_base(run[0].stamp_ns, last)
        return run

    def _drop_unconfirmed(self) -> None:
        """Count the far stamps that no run confirmed (and the voltages held for them)."""
        last = self.joints.last_stamp_ns
        for sample in self.unconfirmed:
            if sample.stamp_ns == 0:
                self._reject("samples_stamp_zero", "joint state stamped 0 dropped: "
                                    "does the driver set its header stamps?")
            else:
                behind = sample.stamp_ns < last
                self._reject(
                    "samples_stamp_behind" if behind else "samples_stamp_ahead",
                    f"joint state stamped {abs(sample.stamp_ns - last) / NS_PER_S:.3g} s "
                    f"{'behind' if behind else 'ahead of'} the stream dropped")
        self.unconfirmed = []
        self.diagnostics.count("voltage_stamp_outliers", len(self.far_voltages))
        self.far_voltages.clear()

    def _new_time_base(self, first_ns: int, last_ns: int) -> None:
        """Stamps moved to ``first_ns`` from ``last_ns``: back is a reset, ahead a pause."""
        if first_ns < last_ns:
            self._clear_time()
            self.voltage.drop_after(first_ns)  # what is left is on the new time base
            self.diagnostics.count("time_jumps")
            self.diagnostics.latest["last_reset"] = (
                f"stamps jumped back {(last_ns - first_ns) / NS_PER_S:.3g} s: buffers and "
                "filters reset")
        held = sorted(self.far_voltages)
        self.far_voltages.clear()
        for stamp_ns, value in held:
            if abs(stamp_ns - first_ns) <= STAMP_JUMP_NS * STAMP_CONFIRMATIONS:
                self._add_voltage(stamp_ns, value)
            else:
                self.diagnostics.count("voltage_stamp_outliers")

    def _unwrapped(self, angles: np.ndarray) -> np.ndarray:
        """Angles continued across ±π from the previous sample (multi-turn, as the filter needs).

        A driver that wraps its angles (a pendulum balancing at π crosses it all the time)
        would otherwise look like a 2π jump to the filter.
        """
        previous = self.joints.last_values
        if previous is None:
            return angles
        return angles + 2.0 * np.pi * np.round((previous - angles) / (2.0 * np.pi))

    def clear(self) -> None:
        """Forget every buffered sample and the time base (a reset)."""
        self._clear_time()
        self.voltage.clear()

    def _clear_time(self) -> None:
        self.generation += 1
        self._drop_unconfirmed()
        self.joints.clear()
        self.publication_order.forget_joint_states()
        self.filter.reset()
        self.epoch_ns = None
        self.next_start_ns = None

    def _schedule(self, stamp_ns: int) -> None:
        window_ns = int(round(self.settings.window_s * NS_PER_S))
        stride_ns = int(round(self.settings.stride_s * NS_PER_S))
        covered_ns = window_ns - int(round(COVERAGE_TOLERANCE_S * NS_PER_S))
        if stamp_ns < self.next_start_ns + covered_ns or self._input_starts_later(stamp_ns,
                                                                                  covered_ns):
            return
        self._cut(self.next_start_ns)
        self.next_start_ns += stride_ns
        if stamp_ns >= self.next_start_ns + window_ns:  # a jump forward: restart the schedule
            self.next_start_ns = stamp_ns
            self.diagnostics.count("time_gaps")

    def _input_starts_later(self, stamp_ns: int, covered_ns: int) -> bool:
        """Whether the next window waits: its start moved to the first voltage after it.

        ``covered_ns``: how far after its start a joint state covers a window.

        The voltage can begin after the joint states (a driver that starts publishing it
        later, a middleware that delivers its first messages late): a window from before it
        would lack its input at its start. With no voltage at all the window is cut (and
        rejected, saying so).
        """
        if not self.config.rig_spec.inputs:
            return False
        stamps, _ = self.voltage.between(self.next_start_ns, stamp_ns)
        if not len(stamps) or stamps[0] <= self.next_start_ns:
            return False
        self.next_start_ns = int(stamps[0])
        return stamp_ns < self.next_start_ns + covered_ns

    def _cut(self, start_ns: int) -> Window:
        """The window from ``start_ns`` (its joint states and voltage), given to ``on_window``.

        It holds the samples of its span and of a tenth of it on each side at most; the
        voltage held at its start (however long ago it was set) counts from the start.
        """
        window_ns = int(round(self.settings.window_s * NS_PER_S))
        end_ns = start_ns + window_ns
        stamps, angles = self.joints.between(
            start_ns, end_ns, int(WINDOW_MARGIN_FRACTION * window_ns))
        voltage_stamps, voltages = self.voltage.between(start_ns, end_ns)
        keep = voltage_stamps <= end_ns  # a held input needs nothing after the end
        voltage_stamps, voltages = np.maximum(voltage_stamps[keep], start_ns), voltages[keep]
        self.window_index += 1
        inputs = len(self.config.rig_spec.inputs)
        if inputs and len(voltage_stamps):
            input_time_s, values = (voltage_stamps - start_ns) / NS_PER_S, voltages
        else:
            input_time_s, values = np.zeros(0), np.zeros((0, inputs))
        recording = Recording(f"window {self.window_index}", (stamps - start_ns) / NS_PER_S,
                              angles, input_time_s, values)
        window = Window(self.window_index, start_ns, recording, self.generation,
                        self.diagnostics.counters["resets"])
        self._on_window(window)
        return window

    def newest_window(self) -> Window | str:
        """Cut a window of the newest buffered ``node.window_s`` of data, or say why not."""
        last = self.joints.last_stamp_ns
        if last is None or self.epoch_ns is None:
            return "no joint states buffered yet"
        start = last - int(round(self.settings.window_s * NS_PER_S))  # as _cut's end
        if start < self.epoch_ns:
            return (f"only {(last - self.epoch_ns) / NS_PER_S:.2f} s buffered; a window needs "
                    f"{self.settings.window_s:g} s")
        return self._cut(start)

    def reanchor(self, generation: int, stamp_ns: int, angles: np.ndarray,
                 rates: np.ndarray) -> None:
        """Re-anchor the real-time filter on a window's estimated states at ``stamp_ns`` [ns].

        Only on the time base ``generation`` they were estimated on (not when the stamps were
        reset since); the angles trusted to the filter's own angle noise, the rates to ten
        of it per estimation step.
        """
        if generation != self.generation or self.epoch_ns is None:
            return
        std = self.filter.filters[0].settings.angle_noise_rad
        self.filter.reanchor((stamp_ns - self.epoch_ns) / NS_PER_S, angles, rates,
                             [std] * len(angles),
                             [10 * std / window_step(self.config)] * len(angles))
        self.diagnostics.count("filter_reanchored")
