"""The DDS sink of a player: :class:`DdsSink` publishes on ROS 2 topics over bare DDS.

:func:`to_dds` makes the :mod:`~mb_estimation.transport.dds_messages` instance of a
:class:`TimedMessage`; both import ``cyclonedds`` on use only.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from mb_estimation.transport.players.messages import (
    FLOAT64,
    FLOAT64_MULTIARRAY,
    JOINT_STATE,
    KINDS,
    TimedMessage,
)

if TYPE_CHECKING:
    from mb_estimation.transport.dds_bus import DdsBus, Publisher

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
