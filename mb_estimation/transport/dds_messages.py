"""ROS 2 messages as Cyclone DDS IDL types, for talking to ROS 2 over bare DDS (no ROS install).

Each class below is a ``cyclonedds.idl.IdlStruct`` whose fields, field order and field types are
those of the ROS 2 IDL of the message (``rosidl`` turns each ``.msg`` into ``.idl``), and whose
DDS type name is the one ``rmw_cyclonedds_cpp`` registers: ``<package>::msg::dds_::<Type>_``
(``MessageTypeSupport`` builds ``namespace + "::dds_::" + name + "_"``).  A DDS reader or writer
of one of these types on topic :func:`ros_topic_name` of a ROS topic therefore matches a ROS 2
subscription or publisher of that topic, and the bytes are the CDR (XCDR1, little endian, final
extensibility) that ROS 2 puts on the wire; ``test/test_dds.py`` checks them byte for byte
against the CDR serializer of ``rosbags`` for the Humble type definitions.

Field type mapping (ROS ``.msg`` -> ROS IDL -> ``cyclonedds.idl.types``):

* ``int32`` -> ``int32`` -> ``types.int32``; ``uint32`` -> ``uint32`` -> ``types.uint32``;
* ``float64`` -> ``double`` -> ``types.float64``; ``string`` -> ``string`` -> ``str``;
* ``byte`` -> ``octet`` -> ``types.uint8``: one unsigned byte (C ``uint8_t``), so the bytes on
  the wire are those of ``octet``; ``uint8`` rather than ``types.byte`` because the XTypes type
  information that recent ``rmw_cyclonedds_cpp`` releases register (``dyntype.cpp``) describes
  ``byte`` as ``UINT8``, and a ``BYTE`` member would not be assignable to it;
* ``T[]`` -> ``sequence<T>`` -> ``types.sequence[T]``.

Messages covered: ``builtin_interfaces/Time``, ``std_msgs/Header``, ``sensor_msgs/JointState``,
``std_msgs/Float64``, ``std_msgs/MultiArrayDimension``, ``std_msgs/MultiArrayLayout``,
``std_msgs/Float64MultiArray``, ``diagnostic_msgs/KeyValue``, ``diagnostic_msgs/DiagnosticStatus``
and ``diagnostic_msgs/DiagnosticArray``.

Importing this module needs the ``cyclonedds`` package (``pip install mb_estimation[dds]``);
:func:`ros_topic_name`, :func:`stamp_to_ns` and :func:`ns_to_stamp` need nothing but the types.
"""

import re
from dataclasses import dataclass, field

from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t

from mb_estimation.message_types import FLOAT64, FLOAT64_MULTI_ARRAY, JOINT_STATE
from mb_estimation.stamps import sec_nanosec, stamp_to_ns

__all__ = [
    "DDS_TYPES",
    "ROS_TOPIC_PREFIX",
    "DiagnosticArray",
    "DiagnosticStatus",
    "Float64",
    "Float64MultiArray",
    "Header",
    "JointState",
    "KeyValue",
    "MultiArrayDimension",
    "MultiArrayLayout",
    "Time",
    "joint_state",
    "ns_to_stamp",
    "ros_topic_name",
    "stamp_to_ns",
]

#: Prefix that ROS 2 middlewares put before a topic's fully qualified name (``"rt"`` for topics;
#: ``"rq"``/``"rr"`` are service requests/replies).
ROS_TOPIC_PREFIX = "rt"


#: A fully qualified ROS 2 topic name without its leading "/": tokens joined by single "/".
_ROS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*")


# --- builtin_interfaces -----------------------------------------------------------------------

@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    """``builtin_interfaces/msg/Time``: seconds (int32) and nanoseconds (uint32, < 1e9)."""

    sec: t.int32 = 0
    nanosec: t.uint32 = 0


# --- std_msgs ---------------------------------------------------------------------------------

@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    """``std_msgs/msg/Header``: time stamp and coordinate frame id."""

    stamp: Time = field(default_factory=Time)
    frame_id: str = ""


@dataclass
class Float64(IdlStruct, typename="std_msgs::msg::dds_::Float64_"):
    """``std_msgs/msg/Float64``."""

    data: t.float64 = 0.0


