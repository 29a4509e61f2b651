"""The message of a player stream, independent of the transport: :class:`TimedMessage`.

Its kinds (:data:`KINDS`, and the ROS 2 message type of each) and the payload of a joint state;
the kinds' payloads are listed in :mod:`mb_estimation.ros.players`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from mb_estimation import message_types

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
