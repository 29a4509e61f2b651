"""rclpy messages of the node and the players: building them, and the subscription callbacks.

What :mod:`mb_estimation.ros.ros_node` publishes (joint states, the parameter arrays of
:mod:`mb_estimation.online.messages`, the diagnostics) and what
:mod:`mb_estimation.ros.ros_player` sends (:func:`to_ros` of a
:class:`~mb_estimation.ros.players.TimedMessage`), as rclpy message objects; and the
rclpy subscription callback that passes the publisher's source timestamp on. Needs rclpy (the
node module says so when it is missing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.subscription import Subscription
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray, MultiArrayDimension

from mb_estimation.message_types import FLOAT64, FLOAT64_MULTI_ARRAY
from mb_estimation.online.drift import DriftingEstimate
from mb_estimation.online.fusion import ParameterEstimate
from mb_estimation.online.messages import (
    diagnostic_level,
    diagnostic_values,
    multiarray_layout,
    parameter_matrix,
    rate_matrix,
)
from mb_estimation.ros import players
from mb_estimation.ros.players import TimedMessage
from mb_estimation.stamps import sec_nanosec

#: The rclpy class of each ``recording.voltage_type``.
VOLTAGE_CLASSES = {FLOAT64: Float64, FLOAT64_MULTI_ARRAY: Float64MultiArray}


def stamp_message(nanoseconds: int) -> Time:
    """A ``builtin_interfaces/Time`` of ``nanoseconds`` since the epoch."""
    sec, nanosec = sec_nanosec(int(nanoseconds))
    return Time(sec=sec, nanosec=nanosec)


def with_source_timestamp(callback: Callable[[Any, int | None], None]) -> Callable:
    """``callback(msg, source_ns)`` as an rclpy subscription callback.

    rclpy from Iron on passes a ``MessageInfo`` holding the publisher's ``source_timestamp``
    [ns] to a callback of two arguments; Humble's passes the message only (``source_ns`` None).
    """
    if hasattr(Subscription, "CallbackType"):
        return lambda msg, info: callback(msg, info.get("source_timestamp") or None)
    return lambda msg: callback(msg, None)


def joint_state_message(stamp_ns: int, names, positions, velocities=(), efforts=()):
    """A ``sensor_msgs/JointState`` stamped ``stamp_ns`` (empty ``frame_id``)."""
    msg = JointState()
    msg.header.stamp = stamp_message(stamp_ns)
    msg.name = [str(n) for n in names]
    msg.position = [float(x) for x in positions]
    msg.velocity = [float(x) for x in velocities]
    msg.effort = [float(x) for x in efforts]
    return msg


def parameter_message(estimate: ParameterEstimate) -> Float64MultiArray:
    """The ``std_msgs/Float64MultiArray`` of an estimate (:mod:`mb_estimation.online.messages`)."""
    return _matrix_message(*parameter_matrix(estimate))


def rate_message(drifting: DriftingEstimate) -> Float64MultiArray:
    """The ``std_msgs/Float64MultiArray`` of the fused values' rates (``~/parameter_rates``)."""
    return _matrix_message(*rate_matrix(drifting), rows="rate_per_hour,std")


def _matrix_message(labels, matrix, rows: str = "value,std") -> Float64MultiArray:
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=label, size=size, stride=stride)
                      for label, size, stride in multiarray_layout(labels, rows)]
    msg.layout.data_offset = 0
    msg.data = [float(v) for v in matrix.ravel()]
    return msg


def diagnostic_array(snapshot: dict, name: str, hardware_id: str, stamp) -> DiagnosticArray:
    """The ``/diagnostics`` message of a core's diagnostics ``snapshot``, stamped ``stamp``."""
    level, message = diagnostic_level(snapshot)
    status = DiagnosticStatus(
        level=bytes([level]), name=name, message=message, hardware_id=hardware_id,
        values=[KeyValue(key=k, value=v) for k, v in diagnostic_values(snapshot)])
    array = DiagnosticArray(status=[status])
    array.header.stamp = stamp
    return array


def to_ros(message: TimedMessage):
    """The rclpy message of a :class:`~mb_estimation.ros.players.TimedMessage`.

    A joint state gets ``header.stamp`` = ``stamp_ns`` (empty ``frame_id``); a
    Float64MultiArray an empty layout.
    """
    kind, payload = message.kind, message.payload
    if kind == players.JOINT_STATE:
        return joint_state_message(message.stamp_ns, payload.names, payload.positions,
                                   payload.velocities, payload.efforts)
    if kind == players.FLOAT64:
        return Float64(data=float(payload))
    if kind == players.FLOAT64_MULTIARRAY:
        return Float64MultiArray(data=[float(x) for x in payload])
    raise ValueError(f"unknown message kind {kind!r}; expected one of {', '.join(players.KINDS)}")


def message_class(kind: str):
    """The rclpy message class of a :class:`TimedMessage` kind."""
    if kind == players.JOINT_STATE:
        return JointState
    if kind == players.FLOAT64:
        return Float64
    if kind == players.FLOAT64_MULTIARRAY:
        return Float64MultiArray
    raise ValueError(f"unknown message kind {kind!r}; expected one of {', '.join(players.KINDS)}")
