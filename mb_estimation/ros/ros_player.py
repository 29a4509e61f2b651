"""The players on rclpy (``mb-estimation rig-sim``/``replay``) and ``call_trigger``.

:class:`RosSink` is a :func:`~mb_estimation.ros.players.play` sink; :func:`run_ros_player`
plays a stream through it from a node of its own; :func:`run_driven_rig` runs a simulated rig
that obeys its input topic (``rig-sim --driven``); :func:`call_trigger` calls the node's
``~/calibrate_now`` (or ``~/reset``) once, for bag_calibration.launch.py on machines without the
``ros2`` command line. :func:`try_shutdown` ends an rclpy context that may
already be shut down. Needs rclpy (the node module says so when it is missing).
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import rclpy
from rclpy.qos import qos_profile_sensor_data
from rclpy.signals import SignalHandlerOptions
from std_srvs.srv import Trigger

from mb_estimation.ros import players
from mb_estimation.ros.players import PlayStats, TimedMessage, play
from mb_estimation.ros.ros_common import PLAYER_NODE_NAME
from mb_estimation.ros.ros_messages import message_class, to_ros

# Best-effort samples can be lost at both ends of a replay: a subscriber the publisher already
# counts may not yet know the publisher, and samples in flight when the player's node goes are
# dropped (a full test run saw 4 999 of the Humble bag's 5 001 joint states, and the node's
# second window, which the last one closes, never ended). The player waits this long [s]
# after discovery and again after its last message.
SETTLE_S = 0.3


class RosSink:
    """A :func:`~mb_estimation.ros.players.play` sink publishing through rclpy.

    One publisher per (topic, kind), created on first use (or ahead with :meth:`publisher`);
    joint states with sensor-data QoS (as ``joint_state_broadcaster``), the rest with the default
    QoS (reliable, depth 10). :attr:`counts` holds the messages published per topic.
    """

    def __init__(self, node, *, joint_state_qos=None, qos=None) -> None:
        self.node = node
        self.joint_state_qos = qos_profile_sensor_data if joint_state_qos is None \
            else joint_state_qos
        self.qos = 10 if qos is None else qos
        self.counts: Counter[str] = Counter()
        self._publishers: dict[tuple[str, str], Any] = {}

    def publisher(self, topic: str, kind: str):
        """The rclpy publisher for ``topic`` and message ``kind`` (created on the first call)."""
        key = (topic, kind)
        publisher = self._publishers.get(key)
        if publisher is None:
            qos = self.joint_state_qos if kind == players.JOINT_STATE else self.qos
            publisher = self.node.create_publisher(message_class(kind), topic, qos)
            self._publishers[key] = publisher
        return publisher

    def wait_for_subscribers(self, count: int = 1, timeout: float = 5.0, stop=None) -> bool:
        """Wait until every publisher so far has ``count`` subscriptions; False on timeout.

        ``stop`` (an event, e.g. Ctrl-C's) ends the wait early, also with False.
        """
        deadline = time.monotonic() + timeout
        for publisher in self._publishers.values():
            while publisher.get_subscription_count() < count:
                if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                    return False
                time.sleep(0.02)
        return True

    def __call__(self, message: TimedMessage) -> None:
        self.publisher(message.topic, message.kind).publish(to_ros(message))
        self.counts[message.topic] += 1


def ros_sink(node, **qos) -> RosSink:
    """A sink that publishes :class:`TimedMessage` objects through ``node``'s rclpy publishers."""
    return RosSink(node, **qos)


def run_ros_player(messages: Iterable[TimedMessage], rate: float = 1.0, *,
                   topics: dict[str, str] | None = None, wait_s: float = 2.0, stop=None,
                   args: list[str] | None = None) -> PlayStats:
    """Play ``messages`` on ROS 2 topics from a node ``mb_estimation_player``; returns the stats.

    ``rate`` as in :func:`~mb_estimation.ros.players.play` (0: as fast as possible).
    ``topics`` (topic -> message kind, e.g. :func:`~mb_estimation.ros.players.
    rig_sim_topics`) creates those publishers first and waits up to ``wait_s`` for a subscriber
    on each (then :data:`SETTLE_S`), so that the first messages are not lost to discovery, and
    waits :data:`SETTLE_S` after the last message. rclpy is initialised (with
    ``args``) unless it already is, without signal handlers of its own (they would shut the
    context down under the player: Ctrl-C is the caller's, e.g. a ``stop`` event set by it),
    and shut down again if it was initialised here; the node is destroyed in any case.
    """
    owns_context = not rclpy.ok()
    if owns_context:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(PLAYER_NODE_NAME)
    try:
        sink = ros_sink(node)
        for topic, kind in (topics or {}).items():
            sink.publisher(topic, kind)
        if topics and wait_s > 0:
            if sink.wait_for_subscribers(1, wait_s, stop):
                time.sleep(SETTLE_S)
            elif stop is None or not stop.is_set():
                node.get_logger().warning(
                    f"no subscriber on {', '.join(topics)} after {wait_s:g} s; playing anyway")
        stats = play(messages, sink, rate=rate, stop=stop)
        time.sleep(SETTLE_S)
        return stats
    finally:
        node.destroy_node()
        if owns_context:
            try_shutdown()


def run_driven_rig(config, *, rate_hz: float | None = None, duration_s: float | None = None,
                   stop=None, args: list[str] | None = None) -> PlayStats:
    """A simulated rig that obeys its input topic, from a node ``mb_estimation_player``.

    Subscribes to the config's ``recording.voltage_topic`` (``std_msgs/Float64``, or
    ``Float64MultiArray`` at ``voltage_index``; reliable, as a controller publishes) and
    publishes :func:`~mb_estimation.ros.players.driven_rig_messages` driven by the newest
    finite value received (zero before the first). rclpy is initialised and shut down as in
    :func:`run_ros_player`.
    """
    import threading

    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Float64, Float64MultiArray

    from mb_estimation.message_types import FLOAT64, FLOAT64_MULTI_ARRAY

    settings = config.recording
    if settings.voltage_type not in (FLOAT64, FLOAT64_MULTI_ARRAY):
        raise ValueError(f"config {config.source}: a driven rig takes its input on a topic of "
                         f"its own (recording.voltage_type Float64 or Float64MultiArray, not "
                         f"{settings.voltage_type})")
    latest = [0.0, 0]  # the newest finite input received, and how many arrived
    index = int(settings.voltage_index)
    messages = players.driven_rig_messages(config, lambda: latest[0], rate_hz=rate_hz,
                                           duration_s=duration_s, stop=stop,
                                           inputs_received=lambda: latest[1])  # compiles

    def take(message) -> None:
        data = message.data if settings.voltage_type == FLOAT64 else (
            message.data[index] if len(message.data) > index else float("nan"))
        latest[1] += 1
        if math.isfinite(data):
            latest[0] = float(data)

    owns_context = not rclpy.ok()
    if owns_context:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(PLAYER_NODE_NAME)
    executor = SingleThreadedExecutor()
    try:
        node.create_subscription(Float64 if settings.voltage_type == FLOAT64
                                 else Float64MultiArray, settings.voltage_topic, take, 10)
        sink = ros_sink(node)
        sink.publisher(settings.joint_states_topic, players.JOINT_STATE)
        executor.add_node(node)
        threading.Thread(target=executor.spin, daemon=True, name="rig-sim inputs").start()
        return play(messages, sink, rate=0.0, stop=stop)
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        if owns_context:
            try_shutdown()


def call_trigger(argv: list[str] | None = None) -> int:
    """Call a std_srvs/Trigger service once: ``argv = [SERVICE]``, e.g. ``/mb_estimator/reset``.

    What ``ros2 service call SERVICE std_srvs/srv/Trigger`` does, for machines with rclpy but
    without the ``ros2`` command line (bag_calibration.launch.py uses it). Prints the response;
    returns 0 when the service answered with success, 1 when it answered without, 2 when it
    did not answer within 30 s.
    """
    (service,) = sys.argv[1:] if argv is None else argv
    rclpy.init()
    node = rclpy.create_node("mb_estimation_trigger")
    try:
        client = node.create_client(Trigger, service)
        if not client.wait_for_service(timeout_sec=30.0):
            print(f"{service}: no such service after 30 s", file=sys.stderr)
            return 2
        future = client.call_async(Trigger.Request())
        rclpy.spin_until_future_complete(node, future, timeout_sec=30.0)
        if not future.done() or future.result() is None:
            print(f"{service}: no response after 30 s", file=sys.stderr)
            return 2
        response = future.result()
        print(f"{service}: success={response.success} message={response.message!r}")
        return 0 if response.success else 1
    finally:
        node.destroy_node()
        try_shutdown()


def try_shutdown(context=None) -> None:
    """Shut the rclpy ``context`` (default: the global one) down unless it already is."""
    shutdown = getattr(rclpy, "try_shutdown", None)
    if shutdown is not None:
        shutdown(context=context)
    elif rclpy.ok(context=context):
        rclpy.shutdown(context=context)
