"""rosbag2 bags for the Furuta rig: writing, and small readers, with ``rosbags`` (no ROS install).

Writing
-------
:func:`write_rig_bag` writes joint states (``sensor_msgs/msg/JointState``) and the motor voltage
(``std_msgs/msg/Float64``, ``std_msgs/msg/Float64MultiArray`` or the joint states' ``effort``) into
a rosbag2 directory that ROS 2 Humble and every later distribution can read:

* message definitions and type hashes come from the Humble typestore
  (``rosbags.typesys.Stores.ROS2_HUMBLE``);
* ``metadata.yaml`` is written in rosbag2 metadata **version 8**.  ``rosbags`` writes only versions
  8 and 9.  Humble's parser (rosbag2 0.15, its own writer uses version 5) has no upper version
  bound: it reads the fields it knows and ignores the rest, but it reads
  ``offered_qos_profiles`` as a YAML *string*.  Version 9 stores the QoS profiles as a YAML
  *list*, which Humble rejects ("yaml-cpp: ... bad conversion", ros2/rosbag2#2013); version 8
  keeps the string form, so it is the newest version Humble reads.  The QoS string is left empty,
  exactly as in the Humble recordings of this rig (``ros2 bag play`` then uses its default QoS);
* the storage is ``sqlite3`` (Humble's default) or ``mcap`` (Humble with
  ``rosbag2_storage_mcap``).

The receive (log) time of every message equals its header stamp (for Float64 messages, which have
no header, the given voltage time).

Reading
-------
:func:`read_bag_summary`, :func:`read_topic`, :func:`read_joint_states` and :func:`read_float64`
are deliberately minimal (strict, no repair); every problem is a :class:`BagError` with a one-line
message that names the bag and what it holds.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mb_estimation.errors import first_line
from mb_estimation.stamps import sec_nanosec, stamp_to_ns

__all__ = [
    "BagError",
    "BagSummary",
    "TopicSummary",
    "METADATA_VERSION",
    "STORAGES",
    "VOLTAGE_TYPES",
    "read_bag_summary",
    "read_float64",
    "read_joint_states",
    "read_topic",
    "write_rig_bag",
]

#: rosbag2 metadata version written (the newest one ROS 2 Humble can parse, see module docstring).
METADATA_VERSION = 8

#: Storage identifiers accepted by :func:`write_rig_bag`.
STORAGES = ("sqlite3", "mcap")

#: Voltage message types accepted by :func:`write_rig_bag`.
VOLTAGE_TYPES = (
    "std_msgs/msg/Float64",
    "std_msgs/msg/Float64MultiArray",
    "sensor_msgs/msg/JointState",
)

_JOINT_STATE = "sensor_msgs/msg/JointState"
_FLOAT64 = "std_msgs/msg/Float64"
_FLOAT64_MULTI = "std_msgs/msg/Float64MultiArray"
_NS = 1_000_000_000


class BagError(ValueError):
    """A bag cannot be written or read; the message is one line naming the cause."""


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
                f"log time {self.start_time_ns / _NS:.3f} s to {self.end_time_ns / _NS:.3f} s "
                f"({self.duration_ns / _NS:.3f} s)"
            )
        return f"{self.storage} bag, metadata v{version}, topics: {topics or 'none'}; {span}"


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _humble_typestore() -> Any:
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)


def _as_time_ns(values: Any, name: str) -> np.ndarray:
    """Validate a 1-D array of non-negative, non-decreasing integer nanoseconds."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise BagError(f"{name} must be a 1-D array of nanoseconds, got shape {arr.shape}")
    if arr.size == 0:
        raise BagError(f"{name} is empty: a bag needs at least one message")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating):
            raise BagError(f"{name} must hold integer nanoseconds, got dtype {arr.dtype}")
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise BagError(f"{name} must hold whole nanoseconds (integers), got fractions/NaN")
    arr = arr.astype(np.int64)
    if np.any(arr < 0):
        raise BagError(f"{name} has negative times; rosbag2 times are ns since the epoch (>= 0)")
    if np.any(np.diff(arr) < 0):
        raise BagError(
            f"{name} is not non-decreasing (first drop at index "
            f"{int(np.argmax(np.diff(arr) < 0)) + 1})"
        )
    return arr


def _check_topic(topic: Any, name: str) -> str:
    if not isinstance(topic, str) or not topic.strip("/") or any(c.isspace() for c in topic):
        raise BagError(f"{name} must be a non-empty topic name without spaces, got {topic!r}")
    return topic


