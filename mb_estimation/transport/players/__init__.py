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

The rooms: :mod:`.messages` (:class:`TimedMessage`, the kinds and payloads), :mod:`.rig_sim`
(the simulated rig's stream), :mod:`.bags` (a bag's stream), :mod:`.pacing` (:func:`play`) and
:mod:`.dds_sink` (:class:`DdsSink`); the rclpy sink is
:class:`mb_estimation.transport.ros_player.RosSink` (it needs rclpy). Every name is imported
here.
"""

from mb_estimation.transport.players.bags import bag_messages, bag_topics
from mb_estimation.transport.players.dds_sink import DdsSink, to_dds
from mb_estimation.transport.players.messages import (
    FLOAT64,
    FLOAT64_MULTIARRAY,
    JOINT_STATE,
    KIND_BY_ROS_TYPE,
    KINDS,
    JointStatePayload,
    TimedMessage,
)
from mb_estimation.transport.players.pacing import MAX_SLEEP_S, PlayStats, play
from mb_estimation.transport.players.rig_sim import (
    DEFAULT_CHUNK_S,
    rig_sim_messages,
    rig_sim_topics,
)

__all__ = [
    "DEFAULT_CHUNK_S",
    "FLOAT64",
    "FLOAT64_MULTIARRAY",
    "JOINT_STATE",
    "KIND_BY_ROS_TYPE",
    "KINDS",
    "MAX_SLEEP_S",
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
