"""Writing rosbag2 bags of the Furuta rig with ``rosbags`` (no ROS install), readable by Humble.

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
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from mb_estimation.errors import first_line
from mb_estimation.io.bags.common import BagError, humble_typestore
from mb_estimation.message_types import FLOAT64, FLOAT64_MULTI_ARRAY, JOINT_STATE, VOLTAGE_TYPES
from mb_estimation.stamps import sec_nanosec

__all__ = ["METADATA_VERSION", "STORAGES", "VOLTAGE_TYPES", "write_rig_bag"]

#: rosbag2 metadata version written (the newest one ROS 2 Humble can parse: module docstring).
METADATA_VERSION = 8

#: Storage identifiers accepted by :func:`write_rig_bag`.
STORAGES = ("sqlite3", "mcap")


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
    voltage_type: str = FLOAT64,
    voltage_index: int = 0,
    voltage_joint: str | None = None,
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
      voltage as ``effort`` of ``voltage_joint`` (default the first joint; zeros for the
      others).  ``voltage`` must then have one value per joint-state message and
      ``voltage_time_ns`` must be None or equal ``joint_time_ns``; ``voltage_topic`` must be
      None or ``joint_states_topic``.

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
        voltage_joint: JointState variant: the joint (one of ``joint_names``) whose effort
            holds the voltage; None: the first.
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
        if voltage_type == JOINT_STATE:
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
            if voltage_joint is not None and voltage_joint not in names:
                raise BagError(f"voltage_joint {voltage_joint!r} is not one of {names!r}")
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
                0 if voltage_joint is None else names.index(voltage_joint),
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
    effort_index: int,
) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer

    ts = humble_typestore()
    JointState = ts.types[JOINT_STATE]
    Header = ts.types["std_msgs/msg/Header"]
    Time = ts.types["builtin_interfaces/msg/Time"]
    empty = np.empty(0, dtype=np.float64)
    effort_volt = volt is not None and voltage_type == JOINT_STATE
    n, j = pos.shape

    def joint_msg(k: int) -> bytes | memoryview:
        sec, nanosec = sec_nanosec(int(t_joint[k]))
        effort = empty
        if effort_volt:
            effort = np.zeros(j)
            effort[effort_index] = volt[k]
        msg = JointState(
            header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=""),
            name=names,
            position=np.ascontiguousarray(pos[k]),
            velocity=empty if vel is None else np.ascontiguousarray(vel[k]),
            effort=effort,
        )
        return ts.serialize_cdr(msg, JOINT_STATE)

    def voltage_msg(k: int) -> bytes | memoryview:
        if voltage_type == FLOAT64:
            return ts.serialize_cdr(ts.types[FLOAT64](data=float(volt[k])), FLOAT64)
        data = np.zeros(voltage_index + 1)
        data[voltage_index] = volt[k]
        layout = ts.types["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
        msg = ts.types[FLOAT64_MULTI_ARRAY](layout=layout, data=data)
        return ts.serialize_cdr(msg, FLOAT64_MULTI_ARRAY)

    plugin = StoragePlugin.SQLITE3 if storage == "sqlite3" else StoragePlugin.MCAP
    with Writer(bag, version=METADATA_VERSION, storage_plugin=plugin) as writer:
        conn_joint = writer.add_connection(joint_topic, JOINT_STATE, typestore=ts)
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
