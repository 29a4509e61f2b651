"""Recordings from rosbag2 bags and PlotJuggler CSV exports, in model conventions.

Everything a real driver does is handled here from the config's ``recording`` section alone:

* joints mapped to the rig's joints by name, with offset and sign; topics with or without a
  leading slash;
* the voltage from a std_msgs/Float64 or Float64MultiArray topic (receive time; held from each
  message to the next), from a joint's effort entry, or scripted in the config
  (``voltage_script``); a recording without messages on the voltage topic is unforced (input
  0: a free swing), said in its notes; driver velocities are not used unless
  ``use_driver_velocities`` (then for the initial state velocities);
* time from the header stamps or the receive times (``stamp_source``; ``auto`` takes the stamps
  unless they fail a sanity check, and says why);
* non-finite samples dropped and counted; samples sorted by time, exact duplicates dropped
  (gaps are left to :func:`mb_estimation.signals.prepare_recording`, which bridges them).

Times in the returned :class:`Recording` count from its first joint-state sample. What was done
to the data is listed in ``Recording.notes``.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from mb_estimation.config import Config, RecordingSettings
from mb_estimation.io.bags import (
    BagError,
    JointStates,
    matching_topic,
    read_bag_summary,
    read_float64,
    read_joint_states,
)
from mb_estimation.io.plotjuggler import PlotJugglerCsv
from mb_estimation.message_types import JOINT_STATE
from mb_estimation.rigs.parameters import RIGS
from mb_estimation.signals import Recording
from mb_estimation.signals.preprocess import sorted_unique
from mb_estimation.stamps import NS_PER_S


@dataclass(frozen=True)
class Unforced:
    """The voltage of a recording without it: zero throughout (a free swing); ``why`` says so."""

    why: str


#: Seconds per nanosecond: the float 1e-9 (times in seconds stay bit for bit as they were).
_S_PER_NS = 1 / NS_PER_S
# Header stamps and receive times further apart than this [s] are on different clocks.
CLOCK_MISMATCH_S = 1.0
#: Voltage stamps all this far [s] before or after the joint states' are on another clock (a
#: voltage held from a little before the first joint state is not).
VOLTAGE_CLOCK_GAP_S = 60.0
#: A missing voltage topic this alike to one the recording has (difflib's ratio) is a typo.
NEAR_MISS_RATIO = 0.8


def read_recording(path: str | Path, config: Config) -> Recording:
    """The recording at ``path`` as the config's rig sees it.

    ``path`` is a bag folder, a ``.db3``/``.mcap`` file or a PlotJuggler ``.csv`` export.
    Raises :class:`BagError` with one line naming what is wrong.
    """
    settings = config.recording
    path = Path(path)
    needs_voltage = bool(RIGS[config.rig].inputs) and settings.voltage_script is None
    if path.suffix.lower() == ".csv":
        export = PlotJugglerCsv(path)
        joints = export.joint_states(settings.joint_states_topic)
        topics = export.topics(settings.voltage_topic)
        read_voltage = export.float64
    else:
        joints = read_joint_states(path, settings.joint_states_topic)
        topics, read_voltage = read_bag_summary(path).topics, partial(read_float64, path)
    voltage, type_note = None, None
    if needs_voltage and settings.voltage_type != JOINT_STATE:
        topic = settings.voltage_topic
        found = matching_topic(topics, topic)
        if found is not None:
            voltage = read_voltage(topic, settings.voltage_index)
            recorded = getattr(topics[found], "msgtype", None) if isinstance(topics, dict) \
                else None
            if recorded not in (None, settings.voltage_type):
                type_note = (f"{topic} holds {recorded}, not recording.voltage_type "
                             f"{settings.voltage_type}: read as the recording has it")
        else:
            _refuse_near_miss(path, topic, [t for t in topics if matching_topic(
                [t], settings.joint_states_topic) is None])
            voltage = Unforced(f"no {topic} in the recording (its topics: "
                               f"{', '.join(topics) or 'none'})")
    recording = assemble_recording(str(path), joints, voltage, settings, RIGS[config.rig])
    if type_note is not None:
        recording = dataclasses.replace(recording, notes=(*recording.notes, type_note))
    return recording


def _refuse_near_miss(path: Path, topic: str, others) -> None:
    """A :class:`BagError` where the voltage topic is missing but one alike is there (a typo).

    A recording without the topic is otherwise read as unforced (a free swing): a misspelt
    topic must not quietly turn a driven recording into one.
    """
    near = difflib.get_close_matches(topic.lstrip("/"), [t.lstrip("/") for t in others], 1,
                                     NEAR_MISS_RATIO)
    if near:
        found = next(t for t in others if t.lstrip("/") == near[0])
        raise BagError(f"{path}: no voltage topic {topic!r}, but it has {found!r}: a typo in "
                       "recording.voltage_topic? (a recording with no input topic at all is "
                       "read as unforced)")


def choose_stamps(header_ns, receive_ns, source: str, *, shared_with_receive_clock: bool):
    """Sample times [ns] from header stamps or receive times, and a note (or None) on the choice.

    ``auto`` takes the header stamps unless they are missing or zero, span a very different
    time than the receive times (a stamp that is not a clock), or — when other data is stamped
    with receive times (``shared_with_receive_clock``) — run on another clock than the receive
    times (sim time in a wall-clock bag).
    """
    if source == "receive":
        return receive_ns, None
    if header_ns is None:
        if source == "header":
            raise BagError("stamp_source is 'header' but the recording has no header stamps")
        return receive_ns, "no header stamps in the recording: using receive times"
    if source == "header":
        return header_ns, None
    problems = []
    if np.any(header_ns <= 0):
        problems.append(f"{int(np.sum(header_ns <= 0))} zero stamps")
    span_header, span_receive = np.ptp(header_ns) * _S_PER_NS, np.ptp(receive_ns) * _S_PER_NS
    if not 0.5 * span_receive <= span_header <= 2.0 * span_receive:
        problems.append(f"they span {span_header:.3g} s against {span_receive:.3g} s of "
                        "receive time")
    offset_s = float(np.median(receive_ns - header_ns)) * _S_PER_NS
    if shared_with_receive_clock and abs(offset_s) > CLOCK_MISMATCH_S:
        problems.append(f"they run {offset_s:.3g} s away from the receive times the voltage "
                        "is stamped with")
    if problems:
        return receive_ns, ("header stamps fail the sanity check (" + "; ".join(problems)
                            + "): using receive times")
    return header_ns, None


def _finite_rows(name: str, what: str, time_s, values, notes: list[str]):
    """Drop samples with a non-finite value; all of them non-finite is an error."""
    keep = np.all(np.isfinite(values.reshape(len(values), -1)), axis=1) & np.isfinite(time_s)
    dropped = int(np.sum(~keep))
    if dropped == len(keep):
        raise BagError(f"{name}: all {len(keep)} {what} samples are NaN or infinite")
    if dropped:
        notes.append(f"dropped {dropped} of {len(keep)} {what} samples with non-finite values")
    return time_s[keep], values[keep]


def _sorted_without_duplicates(what: str, time_s, values, notes: list[str]):
    time_s, values, out_of_order, repeated = sorted_unique(time_s, values)
    if out_of_order:
        notes.append(f"{out_of_order} {what} samples out of order: sorted")
    if repeated:
        notes.append(f"dropped {repeated} {what} samples with a repeated time stamp")
    return time_s, values


def _refuse_another_clock(name: str, time_s, input_time_s) -> None:
    """A :class:`BagError` where the voltage's stamps lie far from every joint state's."""
    before, after = time_s[0] - input_time_s[-1], input_time_s[0] - time_s[-1]
    if max(before, after) > VOLTAGE_CLOCK_GAP_S:
        where = (f"end {before:.3g} s before the first joint state" if before > after
                 else f"begin {after:.3g} s after the last joint state")
        raise BagError(f"{name}: the voltage's stamps {where}: are the two stamped on "
                       "different clocks? (recording.stamp_source)")


def assemble_recording(name: str, joints: JointStates, voltage, settings: RecordingSettings,
                       rig) -> Recording:
    """A :class:`Recording` from raw samples, following ``settings``. Pure (no I/O).

    ``joints`` as :func:`~mb_estimation.io.bags.read_joint_states` returns them;
    ``voltage`` is ``(receive_time_ns, values)`` of the voltage topic, :class:`Unforced` where
    the recording has none, or None (the input from the config's script or an effort entry).
    """
    notes: list[str] = []
    names = joints.names
    for joint in rig.joints:
        mapping = settings.joints[joint]
        if mapping.name not in names:
            raise BagError(f"{name}: joint {mapping.name!r} (the rig's {joint}) is not in "
                           f"{settings.joint_states_topic}; it has {', '.join(names)}. Map "
                           f"it in the config's recording.joints")
    if len(joints.receive_time_ns) == 0:
        raise BagError(f"{name}: no joint states on {settings.joint_states_topic}")
    if isinstance(voltage, tuple) and len(voltage[1]) == 0:
        voltage = Unforced(f"{settings.voltage_topic} has no messages")
    uses_voltage_topic = isinstance(voltage, tuple)
    time_ns, stamp_note = choose_stamps(joints.time_ns, joints.receive_time_ns,
                                        settings.stamp_source,
                                        shared_with_receive_clock=uses_voltage_topic)
    if stamp_note:
        notes.append(stamp_note)
    angles = np.stack([settings.joints[j].to_model(
        joints.positions[:, names.index(settings.joints[j].name)]) for j in rig.joints], 1)
    start_ns = int(np.min(time_ns))
    time_s = (time_ns - start_ns) * _S_PER_NS
    input_time_s, inputs = np.zeros(0), np.zeros((0, 0))
    if rig.inputs:
        if settings.voltage_script is not None:
            script = np.asarray(settings.voltage_script, float)
            input_time_s, inputs = script[:, 0], script[:, 1:]
            notes.append(f"input from the config's voltage_script ({len(script)} "
                         f"value{'s' if len(script) != 1 else ''})")
        elif isinstance(voltage, Unforced):
            input_time_s, inputs = np.zeros(1), np.zeros((1, 1))
            notes.append(f"{voltage.why}: unforced, input 0 (a free swing; if the rig was "
                         "driven, set recording.voltage_topic)")
        elif not uses_voltage_topic:
            efforts = joints.efforts
            joint = settings.voltage_joint
            if efforts is None or joint not in names:
                raise BagError(f"{name}: no effort entry of joint {joint!r} to read the "
                               "voltage from")
            input_time_s, inputs = time_s, efforts[:, names.index(joint)][:, None]
        else:
            voltage_ns, values = voltage
            input_time_s, inputs = (np.asarray(voltage_ns) - start_ns) * _S_PER_NS, values[:, None]
        input_time_s, inputs = _finite_rows(name, "voltage", input_time_s,
                                            np.asarray(inputs, float), notes)
        input_time_s, inputs = _sorted_without_duplicates("voltage", input_time_s, inputs,
                                                          notes)
    joints_count = angles.shape[1]
    if settings.use_driver_velocities:
        velocities = joints.velocities
        if velocities is None:
            raise BagError(f"{name}: recording.use_driver_velocities is set but the joint "
                           f"states on {settings.joint_states_topic} carry no velocities")
        rates = np.stack([settings.joints[j].sign * velocities[:, names.index(
            settings.joints[j].name)] for j in rig.joints], 1)
        angles = np.concatenate([angles, rates], axis=1)  # dropped and sorted together
    time_s, angles = _finite_rows(name, "joint-state", time_s, angles, notes)
    time_s, angles = _sorted_without_duplicates("joint-state", time_s, angles, notes)
    angles, rates = angles[:, :joints_count], angles[:, joints_count:]
    if uses_voltage_topic:
        _refuse_another_clock(name, time_s, input_time_s)
    if len(input_time_s) and input_time_s[0] > time_s[0] + 0.5 * np.median(np.diff(time_s)):
        notes.append(f"voltage unknown before its first message at {input_time_s[0]:.3f} s: "
                     "the data before it is not used")
    return Recording(name, time_s, angles, input_time_s, inputs, notes=tuple(notes),
                     joint_rates=rates if settings.use_driver_velocities else None,
                     start_ns=start_ns)
