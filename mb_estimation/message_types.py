"""ROS 2 message type names the product reads and writes: one spelling for every layer.

Pure Python (no ROS, no middleware): the config validator, the bag reader and writer, the node
core and the rclpy transport name message types through these constants, and read the spellings
a user may write (``std_msgs/Float64``, ``std_msgs::msg::Float64``) through
:func:`normalise_message_type`.
"""

import re

JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64 = "std_msgs/msg/Float64"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"

#: The message types a motor voltage may arrive in (``recording.voltage_type``).
VOLTAGE_TYPES = (FLOAT64, FLOAT64_MULTI_ARRAY, JOINT_STATE)


def normalise_message_type(value: str) -> str:
    """``std_msgs/Float64`` and ``std_msgs::msg::Float64`` -> ``std_msgs/msg/Float64``."""
    parts = [p for p in re.split(r"/|::", value.strip()) if p]
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    return "/".join(parts)
