"""The rclpy node's inputs: the joint-state and voltage subscriptions and their type check.

:class:`RosInputs` subscribes an :class:`~mb_estimation.online.core.EstimatorCore`'s input
handlers (:func:`~mb_estimation.online.adapter.input_handlers`) to the node's relative input
names ``joint_states`` and ``control_voltage`` (remapped to the rig's topics) and reports, once
each, a publisher of another type on them (rclpy never delivers its messages).
Needs rclpy (the node module says so when it is missing).
"""

from __future__ import annotations

import math
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from mb_estimation.message_types import JOINT_STATE
from mb_estimation.online.adapter import input_handlers
from mb_estimation.online.core import EstimatorCore
from mb_estimation.ros.ros_common import JOINT_STATES_INPUT, VOLTAGE_INPUT
from mb_estimation.ros.ros_messages import VOLTAGE_CLASSES, with_source_timestamp

#: The input subscriptions queue this long a stall of the executor [s] at ``node.max_rate_hz``:
#: a window's solve holds the interpreter for a fraction of a second, and a sensor-data queue
#: of 5 would drop joint states meanwhile (both inputs are kept equally deep).
INPUT_QUEUE_S = 1.0


class RosInputs:
    """The subscriptions feeding ``core`` on ``node``, in ``callback_group``.

    Joint states best effort and volatile (as sensor data), the voltage with the default QoS,
    both ``max(10, node.max_rate_hz * INPUT_QUEUE_S)`` deep; no voltage subscription where the
    core takes no voltage messages (:func:`~mb_estimation.online.adapter.input_handlers`).
    """

    def __init__(self, node: Node, core: EstimatorCore, callback_group) -> None:
        self.node = node
        self.core = core
        recording = core.config.recording
        on_joint_state, on_voltage = input_handlers(core)
        depth = max(10, math.ceil(core.config.node.max_rate_hz * INPUT_QUEUE_S))
        sensor_data = QoSProfile(depth=depth, reliability=ReliabilityPolicy.BEST_EFFORT,
                                 durability=DurabilityPolicy.VOLATILE)
        #: (subscription, the config's message type) of each input
        self.subscriptions: list[tuple[Any, str]] = [(node.create_subscription(
            JointState, JOINT_STATES_INPUT, with_source_timestamp(on_joint_state),
            sensor_data, callback_group=callback_group), JOINT_STATE)]
        if on_voltage is not None:
            self.subscriptions.append((node.create_subscription(
                VOLTAGE_CLASSES[recording.voltage_type], VOLTAGE_INPUT,
                with_source_timestamp(on_voltage), QoSProfile(depth=depth),
                callback_group=callback_group), recording.voltage_type))
        self._reported_types: set[tuple[str, str]] = set()

    @property
    def topics(self) -> list[str]:
        """The subscribed topics' resolved names (remappings applied), joint states first."""
        return [subscription.topic_name for subscription, _ in self.subscriptions]

    def close(self) -> None:
        """Destroy the subscriptions (the node's deactivate)."""
        for subscription, _ in self.subscriptions:
            self.node.destroy_subscription(subscription)
        self.subscriptions = []

    def check_topic_types(self) -> None:
        """Report (once each) input topics with a publisher of a type not the config's."""
        for subscription, expected in self.subscriptions:
            topic = subscription.topic_name
            try:
                publishers = self.node.get_publishers_info_by_topic(topic)
            except Exception:  # graph queries can fail while shutting down
                return
            for info in publishers:
                key = (topic, info.topic_type)
                if info.topic_type != expected and key not in self._reported_types:
                    self._reported_types.add(key)
                    self.core.on_message_error(
                        f"{topic}: node {info.node_name} publishes {info.topic_type}, the "
                        f"config expects {expected}: its messages are not received")
