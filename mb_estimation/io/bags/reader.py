"""Reading rosbag2 bags with ``rosbags`` (no ROS install): summary, one topic, joint states.

:func:`read_bag_summary`, :func:`read_topic`, :func:`read_joint_states` and :func:`read_float64`
are deliberately minimal (strict, no repair); every problem is a :class:`BagError` with a one-line
message that names the bag and what it holds.  Types are taken from the definitions stored in the
bag or, for bags without them (Humble), from the Humble typestore.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mb_estimation.errors import first_line
from mb_estimation.io.bags.bulk import fixed_layout
from mb_estimation.io.bags.common import BagError, humble_typestore
from mb_estimation.message_types import FLOAT64, FLOAT64_MULTI_ARRAY, JOINT_STATE
from mb_estimation.stamps import NS_PER_S, stamp_to_ns

__all__ = [
    "BagSummary",
    "JointStates",
    "OpenBag",
    "TopicSummary",
    "read_bag_summary",
    "read_float64",
    "read_joint_states",
    "read_topic",
    "resolve_topic",
]


@dataclass(frozen=True)
class TopicSummary:
    """One topic of a bag: name as stored, message type (None if mixed) and message count."""

    name: str
    msgtype: str | None
    message_count: int


@dataclass(frozen=True)
class BagSummary:
    """What a rosbag2 bag holds (from its metadata; times are receive/log times in ns).

    ``end_time_ns`` is the log time of the last message (not one past it); both times are None for
    a bag without messages.  ``metadata_version`` is None for a bare ``.db3``/``.mcap`` file.
    """

    path: Path
    storage: str
    metadata_version: int | None
    ros_distro: str | None
    message_count: int
    start_time_ns: int | None
    end_time_ns: int | None
    topics: dict[str, TopicSummary] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        """Span between first and last message log time in ns (0 for an empty bag)."""
        if self.start_time_ns is None or self.end_time_ns is None:
            return 0
        return self.end_time_ns - self.start_time_ns

    def describe(self) -> str:
        """One line: storage, metadata version, topics with types and counts, time span."""
        version = "?" if self.metadata_version is None else str(self.metadata_version)
        topics = ", ".join(
            f"{t.name!r} ({t.msgtype or 'mixed types'}, {t.message_count} msgs)"
            for t in self.topics.values()
        )
        if self.start_time_ns is None:
            span = "no messages"
        else:
            span = (
                f"log time {self.start_time_ns / NS_PER_S:.3f} s to "
                f"{self.end_time_ns / NS_PER_S:.3f} s ({self.duration_ns / NS_PER_S:.3f} s)"
            )
        return f"{self.storage} bag, metadata v{version}, topics: {topics or 'none'}; {span}"


@dataclass(frozen=True, eq=False)
class JointStates:
    """The joint states of one topic as arrays: n messages of j joints.

    Read from a bag by :func:`read_joint_states`, or from a PlotJuggler CSV export by
    :meth:`~mb_estimation.io.plotjuggler.PlotJugglerCsv.joint_states`.

    Attributes:
        time_ns: (n,) int64 header stamps [ns], or None where the source has none (a CSV export
            without a stamp column).
        receive_time_ns: (n,) int64 receive (log) times [ns].
        names: The j joint names, in column order.
        positions: (n, j) joint positions [rad].
        velocities: (n, j) joint velocities [rad/s], or None where the messages carry none.
        efforts: (n, j) efforts (as recorded, e.g. a voltage [V]), or None where none.

    """

    time_ns: np.ndarray | None
    receive_time_ns: np.ndarray
    names: list[str]
    positions: np.ndarray
    velocities: np.ndarray | None
    efforts: np.ndarray | None


def _check_bag_path(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise BagError(f"no bag at {path}: the path does not exist")
    if path.is_dir():
        if not (path / "metadata.yaml").is_file():
            contents = sorted(x.name for x in path.iterdir())[:8]
            raise BagError(
                f"{path} is not a rosbag2 bag: no metadata.yaml in the directory "
                f"(it holds {contents or 'nothing'})"
            )
    elif path.suffix not in (".db3", ".mcap"):
        raise BagError(
            f"{path} is not a rosbag2 bag: expected a bag directory or a .db3/.mcap file"
        )
    return path


def _read_metadata_yaml(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load((path / "metadata.yaml").read_text(encoding="utf-8"))
        info = doc["rosbag2_bagfile_information"]
        if not isinstance(info, dict):
            raise TypeError("rosbag2_bagfile_information is not a mapping")
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise BagError(
            f"{path} is not a readable rosbag2 bag: bad metadata.yaml ({first_line(exc)})"
        ) from None
    return info


class OpenBag:
    """Context manager around rosbags' AnyReader that turns its errors into BagError."""

    def __init__(self, path: str | Path) -> None:
        self.path = _check_bag_path(path)

    def __enter__(self) -> Any:
        from rosbags.highlevel import AnyReader

        try:
            self.reader = AnyReader([self.path], default_typestore=humble_typestore())
            self.reader.open()
        except Exception as exc:
            raise BagError(f"cannot open bag {self.path}: {first_line(exc)}") from None
        return self.reader

    def __exit__(self, *exc_info: object) -> None:
        self.reader.close()


