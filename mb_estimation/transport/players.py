"""Message players: simulated-rig and bag message streams, real-time pacing, and a DDS sink.

A *player* feeds the online node (or anything that listens to the rig's topics) with the messages
a live rig would send.  It has three parts, the first two independent of any transport:

* **streams** of :class:`TimedMessage` -- :func:`rig_sim_messages` simulates the rig with a
  configuration's parameters and yields the joint states and the motor voltage as the rig's
  driver publishes them; :func:`bag_messages` yields the messages of a rosbag2 bag;
* **pacing** -- :func:`play` hands the messages of a stream to a *sink* in real time (or scaled,
  or as fast as possible) and reports how late it was;
* **sinks** -- any callable ``sink(message)``; :class:`DdsSink` publishes on ROS 2 topics over
  bare DDS (:class:`~mb_estimation.transport.dds_bus.DdsBus`).

For example, a simulated swing-up on the loopback DDS domain 0, looping forever::

    with DdsBus(config=loopback_config()) as bus:
        play(rig_sim_messages(config, "swingup", duration_s=None), DdsSink(bus))

Message kinds (:attr:`TimedMessage.kind`) and their payloads:

* ``"joint_state"`` (``sensor_msgs/msg/JointState``): a :class:`JointStatePayload` (names tuple,
  positions, velocities and efforts as 1-D float64 arrays; velocities/efforts may be empty);
* ``"float64"`` (``std_msgs/msg/Float64``): a float;
* ``"float64_multiarray"`` (``std_msgs/msg/Float64MultiArray``): a tuple of floats (the layout is
  not kept; it is written empty).

Only :class:`DdsSink` and :func:`to_dds` need the ``cyclonedds`` package; they import it on use.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from mb_estimation import message_types
from mb_estimation.stamps import NS_PER_S, stamp_to_ns

if TYPE_CHECKING:
    from mb_estimation.config import Config
    from mb_estimation.transport.dds_bus import DdsBus, Publisher

__all__ = [
    "DEFAULT_CHUNK_S",
    "FLOAT64",
    "FLOAT64_MULTIARRAY",
    "JOINT_STATE",
    "KIND_BY_ROS_TYPE",
    "KINDS",
    "DdsSink",
    "JointStatePayload",
    "PlayStats",
    "TimedMessage",
    "bag_messages",
    "bag_topics",
    "play",
    "rig_sim_messages",
    "rig_sim_topics",
    "to_dds",
]

JOINT_STATE = "joint_state"
FLOAT64 = "float64"
FLOAT64_MULTIARRAY = "float64_multiarray"
#: Message kinds of :class:`TimedMessage`.
KINDS = (JOINT_STATE, FLOAT64, FLOAT64_MULTIARRAY)
#: ROS 2 message type -> message kind.
KIND_BY_ROS_TYPE = {
    message_types.JOINT_STATE: JOINT_STATE,
    message_types.FLOAT64: FLOAT64,
    message_types.FLOAT64_MULTI_ARRAY: FLOAT64_MULTIARRAY,
}

#: Length of one simulation of :func:`rig_sim_messages` when it runs long or forever [s].
DEFAULT_CHUNK_S = 10.0

#: Longest single sleep of :func:`play` (so that ``stop`` is noticed within this time) [s].
MAX_SLEEP_S = 0.1

_EMPTY = np.empty(0, dtype=np.float64)
_EMPTY.flags.writeable = False


class JointStatePayload(NamedTuple):
    """Payload of a ``"joint_state"`` message: names and per-joint float64 arrays."""

    names: tuple[str, ...]
    positions: np.ndarray
    velocities: np.ndarray
    efforts: np.ndarray


class TimedMessage(NamedTuple):
    """One message of a stream, independent of the transport.

    ``stamp_ns`` is the message's time [ns since the epoch]: the header stamp of a joint state,
    the receive time of a header-less message.  ``receive_ns`` is the time the message was
    received when it differs from the stamp (bags: the log time), else None; :func:`play` paces
    by ``receive_ns`` when given, else by ``stamp_ns``.
    """

    stamp_ns: int
    topic: str
    kind: str
    payload: Any
    receive_ns: int | None = None

    @property
    def pacing_ns(self) -> int:
        """The time :func:`play` paces by: ``receive_ns`` if given, else ``stamp_ns``."""
        return self.stamp_ns if self.receive_ns is None else self.receive_ns


# --------------------------------------------------------------------------------------------
# simulated rig
# --------------------------------------------------------------------------------------------


def rig_sim_topics(config: Config) -> dict[str, str]:
    """Topic -> message kind of the messages :func:`rig_sim_messages` yields for ``config``.

    For creating publishers ahead of the first message (e.g. :meth:`DdsSink.publisher`).  The
    voltage topic is listed for actuated rigs unless the voltage travels as joint-state effort.
    """
    settings = config.recording
    topics = {settings.joint_states_topic: JOINT_STATE}
    voltage_kind = KIND_BY_ROS_TYPE.get(settings.voltage_type)
    if config.rig_spec.inputs and voltage_kind != JOINT_STATE:
        topics[settings.voltage_topic] = voltage_kind
    return topics


def rig_sim_messages(
    config: Config,
    scenario: str,
    *,
    duration_s: float | None,
    rate_hz: float | None = None,
    start_ns: int | None = None,
    seed: int = 0,
    chunk_s: float = DEFAULT_CHUNK_S,
) -> Iterator[TimedMessage]:
    """Messages of a simulated rig: ``scenario`` run with the parameters of ``config``.

    The rig is simulated as ``mb-estimation simulate`` does (``simulate_recording`` with the
    config's ``simulation.dt``, ``noise_rad`` and ``encoder_counts``) and every sample becomes a
    joint state on ``recording.joint_states_topic`` -- the joints' recorded names, positions
    ``sign * angle + offset`` and velocities ``sign * rate`` of the config's joint mappings --
    followed by the voltage in the configured ``recording.voltage_type``: a ``"float64"`` on
    ``voltage_topic``; a ``"float64_multiarray"`` on ``voltage_topic`` with the voltage at
    ``voltage_index`` and zeros before it; or, for ``sensor_msgs/msg/JointState``, the effort of
    ``voltage_joint`` (else the first joint; zeros for the others) in the joint state itself.
    Both messages of a sample carry its stamp ``start_ns + round(k / rate_hz * 1e9)``.

    **Chunks (running long or forever).**  One simulation lasts at most ``chunk_s`` seconds; after
    it the scenario starts again from its initial state (a new simulation, as if the rig were
    reset instantly) while the stamps keep increasing at the rate: chunk ``c`` covers samples
    ``c * N .. (c + 1) * N - 1`` with ``N = round(chunk_s * rate_hz)``, and only the stream's last
    sample closes a chunk (so a stream of ``duration_s <= chunk_s`` is exactly one
    ``simulate_recording`` run of ``duration_s``, ``round(duration_s * rate_hz) + 1`` samples).
    Chunk ``c`` draws its noise with seed ``seed + c``.  The noise-free simulation of a chunk is
    the same for every chunk, so it is computed (and compiled, some seconds) once and cached in
    the process: later chunks cost only their noise, and a long stream never stalls.
    ``duration_s=None`` runs forever in chunks of ``chunk_s`` (default 10 s).

    Args:
        config: Rig configuration (parameters, ``simulation`` and ``recording`` settings).
        scenario: One of :data:`mb_estimation.scenarios.SCENARIOS`.
        duration_s: Length of the stream [s], or None for no end.
        rate_hz: Sample rate [Hz] (default: ``config.simulation.rate_hz``); the config's
            ``simulation.dt`` must divide its period.
        start_ns: Stamp of the first sample [ns]; default: the wall clock (``time.time_ns()``)
            when the first simulation is done, i.e. when the first message is ready.
        seed: Noise seed of the first chunk.
        chunk_s: Length of one simulation [s].

    Returns:
        An iterator of :class:`TimedMessage`, in stamp order.  The arguments are checked at once
        (:class:`ValueError`); the simulation runs on the first ``next()``.

    """
    from mb_estimation.scenarios import SCENARIOS
    from mb_estimation.simulation import substeps_per_sample

    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    rate = float(config.simulation.rate_hz if rate_hz is None else rate_hz)
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate_hz must be a positive number, got {rate_hz!r}")
    dt = float(config.simulation.dt)
    substeps_per_sample(dt, rate)  # dt must divide the sample period
    if not (math.isfinite(chunk_s) and chunk_s > 0):
        raise ValueError(f"chunk_s must be a positive number of seconds, got {chunk_s!r}")
    chunk = int(round(chunk_s * rate))
    if chunk < 1:
        raise ValueError(f"chunk_s = {chunk_s} s is shorter than one sample at {rate} Hz")
    total = None
    if duration_s is not None:
        if not (math.isfinite(duration_s) and duration_s > 0):
            raise ValueError(f"duration_s must be positive or None, got {duration_s!r}")
        total = int(round(duration_s * rate))
        if total < 1:
            raise ValueError(f"duration_s = {duration_s} s is shorter than one sample at "
                             f"{rate} Hz")

    settings = config.recording
    rig_joints = config.rig_spec.joints
    missing = [joint for joint in rig_joints if joint not in settings.joints]
    if missing:
        raise ValueError(f"config {config.source}: recording.joints has no mapping for "
                         f"{', '.join(missing)}")
    mappings = [settings.joints[joint] for joint in rig_joints]
    names = tuple(mapping.name for mapping in mappings)
    voltage_kind = KIND_BY_ROS_TYPE.get(settings.voltage_type)
    if voltage_kind is None:
        raise ValueError(f"unsupported voltage type {settings.voltage_type!r}")
    effort_index = 0
    if voltage_kind == JOINT_STATE and settings.voltage_joint is not None:
        if settings.voltage_joint not in names:
            raise ValueError(f"recording.voltage_joint {settings.voltage_joint!r} is not one of "
                             f"the recorded joints {', '.join(names)}")
        effort_index = names.index(settings.voltage_joint)

    return _rig_sim_stream(
        config, scenario, rate=rate, dt=dt, chunk=chunk, total=total, start_ns=start_ns,
        seed=int(seed), names=names, mappings=mappings, voltage_kind=voltage_kind,
        effort_index=effort_index,
    )


def _rig_sim_stream(config, scenario, *, rate, dt, chunk, total, start_ns, seed, names,
                    mappings, voltage_kind, effort_index) -> Iterator[TimedMessage]:
    from mb_estimation.signals import recorded_joint_states
    from mb_estimation.simulation import quantise

    settings = config.recording
    base_samples = chunk if total is None else min(chunk, total)
    angles, rates, inputs = _noise_free_simulation(
        config.rig, config.friction, config.drift_correction, _parameters_key(config.parameters),
        scenario, base_samples, dt, rate)
    noise = float(config.simulation.noise_rad)
    counts = config.simulation.encoder_counts
    quantised = quantise(angles, counts)
    has_input = inputs.shape[1] > 0
    voltage = inputs[:, 0] if has_input else None
    joint_topic = settings.joint_states_topic
    voltage_topic = settings.voltage_topic
    index = int(settings.voltage_index)
    if start_ns is None:
        start_ns = time.time_ns()
    start_ns = int(start_ns)

    efforts = None
    if has_input and voltage_kind == JOINT_STATE:
        efforts = np.zeros((base_samples + 1, len(names)))
        efforts[:, effort_index] = voltage
        efforts.flags.writeable = False

    for c in itertools.count():
        first = c * chunk
        last_chunk = total is not None and total - first <= base_samples
        count = total - first + 1 if last_chunk else base_samples
        rng = np.random.default_rng(seed + c)
        measured = quantised + noise * rng.standard_normal(angles.shape)
        positions, velocities = recorded_joint_states(mappings, measured, rates)
        positions.flags.writeable = velocities.flags.writeable = False
        stamps = start_ns + np.round(np.arange(first, first + count) / rate * 1e9).astype(np.int64)
        for k in range(count):
            stamp = int(stamps[k])
            yield TimedMessage(stamp, joint_topic, JOINT_STATE, JointStatePayload(
                names, positions[k], velocities[k], _EMPTY if efforts is None else efforts[k]))
            if not has_input or voltage_kind == JOINT_STATE:
                continue
            value = float(voltage[k])
            if voltage_kind == FLOAT64:
                yield TimedMessage(stamp, voltage_topic, FLOAT64, value)
            else:
                yield TimedMessage(stamp, voltage_topic, FLOAT64_MULTIARRAY,
                                   (0.0,) * index + (value,))
        if last_chunk:
            return


def _parameters_key(parameters) -> tuple:
    return tuple(
        (name, tuple(float(x) for x in value) if isinstance(value, (tuple, list)) else float(value))
        for name, value in parameters.items()
    )


@functools.lru_cache(maxsize=4)
def _noise_free_simulation(rig_name, friction, drift_correction, parameters_key, scenario, samples,
                           dt, rate):
    """True joint angles, rates and inputs of ``samples + 1`` samples (cached per process)."""
    from mb_estimation.rigs import get_rig
    from mb_estimation.simulation import simulate_recording

    rig = get_rig(rig_name, friction, drift_correction)
    recording = simulate_recording(
        rig, dict(parameters_key), scenario, duration_s=samples / rate, dt=dt, rate_hz=rate,
        noise_rad=0.0, seed=0, encoder_counts=None)
    arrays = []
    for values in (recording.joint_angles, recording.joint_rates, recording.inputs):
        array = np.array(values, dtype=np.float64)
        array.flags.writeable = False
        arrays.append(array)
    return tuple(arrays)


# --------------------------------------------------------------------------------------------
# bags
# --------------------------------------------------------------------------------------------


def bag_messages(
    path: str | Path, *, loop: bool = False, topics: Iterable[str] | None = None
) -> Iterator[TimedMessage]:
    """Messages of a rosbag2 bag's JointState, Float64 and Float64MultiArray topics.

    In receive (log) time order, as ``ros2 bag play`` sends them.  ``stamp_ns`` is the
    message's own header stamp for joint states and the receive time for the header-less types;
    ``receive_ns`` is always the receive time (what :func:`play` paces by).  Topics of other types
    are skipped.  With ``loop=True`` the bag is replayed from its start again after its end, for
    ever: stamps and receive times then jump back, as with ``ros2 bag play --loop``.

    Args:
        path: Bag directory or ``.db3``/``.mcap`` file.
        loop: Replay for ever.
        topics: Only these topics (leading slash optional if unique); default all of the three
            types.

    Returns:
        An iterator of :class:`TimedMessage`.  The bag is checked at once (:class:`BagError`
        if it is not a bag, a topic is missing or of another type, or it holds no message to
        play); it is read lazily, one pass at a time.

    """
    from mb_estimation.io.bags import BagError, read_bag_summary, resolve_topic

    summary = read_bag_summary(path)
    if topics is None:
        selected = [name for name, topic in summary.topics.items()
                    if topic.msgtype in KIND_BY_ROS_TYPE]
    else:
        selected = []
        for name in ([topics] if isinstance(topics, str) else topics):
            name = resolve_topic(summary, name)
            if summary.topics[name].msgtype not in KIND_BY_ROS_TYPE:
                raise BagError(f"topic {name!r} in bag {summary.path} has type "
                               f"{summary.topics[name].msgtype}; expected one of "
                               f"{', '.join(KIND_BY_ROS_TYPE)}")
            selected.append(name)
    if sum(summary.topics[name].message_count for name in selected) == 0:
        raise BagError(f"bag {summary.path} has no JointState, Float64 or Float64MultiArray "
                       f"messages to play: {summary.describe()}")
    return _bag_stream(summary.path, set(selected), loop)


def bag_topics(path: str | Path) -> dict[str, str]:
    """The topics :func:`bag_messages` plays from a bag, and their message kinds.

    For a player to create its publishers (and wait for subscribers) before the first message.
    """
    from mb_estimation.io.bags import read_bag_summary

    summary = read_bag_summary(path)
    return {name: KIND_BY_ROS_TYPE[topic.msgtype] for name, topic in summary.topics.items()
            if topic.msgtype in KIND_BY_ROS_TYPE and topic.message_count}


def _bag_stream(path: Path, topics: set[str], loop: bool) -> Iterator[TimedMessage]:
    while True:
        yield from _bag_pass(path, topics)
        if not loop:
            return


def _bag_pass(path: Path, topics: set[str]) -> Iterator[TimedMessage]:
    from mb_estimation.errors import first_line
    from mb_estimation.io.bags import BagError, OpenBag

    with OpenBag(path) as reader:
        conns = [conn for conn in reader.connections
                 if conn.topic in topics and conn.msgtype in KIND_BY_ROS_TYPE]
        messages = reader.messages(connections=conns)
        while True:
            try:
                conn, log_time, raw = next(messages)
                msg = reader.deserialize(raw, conn.msgtype)
                timed = _from_bag_message(conn.topic, KIND_BY_ROS_TYPE[conn.msgtype],
                                          int(log_time), msg)
            except StopIteration:
                return
            except Exception as exc:
                raise BagError(f"cannot read bag {path}: {first_line(exc)}") from None
            yield timed


def _from_bag_message(topic: str, kind: str, log_time: int, msg: Any) -> TimedMessage:
    if kind == JOINT_STATE:
        stamp = stamp_to_ns(msg.header.stamp)
        payload = JointStatePayload(
            tuple(msg.name),
            np.asarray(msg.position, dtype=np.float64),
            np.asarray(msg.velocity, dtype=np.float64),
            np.asarray(msg.effort, dtype=np.float64),
        )
        return TimedMessage(stamp, topic, kind, payload, log_time)
    if kind == FLOAT64:
        return TimedMessage(log_time, topic, kind, float(msg.data), log_time)
    return TimedMessage(log_time, topic, kind, tuple(float(x) for x in msg.data), log_time)


# --------------------------------------------------------------------------------------------
# pacing
# --------------------------------------------------------------------------------------------


@dataclass
class PlayStats:
    """What :func:`play` did.

    Lateness is how long after its scheduled time a message went to the sink [s] (0 in the
    as-fast-as-possible mode, where nothing is scheduled).  ``stream_s`` is the stream time
    covered (sum of the forward steps of the pacing times), ``wall_s`` the clock time from the
    first message to the end of the play, ``rewinds`` the number of backward steps of the pacing
    time (loop wraps of a bag).  ``stopped`` is True when ``stop`` ended the play early.
    """

    messages: int = 0
    by_topic: dict[str, int] = field(default_factory=dict)
    stream_s: float = 0.0
    wall_s: float = 0.0
    max_lateness_s: float = 0.0
    mean_lateness_s: float = 0.0
    rewinds: int = 0
    stopped: bool = False


def play(
    messages: Iterable[TimedMessage],
    sink: Callable[[TimedMessage], Any],
    *,
    rate: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
    stop: Any = None,
) -> PlayStats:
    """Call ``sink(message)`` for each message, paced in real time scaled by ``rate``.

    Message ``k`` is due at ``t0 + T_k / rate``, where ``t0`` is the ``clock()`` reading when
    the first message arrived and ``T_k`` the stream time from the first message to message
    ``k``: the sum of the forward steps of :attr:`TimedMessage.pacing_ns` (a backward step,
    e.g. a loop wrap, counts as no time).  Every message is scheduled against ``t0``, never by
    sleeping the gap since the previous one, so time lost in the sink or in the producer does not
    accumulate: late messages go out at once and the schedule catches up.  ``rate`` 2 plays twice
    as fast; ``rate`` 0 or ``inf`` as fast as possible (no sleeping at all).

    Args:
        messages: The stream (e.g. :func:`rig_sim_messages`, :func:`bag_messages`).
        sink: Called with every message, in order (its exceptions end the play).
        rate: Speed factor, >= 0.
        clock: Monotonic clock [s].
        sleep: Sleep function [s] (sleeps at most :data:`MAX_SLEEP_S` at a time).
        stop: Optional object with ``is_set()`` (e.g. ``threading.Event``): the play ends,
            with ``stopped=True``, when it is set.

    Returns:
        A :class:`PlayStats`.

    """
    rate = float(rate)
    if math.isnan(rate) or rate < 0:
        raise ValueError(f"rate must be >= 0 (0 or inf: as fast as possible), got {rate}")
    paced = 0 < rate < math.inf
    stats = PlayStats()
    by_topic: Counter[str] = Counter()
    start = 0.0
    previous: int | None = None
    stream_ns = 0
    lateness_sum = 0.0
    for message in messages:
        if stop is not None and stop.is_set():
            stats.stopped = True
            break
        t = message.pacing_ns
        if previous is None:
            start = clock()
        elif t > previous:
            stream_ns += t - previous
        elif t < previous:
            stats.rewinds += 1
        previous = t
        if paced:
            due = start + stream_ns / NS_PER_S / rate
            now = clock()
            while now < due:
                if stop is not None and stop.is_set():
                    stats.stopped = True
                    break
                sleep(min(due - now, MAX_SLEEP_S))
                now = clock()
            if stats.stopped:
                break
            lateness = now - due
            lateness_sum += lateness
            stats.max_lateness_s = max(stats.max_lateness_s, lateness)
        sink(message)
        stats.messages += 1
        by_topic[message.topic] += 1
    if stats.messages:
        stats.wall_s = clock() - start
        stats.mean_lateness_s = lateness_sum / stats.messages
    stats.stream_s = stream_ns / NS_PER_S
    stats.by_topic = dict(by_topic)
    return stats


# --------------------------------------------------------------------------------------------
# DDS
# --------------------------------------------------------------------------------------------

_DDS_TYPE_NAMES = {
    JOINT_STATE: "JointState",
    FLOAT64: "Float64",
    FLOAT64_MULTIARRAY: "Float64MultiArray",
}


def to_dds(message: TimedMessage) -> Any:
    """The :mod:`~mb_estimation.transport.dds_messages` instance of a :class:`TimedMessage`.

    A joint state gets ``header.stamp = ns_to_stamp(stamp_ns)`` (empty ``frame_id``); a
    Float64MultiArray an empty layout.
    """
    from mb_estimation.transport import dds_messages as m

    kind, payload = message.kind, message.payload
    if kind == JOINT_STATE:
        return m.joint_state(message.stamp_ns, payload.names, payload.positions,
                             payload.velocities, payload.efforts)
    if kind == FLOAT64:
        return m.Float64(data=float(payload))
    if kind == FLOAT64_MULTIARRAY:
        return m.Float64MultiArray(data=[float(x) for x in payload])
    raise ValueError(f"unknown message kind {kind!r}; expected one of {', '.join(KINDS)}")


class DdsSink:
    """A :func:`play` sink that publishes each message on its ROS 2 topic over a :class:`DdsBus`.

    One publisher per (topic, kind) is created on first use (or ahead with :meth:`publisher`);
    joint states are published with ``joint_state_qos`` (default ``"sensor_data"``, as
    ``joint_state_broadcaster`` does), the others with ``qos`` (default ``"default"``).  The DDS
    source timestamp is the publish time; the joint states' header stamps are the messages'
    ``stamp_ns``.  :attr:`counts` holds the messages published per topic.
    """

    def __init__(self, bus: DdsBus, *, joint_state_qos: Any = "sensor_data",
                 qos: Any = "default") -> None:
        self.bus = bus
        self.joint_state_qos = joint_state_qos
        self.qos = qos
        self.counts: Counter[str] = Counter()
        self._publishers: dict[tuple[str, str], Publisher] = {}

    def publisher(self, topic: str, kind: str) -> Publisher:
        """The publisher for ``topic`` and message ``kind`` (created on the first call)."""
        key = (topic, kind)
        pub = self._publishers.get(key)
        if pub is None:
            if kind not in _DDS_TYPE_NAMES:
                raise ValueError(f"unknown message kind {kind!r}; expected one of "
                                 f"{', '.join(KINDS)}")
            from mb_estimation.transport import dds_messages as m

            msg_type = getattr(m, _DDS_TYPE_NAMES[kind])
            qos = self.joint_state_qos if kind == JOINT_STATE else self.qos
            pub = self.bus.publisher(topic, msg_type, qos)
            self._publishers[key] = pub
        return pub

    def wait_for_subscribers(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Wait until every publisher created so far has ``count`` subscriptions; False on timeout.

        The timeout is shared by all publishers.
        """
        deadline = time.monotonic() + timeout
        for pub in self._publishers.values():
            if not pub.wait_for_subscribers(count, max(0.0, deadline - time.monotonic())):
                return False
        return True

    def __call__(self, message: TimedMessage) -> None:
        self.publisher(message.topic, message.kind)(to_dds(message))
        self.counts[message.topic] += 1