def _looks_like_bag_dir(path: Path) -> bool:
    """True for an empty directory or one holding only rosbag2 files (safe to replace).

    ``ground_truth.yaml`` counts as a bag file: ``mb-estimation simulate`` writes it beside the
    recording, and a second run to the same folder must be able to replace both.
    """
    suffixes = (".db3", ".mcap", ".zstd", ".db3-wal", ".db3-shm", ".db3-journal")
    names = ("metadata.yaml", "ground_truth.yaml")
    for entry in path.iterdir():
        if entry.is_dir() or not (entry.name in names or entry.name.endswith(suffixes)):
            return False
    return True


def write_rig_bag(
    path: str | Path,
    *,
    joint_time_ns: np.ndarray,
    joint_names: list[str],
    joint_positions: np.ndarray,
    joint_velocities: np.ndarray | None = None,
    joint_states_topic: str = "joint_states",
    voltage_time_ns: np.ndarray | None = None,
    voltage: np.ndarray | None = None,
    voltage_topic: str | None = None,
    voltage_type: str = _FLOAT64,
    voltage_index: int = 0,
    storage: str = "sqlite3",
    overwrite: bool = False,
) -> Path:
    """Write a rig recording as a rosbag2 bag readable by ROS 2 Humble and newer.

    Joint states go to ``joint_states_topic`` as ``sensor_msgs/msg/JointState`` with header stamp
    ``joint_time_ns`` (``frame_id`` empty), ``name = joint_names``, ``position``, ``velocity``
    (empty if ``joint_velocities`` is None) and empty ``effort``.  The voltage, if given, goes to
    ``voltage_topic`` according to ``voltage_type``:

    * ``std_msgs/msg/Float64``: ``data = voltage[k]`` at ``voltage_time_ns[k]``;
    * ``std_msgs/msg/Float64MultiArray``: ``data`` of length ``voltage_index + 1`` with the voltage
      at ``voltage_index`` and zeros before it (empty layout);
    * ``sensor_msgs/msg/JointState``: no separate topic; the joint-state messages carry the
      voltage as ``effort`` of the first joint (zeros for the others).  ``voltage`` must then have
      one value per joint-state message and ``voltage_time_ns`` must be None or equal
      ``joint_time_ns``; ``voltage_topic`` must be None or ``joint_states_topic``.

    Every message's receive (log) time equals its stamp.  Topic names are written exactly as
    given (with or without a leading slash).  The bag is written into a temporary sibling
    directory and moved into place, so a failure leaves no partial bag.

    Args:
        path: Bag directory to create (its parent is created if needed).
        joint_time_ns: (n,) integer ns, non-negative and non-decreasing.
        joint_names: j joint names.
        joint_positions: (n, j) joint positions [rad].
        joint_velocities: (n, j) joint velocities [rad/s], or None.
        joint_states_topic: Joint-state topic name.
        voltage_time_ns: (m,) integer ns of the voltage samples, or None (no voltage, or the
            JointState variant).
        voltage: (m,) motor voltage [V], or None.
        voltage_topic: Voltage topic name (required for the Float64 variants).
        voltage_type: One of :data:`VOLTAGE_TYPES`.
        voltage_index: Index of the voltage in a Float64MultiArray.
        storage: ``"sqlite3"`` (Humble's default) or ``"mcap"``.
        overwrite: Replace an existing bag at ``path`` (only if the directory holds nothing but
            rosbag2 files).

    Returns:
        The bag directory path.

    Raises:
        BagError: Invalid arguments, ``path`` exists and ``overwrite`` is False, or writing failed.

    """
    path = Path(path)
    if storage not in STORAGES:
        raise BagError(f"unknown storage {storage!r}; expected one of {', '.join(STORAGES)}")
    if voltage_type not in VOLTAGE_TYPES:
        raise BagError(
            f"unknown voltage type {voltage_type!r}; expected one of {', '.join(VOLTAGE_TYPES)}"
        )
    joint_states_topic = _check_topic(joint_states_topic, "joint_states_topic")
    if isinstance(voltage_index, bool) or not isinstance(voltage_index, (int, np.integer)):
        raise BagError(f"voltage_index must be an integer >= 0, got {voltage_index!r}")
    if voltage_index < 0:
        raise BagError(f"voltage_index must be an integer >= 0, got {voltage_index!r}")

    t_joint = _as_time_ns(joint_time_ns, "joint_time_ns")
    n = t_joint.size
    names = list(joint_names)
    if not names or not all(isinstance(x, str) and x for x in names):
        raise BagError(f"joint_names must be non-empty strings, got {joint_names!r}")
    if len(set(names)) != len(names):
        raise BagError(f"joint_names must be unique, got {names!r}")
    j = len(names)
    pos = np.asarray(joint_positions, dtype=np.float64)
    if pos.shape != (n, j):
        raise BagError(f"joint_positions must have shape ({n}, {j}), got {pos.shape}")
    vel = None
    if joint_velocities is not None:
        vel = np.asarray(joint_velocities, dtype=np.float64)
        if vel.shape != (n, j):
            raise BagError(f"joint_velocities must have shape ({n}, {j}), got {vel.shape}")

    volt = None
    t_volt = None
    if voltage is None:
        if voltage_time_ns is not None:
            raise BagError("voltage_time_ns given without voltage")
    else:
        volt = np.asarray(voltage, dtype=np.float64)
        if volt.ndim != 1:
            raise BagError(f"voltage must be a 1-D array, got shape {volt.shape}")
        if voltage_type == _JOINT_STATE:
            if volt.size != n:
                raise BagError(
                    f"voltage as JointState effort needs one value per joint state ({n}), "
                    f"got {volt.size}"
                )
            if voltage_time_ns is not None and not np.array_equal(
                np.asarray(voltage_time_ns), t_joint
            ):
                raise BagError(
                    "voltage as JointState effort: voltage_time_ns must equal "
                    "joint_time_ns (or be None)"
                )
            if voltage_topic is not None and voltage_topic != joint_states_topic:
                raise BagError(
                    f"voltage as JointState effort is written on {joint_states_topic!r}; "
                    f"voltage_topic {voltage_topic!r} must be None or that topic"
                )
        else:
            if voltage_time_ns is None:
                raise BagError(f"voltage of type {voltage_type} needs voltage_time_ns")
            t_volt = _as_time_ns(voltage_time_ns, "voltage_time_ns")
            if t_volt.size != volt.size:
                raise BagError(
                    f"voltage has {volt.size} samples but voltage_time_ns has {t_volt.size}"
                )
            if voltage_topic is None:
                raise BagError(f"voltage of type {voltage_type} needs voltage_topic")
            voltage_topic = _check_topic(voltage_topic, "voltage_topic")
            if voltage_topic == joint_states_topic:
                raise BagError(f"voltage_topic and joint_states_topic are both {voltage_topic!r}")

    if path.exists():
        if not overwrite:
            raise BagError(f"{path} exists already; pass overwrite=True to replace it")
        if not path.is_dir() or not _looks_like_bag_dir(path):
            raise BagError(f"refusing to overwrite {path}: it is not a rosbag2 bag directory")

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp_root = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    except OSError as exc:
        raise BagError(f"cannot create bag {path}: {first_line(exc)}") from None
    try:
        tmp_bag = tmp_root / path.name  # same name: storage files are named after the directory
        try:
            _write(
                tmp_bag,
                storage,
                joint_states_topic,
                t_joint,
                names,
                pos,
                vel,
                voltage_topic,
                voltage_type,
                int(voltage_index),
                t_volt,
                volt,
            )
        except BagError:
            raise
        except Exception as exc:  # rosbags WriterError, serialization errors, OS errors
            raise BagError(f"writing bag {path} failed: {first_line(exc)}") from exc
        if path.exists():
            shutil.rmtree(path)
        tmp_bag.rename(path)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return path