def _summary_from_reader(path: Path, reader: Any) -> BagSummary:
    if path.is_dir():
        info = _read_metadata_yaml(path)
        storage = str(info.get("storage_identifier", "?"))
        version = info.get("version")
        version = int(version) if isinstance(version, int) else None
        distro = info.get("ros_distro")
    else:
        storage = "sqlite3" if path.suffix == ".db3" else "mcap"
        version = None
        distro = None
    topics: dict[str, TopicSummary] = {}
    for conn in reader.connections:
        prev = topics.get(conn.topic)
        if prev is None:
            topics[conn.topic] = TopicSummary(conn.topic, conn.msgtype, conn.msgcount)
        else:
            msgtype = prev.msgtype if prev.msgtype == conn.msgtype else None
            topics[conn.topic] = TopicSummary(
                conn.topic, msgtype, prev.message_count + conn.msgcount
            )
    count = sum(t.message_count for t in topics.values())
    rdr = reader.readers[0]
    start = end = None
    if rdr.message_count > 0:
        start = int(rdr.start_time)
        end = int(rdr.end_time) - 1  # rosbags reports one past the last message
    return BagSummary(
        path=path,
        storage=storage,
        metadata_version=version,
        ros_distro=distro if isinstance(distro, str) else None,
        message_count=count,
        start_time_ns=start,
        end_time_ns=end,
        topics=topics,
    )


def read_bag_summary(path: str | Path) -> BagSummary:
    """Summarise a rosbag2 bag: storage, metadata version, topics with types and counts, span.

    Args:
        path: Bag directory (with ``metadata.yaml``) or a bare ``.db3``/``.mcap`` file.

    Returns:
        A :class:`BagSummary`; its times are receive (log) times in ns.

    Raises:
        BagError: The path is not a readable rosbag2 bag.

    """
    bag = _check_bag_path(path)
    with OpenBag(bag) as reader:
        return _summary_from_reader(bag, reader)


def matching_topic(topics, topic: str) -> str | None:
    """Exact topic name, else the unique topic equal up to a leading slash (None: no such)."""
    if topic in topics:
        return topic
    matches = [t for t in topics if t.lstrip("/") == topic.lstrip("/")]
    return matches[0] if len(matches) == 1 else None


def resolve_topic(summary: BagSummary, topic: str) -> str:
    """:func:`matching_topic` of the bag, or a :class:`BagError` naming its topics."""
    found = matching_topic(summary.topics, topic)
    if found is None:
        raise BagError(f"topic {topic!r} not in bag {summary.path}: {summary.describe()}")
    return found


