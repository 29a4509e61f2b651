"""Message players: simulated-rig and bag message streams and real-time pacing.

A *player* feeds the online node (or anything that listens to the rig's topics) with the messages
a live rig would send.  It has three parts, the first two independent of the transport:

* **streams** of :class:`TimedMessage` -- :func:`rig_sim_messages` simulates the rig with a
  configuration's parameters and yields the joint states and the motor voltage as the rig's
  driver publishes them; :func:`driven_rig_messages` simulates a rig that obeys the input it is
  given, in real time; :func:`bag_messages` yields the messages of a rosbag2 bag;
* **pacing** -- :func:`play` hands the messages of a stream to a *sink* in real time (or scaled,
  or as fast as possible) and reports how late it was;
* **sinks** -- any callable ``sink(message)``; the rclpy sink
  :class:`~mb_estimation.ros.ros_player.RosSink` publishes on ROS 2 topics.

For example, a simulated swing-up printed as fast as it is simulated::

    play(rig_sim_messages(config, "swingup", duration_s=5.0), print, rate=0.0)

Message kinds (:attr:`TimedMessage.kind`) and their payloads:

* ``"joint_state"`` (``sensor_msgs/msg/JointState``): a :class:`JointStatePayload` (names tuple,
  positions, velocities and efforts as 1-D float64 arrays; velocities/efforts may be empty);
* ``"float64"`` (``std_msgs/msg/Float64``): a float;
* ``"float64_multiarray"`` (``std_msgs/msg/Float64MultiArray``): a tuple of floats (the layout is
  not kept; it is written empty).

The rooms: :mod:`.messages` (:class:`TimedMessage`, the kinds and payloads), :mod:`.rig_sim`
(the simulated rig's stream), :mod:`.bags` (a bag's stream) and :mod:`.pacing` (:func:`play`);
the rclpy sink is :class:`mb_estimation.ros.ros_player.RosSink` (it needs rclpy). Every
name is imported here; none needs rclpy.
"""

from mb_estimation.ros.players.bags import bag_messages, bag_topics
from mb_estimation.ros.players.messages import (
    FLOAT64,
    FLOAT64_MULTIARRAY,
    JOINT_STATE,
    KIND_BY_ROS_TYPE,
    KINDS,
    JointStatePayload,
    TimedMessage,
)
from mb_estimation.ros.players.pacing import MAX_SLEEP_S, PlayStats, play
from mb_estimation.ros.players.rig_sim import (
    DEFAULT_CHUNK_S,
    driven_rig_messages,
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
    "JointStatePayload",
    "PlayStats",
    "TimedMessage",
    "bag_messages",
    "bag_topics",
    "driven_rig_messages",
    "play",
    "rig_sim_messages",
    "rig_sim_topics",
]