def _write(
    bag: Path,
    storage: str,
    joint_topic: str,
    t_joint: np.ndarray,
    names: list[str],
    pos: np.ndarray,
    vel: np.ndarray | None,
    voltage_topic: str | None,
    voltage_type: str,
    voltage_index: int,
    t_volt: np.ndarray | None,
    volt: np.ndarray | None,
) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer

    ts = _humble_typestore()
    JointState = ts.types[_JOINT_STATE]
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]
    empty = np.empty(0, dtype=np.float64)
    effort_volt = volt is not None and voltage_type == _JOINT_STATE
    n, j = pos.shape

    def joint_msg(k: int) -> bytes | memoryview:
        sec, nanosec = sec_nanosec(int(t_joint[k]))
        effort = empty
        if effort_volt:
            effort = np.zeros(j)
            effort[0] = volt[k]
        msg = JointState(
            header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=""),
            name=names,
            position=np.ascontiguousarray(pos[k]),
            velocity=empty if vel is None else np.ascontiguousarray(vel[k]),
            effort=effort,
        )
        return ts.serialize_cdr(msg, _JOINT_STATE)

    def voltage_msg(k: int) -> bytes | memoryview:
        if voltage_type == _FLOAT64:
            return ts.serialize_cdr(ts.types[_FLOAT64](data=float(volt[k])), _FLOAT64)
        data = np.zeros(voltage_index + 1)
        data[voltage_index] = volt[k]
        layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        msg = ts.types[_FLOAT64_MULTI](layout=layout, data=data)
        return ts.serialize_cdr(msg, _FLOAT64_MULTI)

    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    with Writer(bag, version=METADATA_VERSION, storage_plugin=plugin) as writer:
        conn_joint = writer.add_connection(joint_topic, _JOINT_STATE, typestore=ts)
        separate = volt is not None and not effort_volt
        conn_volt = (
            writer.add_connection(voltage_topic, voltage_type, typestore=ts) if separate else None
        )
        # write in log-time order (joint state first on ties) so every storage is time-sorted
        times = t_joint if not separate else np.concatenate([t_joint, t_volt])
        order = np.argsort(times, kind="stable")
        for idx in order:
            if idx < n:
                writer.write(conn_joint, int(t_joint[idx]), joint_msg(int(idx)))
            else:
                k = int(idx) - n
                writer.write(conn_volt, int(t_volt[k]), voltage_msg(k))


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------


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
            self.reader = AnyReader([self.path], default_typestore=_humble_typestore())
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