@dataclass(frozen=True)
class _TopicRecords:
    """One topic's messages as stored: log times [ns], CDR bytes, their type and typestore."""

    bag: Path
    name: str
    msgtype: str
    log_time_ns: np.ndarray
    raws: list
    typestore: Any

    def decoded(self) -> list[Any]:
        """Every message decoded by rosbags, one at a time."""
        return [self._decoded(raw) for raw in self.raws]

    def numbers(self, fields: dict[str, tuple[tuple[str, ...], str]]
                ) -> tuple[Any, dict[str, np.ndarray] | None]:
        """The first message decoded, and ``fields`` of all at once where their layout allows.

        :func:`~mb_estimation.io.bags.bulk.fixed_layout` (None: decode them one by one).
        """
        first = self._decoded(self.raws[0])
        return first, fixed_layout(self.typestore, self.msgtype, self.raws, first, fields)

    def _decoded(self, raw: bytes) -> Any:
        try:
            return self.typestore.deserialize_cdr(raw, self.msgtype)
        except Exception as exc:
            raise BagError(f"cannot read topic {self.name!r} of bag {self.bag}: "
                           f"{first_line(exc)}") from None


def _topic_records(path: str | Path, topic: str, msgtypes: tuple[str, ...] | None
                   ) -> _TopicRecords:
    """The stored messages of ``topic`` (leading slash optional if unique), in log-time order.

    ``msgtypes``: the types it may have (None: any), checked before anything is read.
    """
    bag = _check_bag_path(path)
    with OpenBag(bag) as reader:
        summary = _summary_from_reader(bag, reader)
        name = resolve_topic(summary, topic)
        conns = [c for c in reader.connections if c.topic == name]
        types = sorted({c.msgtype for c in conns})
        wrong = [t for t in types if msgtypes is not None and t not in msgtypes]
        if wrong:
            raise BagError(f"topic {name!r} in bag {bag} has type {', '.join(wrong)}, "
                           f"expected {' or '.join(msgtypes)}")
        if len(types) != 1:
            raise BagError(f"topic {name!r} in bag {bag} mixes types {', '.join(types)}")
        times, raws = [], []
        try:
            for _, log_time, raw in reader.messages(connections=conns):
                times.append(int(log_time))
                raws.append(raw)
        except BagError:
            raise
        except Exception as exc:
            raise BagError(f"cannot read topic {name!r} of bag {bag}: {first_line(exc)}") from None
        return _TopicRecords(bag, name, types[0], np.array(times, dtype=np.int64), raws,
                             reader.typestore)


def read_topic(path: str | Path, topic: str, msgtype: str | None = None) -> list[tuple[int, Any]]:
    """All messages of one topic, deserialised, in log-time order.

    The topic may be given with or without a leading slash if that makes it unique.  Types are
    taken from definitions stored in the bag or, for bags without them (Humble), from the Humble
    typestore.

    Args:
        path: Bag directory or ``.db3``/``.mcap`` file.
        topic: Topic name.
        msgtype: Expected message type (e.g. ``"sensor_msgs/msg/JointState"``), or None for any.

    Returns:
        List of ``(log_time_ns, message)``.

    Raises:
        BagError: Not a bag, topic missing, unexpected type, or a message fails to deserialise.

    """
    records = _topic_records(path, topic, None if msgtype is None else (msgtype,))
    return list(zip(records.log_time_ns.tolist(), records.decoded(), strict=True))


def _stack_field(
    msgs: list[tuple[int, Any]], attr: str, j: int, topic: str, optional: bool
) -> np.ndarray | None:
    lengths = {len(getattr(m, attr)) for _, m in msgs}
    if optional and lengths == {0}:
        return None
    if lengths != {j}:
        raise BagError(
            f"joint states on {topic!r}: {attr} lengths {sorted(lengths)} do not all match the "
            f"{j} joint names"
        )
    return np.stack([np.asarray(getattr(m, attr), dtype=np.float64) for _, m in msgs])


