"""rosbag2 bags for the Furuta rig, with ``rosbags`` (no ROS install).

Split as ``rosbags`` splits its own: :mod:`.reader` (opening bags, summaries, reading topics and
joint states), :mod:`.writer` (:func:`write_rig_bag`, bags ROS 2 Humble and later read) and
:mod:`.common` (the Humble typestore and :class:`BagError`, which both use). Every problem
is a :class:`BagError` with a one-line message.
"""

from mb_estimation.io.bags.common import BagError
from mb_estimation.io.bags.reader import (
    BagSummary,
    JointStates,
    OpenBag,
    TopicSummary,
    matching_topic,
    read_bag_summary,
    read_float64,
    read_joint_states,
    read_topic,
    resolve_topic,
)
from mb_estimation.io.bags.writer import (
    METADATA_VERSION,
    STORAGES,
    VOLTAGE_TYPES,
    write_rig_bag,
)

__all__ = [
    "BagError",
    "BagSummary",
    "JointStates",
    "TopicSummary",
    "METADATA_VERSION",
    "OpenBag",
    "STORAGES",
    "VOLTAGE_TYPES",
    "matching_topic",
    "read_bag_summary",
    "read_float64",
    "read_joint_states",
    "read_topic",
    "resolve_topic",
    "write_rig_bag",
]