@dataclass
class MultiArrayDimension(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayDimension_"):
    """``std_msgs/msg/MultiArrayDimension``: label, size and stride of one dimension."""

    label: str = ""
    size: t.uint32 = 0
    stride: t.uint32 = 0


@dataclass
class MultiArrayLayout(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayLayout_"):
    """``std_msgs/msg/MultiArrayLayout``: dimensions and the offset of the first element."""

    dim: t.sequence[MultiArrayDimension] = field(default_factory=list)
    data_offset: t.uint32 = 0


@dataclass
class Float64MultiArray(IdlStruct, typename="std_msgs::msg::dds_::Float64MultiArray_"):
    """``std_msgs/msg/Float64MultiArray``: layout and flat data."""

    layout: MultiArrayLayout = field(default_factory=MultiArrayLayout)
    data: t.sequence[t.float64] = field(default_factory=list)


# --- sensor_msgs ------------------------------------------------------------------------------

@dataclass
class JointState(IdlStruct, typename="sensor_msgs::msg::dds_::JointState_"):
    """``sensor_msgs/msg/JointState``: header, joint names and position/velocity/effort."""

    header: Header = field(default_factory=Header)
    name: t.sequence[str] = field(default_factory=list)
    position: t.sequence[t.float64] = field(default_factory=list)
    velocity: t.sequence[t.float64] = field(default_factory=list)
    effort: t.sequence[t.float64] = field(default_factory=list)


# --- diagnostic_msgs --------------------------------------------------------------------------

@dataclass
class KeyValue(IdlStruct, typename="diagnostic_msgs::msg::dds_::KeyValue_"):
    """``diagnostic_msgs/msg/KeyValue``."""

    key: str = ""
    value: str = ""


@dataclass
class DiagnosticStatus(IdlStruct, typename="diagnostic_msgs::msg::dds_::DiagnosticStatus_"):
    """``diagnostic_msgs/msg/DiagnosticStatus``; ``level`` is ROS ``byte`` (see the module notes).

    The level constants are class attributes (not fields): ``OK``, ``WARN``, ``ERROR``, ``STALE``.
    """

    OK = 0
    WARN = 1
    ERROR = 2
    STALE = 3

    level: t.uint8 = 0
    name: str = ""
    message: str = ""
    hardware_id: str = ""
    values: t.sequence[KeyValue] = field(default_factory=list)


@dataclass
class DiagnosticArray(IdlStruct, typename="diagnostic_msgs::msg::dds_::DiagnosticArray_"):
    """``diagnostic_msgs/msg/DiagnosticArray``: header and a list of statuses."""

    header: Header = field(default_factory=Header)
    status: t.sequence[DiagnosticStatus] = field(default_factory=list)


#: ROS 2 message type (``pkg/msg/Type``, as rosbags and ``ros2 topic`` name it) -> IDL class.
DDS_TYPES = {
    "builtin_interfaces/msg/Time": Time,
    "std_msgs/msg/Header": Header,
    FLOAT64: Float64,
    "std_msgs/msg/MultiArrayDimension": MultiArrayDimension,
    "std_msgs/msg/MultiArrayLayout": MultiArrayLayout,
    FLOAT64_MULTI_ARRAY: Float64MultiArray,
    JOINT_STATE: JointState,
    "diagnostic_msgs/msg/KeyValue": KeyValue,
    "diagnostic_msgs/msg/DiagnosticStatus": DiagnosticStatus,
    "diagnostic_msgs/msg/DiagnosticArray": DiagnosticArray,
}


# --- helpers ----------------------------------------------------------------------------------

def ros_topic_name(name: str) -> str:
    """DDS topic name of a ROS 2 topic (``"/joint_states"`` -> ``"rt/joint_states"``).

    The ROS name is taken as fully qualified (a relative name is resolved in the root namespace,
    as for a node without namespace).  Names that ROS 2 rejects (empty, a trailing or doubled
    ``/``, a token starting with a digit, characters other than letters, digits, ``_`` and ``/``)
    and unresolved private names (``~``) or substitutions (``{node}``) raise :class:`ValueError`.
    """
    if not isinstance(name, str):
        raise TypeError(f"ROS topic name must be a str, got {type(name).__name__}")
    relative = name[1:] if name.startswith("/") else name
    if not _ROS_NAME.fullmatch(relative):
        raise ValueError(f"invalid or unresolved ROS topic name {name!r}")
    return f"{ROS_TOPIC_PREFIX}/{relative}"


def ns_to_stamp(ns: int) -> Time:
    """``builtin_interfaces/Time`` of an integer number of nanoseconds (``nanosec`` in [0, 1e9)).

    Negative times are represented as ROS does (``sec`` negative, ``nanosec`` non-negative);
    a float is accepted and rounded to the nearest nanosecond.  Raises :class:`OverflowError`
    when ``sec`` does not fit in an int32.
    """
    sec, nanosec = sec_nanosec(ns)
    return Time(sec=sec, nanosec=nanosec)


def joint_state(stamp_ns: int, names, positions, velocities=(), efforts=()) -> JointState:
    """A ``sensor_msgs/JointState`` stamped ``stamp_ns`` (empty ``frame_id``), floats as given."""
    return JointState(header=Header(stamp=ns_to_stamp(int(stamp_ns)), frame_id=""),
                      name=[str(n) for n in names], position=[float(x) for x in positions],
                      velocity=[float(x) for x in velocities], effort=[float(x) for x in efforts])