def read_joint_states(path: str | Path, topic: str) -> JointStates:
    """Joint states of one ``sensor_msgs/msg/JointState`` topic as arrays.

    Minimal and strict: every message must carry the same joint names in the same order.

    Args:
        path: Bag directory or ``.db3``/``.mcap`` file.
        topic: Joint-state topic (leading slash optional if unique).

    Returns:
        :class:`JointStates` with ``time_ns`` (n,) header stamps [ns], ``receive_time_ns`` (n,)
        log times [ns], ``names`` (the first message's joint names), ``positions`` (n, j),
        ``velocities`` (n, j) or None if all messages have an empty velocity, and ``efforts``
        (n, j) or None likewise.

    Raises:
        BagError: Not a bag, topic missing or of another type, no messages, inconsistent names
            or array lengths.

    """
    records = _topic_records(path, topic, (JOINT_STATE,))
    if not records.raws:
        raise BagError(f"joint-state topic {topic!r} in bag {path} has no messages")
    first, numbers = records.numbers(_JOINT_STATE_NUMBERS)
    names = list(first.name)
    j = len(names)
    if numbers is not None and len(first.position) == j and all(
            len(getattr(first, optional)) in (0, j) for optional in ("velocity", "effort")):
        # every message as the first: the same names and lengths (io.bags.bulk)
        return JointStates(
            time_ns=numbers["sec"].astype(np.int64) * NS_PER_S + numbers["nanosec"],
            receive_time_ns=records.log_time_ns,
            names=names,
            positions=numbers["position"],
            velocities=numbers["velocity"] if len(first.velocity) else None,
            efforts=numbers["effort"] if len(first.effort) else None,
        )
    msgs = list(zip(records.log_time_ns.tolist(), records.decoded(), strict=True))
    for k, (_, m) in enumerate(msgs):
        if list(m.name) != names:
            raise BagError(
                f"joint states on {topic!r}: message {k} has joint names {list(m.name)}, "
                f"the first message has {names}"
            )
    stamps = np.array([stamp_to_ns(m.header.stamp) for _, m in msgs], dtype=np.int64)
    return JointStates(
        time_ns=stamps,
        receive_time_ns=records.log_time_ns,
        names=names,
        positions=_stack_field(msgs, "position", j, topic, optional=False),
        velocities=_stack_field(msgs, "velocity", j, topic, optional=True),
        efforts=_stack_field(msgs, "effort", j, topic, optional=True),
    )


#: What :func:`read_joint_states` reads of each ``JointState`` (io.bags.bulk's fields).
_JOINT_STATE_NUMBERS = {
    "sec": (("header", "stamp", "sec"), "<i4"),
    "nanosec": (("header", "stamp", "nanosec"), "<u4"),
    "position": (("position",), "<f8"),
    "velocity": (("velocity",), "<f8"),
    "effort": (("effort",), "<f8"),
}


def read_float64(path: str | Path, topic: str, index: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scalar samples of a ``std_msgs/msg/Float64`` or ``Float64MultiArray`` topic.

    These messages have no header, so the time is the receive (log) time.

    Args:
        path: Bag directory or ``.db3``/``.mcap`` file.
        topic: Topic name (leading slash optional if unique).
        index: Element of ``data`` to take for Float64MultiArray (ignored for Float64).

    Returns:
        ``(time_ns, values)``: (n,) int64 log times [ns] and (n,) float64 values.

    Raises:
        BagError: Not a bag, topic missing, another type, or ``index`` out of range.

    """
    records = _topic_records(path, topic, (FLOAT64, FLOAT64_MULTI_ARRAY))
    name, msgtype = records.name, records.msgtype
    if not records.raws:
        return records.log_time_ns, np.empty(0)
    first, numbers = records.numbers({"data": (("data",), "<f8")})
    if numbers is not None and (msgtype == FLOAT64 or 0 <= index < len(first.data)):
        data = numbers["data"]  # every message as the first (io.bags.bulk)
        return records.log_time_ns, data if msgtype == FLOAT64 else data[:, index].copy()
    msgs = records.decoded()
    if msgtype == FLOAT64:
        return records.log_time_ns, np.array([m.data for m in msgs], dtype=np.float64)
    values = np.empty(len(msgs))
    for k, m in enumerate(msgs):
        if not 0 <= index < len(m.data):
            raise BagError(
                f"{FLOAT64_MULTI_ARRAY} on {name!r}: message {k} has {len(m.data)} elements, "
                f"index {index} is out of range"
            )
        values[k] = m.data[index]
    return records.log_time_ns, values