def resolve_topic(summary: BagSummary, topic: str) -> str:
    """Exact topic name, else the unique topic equal up to a leading slash."""
    if topic in summary.topics:
        return topic
    matches = [t for t in summary.topics if t.lstrip("/") == topic.lstrip("/")]
    if len(matches) == 1:
        return matches[0]
    raise BagError(f"topic {topic!r} not in bag {summary.path}: {summary.describe()}")


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
    bag = _check_bag_path(path)
    with OpenBag(bag) as reader:
        summary = _summary_from_reader(bag, reader)
        name = resolve_topic(summary, topic)
        conns = [c for c in reader.connections if c.topic == name]
        if msgtype is not None:
            wrong = sorted({c.msgtype for c in conns if c.msgtype != msgtype})
            if wrong:
                raise BagError(
                    f"topic {name!r} in bag {bag} has type {', '.join(wrong)}, expected {msgtype}"
                )
        out: list[tuple[int, Any]] = []
        try:
            for conn, log_time, raw in reader.messages(connections=conns):
                out.append((int(log_time), reader.deserialize(raw, conn.msgtype)))
        except BagError:
            raise
        except Exception as exc:
            raise BagError(f"cannot read topic {name!r} of bag {bag}: {first_line(exc)}") from None
    return out


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


def read_joint_states(path: str | Path, topic: str) -> dict[str, Any]:
    """Joint states of one ``sensor_msgs/msg/JointState`` topic as arrays.

    Minimal and strict: every message must carry the same joint names in the same order.

    Args:
        path: Bag directory or ``.db3``/``.mcap`` file.
        topic: Joint-state topic (leading slash optional if unique).

    Returns:
        ``dict`` with ``time_ns`` (n,) header stamps [ns], ``receive_time_ns`` (n,) log times [ns],
        ``names`` (list of the first message's joint names), ``positions`` (n, j),
        ``velocities`` (n, j) or None if all messages have an empty velocity, and ``efforts``
        (n, j) or None likewise.

    Raises:
        BagError: Not a bag, topic missing or of another type, no messages, inconsistent names
            or array lengths.

    """
    msgs = read_topic(path, topic, _JOINT_STATE)
    if not msgs:
        raise BagError(f"joint-state topic {topic!r} in bag {path} has no messages")
    names = list(msgs[0][1].name)
    for k, (_, m) in enumerate(msgs):
        if list(m.name) != names:
            raise BagError(
                f"joint states on {topic!r}: message {k} has joint names {list(m.name)}, "
                f"the first message has {names}"
            )
    j = len(names)
    stamps = np.array(
        [stamp_to_ns(m.header.stamp) for _, m in msgs], dtype=np.int64
    )
    return {
        "time_ns": stamps,
        "receive_time_ns": np.array([t for t, _ in msgs], dtype=np.int64),
        "names": names,
        "positions": _stack_field(msgs, "position", j, topic, optional=False),
        "velocities": _stack_field(msgs, "velocity", j, topic, optional=True),
        "efforts": _stack_field(msgs, "effort", j, topic, optional=True),
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
    summary = read_bag_summary(path)
    name = resolve_topic(summary, topic)
    msgtype = summary.topics[name].msgtype
    if msgtype not in (_FLOAT64, _FLOAT64_MULTI):
        raise BagError(
            f"topic {name!r} in bag {path} has type {msgtype}; expected {_FLOAT64} or "
            f"{_FLOAT64_MULTI}"
        )
    msgs = read_topic(path, name, msgtype)
    times = np.array([t for t, _ in msgs], dtype=np.int64)
    if msgtype == _FLOAT64:
        return times, np.array([m.data for _, m in msgs], dtype=np.float64)
    values = np.empty(len(msgs))
    for k, (_, m) in enumerate(msgs):
        if not 0 <= index < len(m.data):
            raise BagError(
                f"{_FLOAT64_MULTI} on {name!r}: message {k} has {len(m.data)} elements, "
                f"index {index} is out of range"
            )
        values[k] = m.data[index]
    return times, values
