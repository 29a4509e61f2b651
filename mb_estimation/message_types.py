"""ROS 2 message type names the product reads and writes: one spelling for every layer.

Pure Python (no ROS, no middleware): the config validator, the bag reader and writer, the node
core and the rclpy transport name message types through these constants, and read the spellings
a user may write (``std_msgs/Float64``, ``std_msgs::msg::Float64``) through
:func:`normalise_message_type`.
"""

import math
import re

JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64 = "std_msgs/msg/Float64"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"

#: The message types a motor voltage may arrive in (``recording.voltage_type``).
VOLTAGE_TYPES = (FLOAT64, FLOAT64_MULTI_ARRAY, JOINT_STATE)


#: The standard deviation published, and written in parameter files, for a direction the data
#: do not determine: ROS parameters and messages hold no infinity.
NOT_DETERMINED = -1.0


def published_std(std) -> float | list[float]:
    """A std (a number, or a vector's entries) as published and written.

    :data:`NOT_DETERMINED` where not finite; a single entry as a number.
    """
    entries = std.tolist() if hasattr(std, "tolist") else std
    entries = entries if isinstance(entries, list) else [entries]
    values = [float(s) if math.isfinite(float(s)) else NOT_DETERMINED for s in entries]
    return values[0] if len(values) == 1 else values


def normalise_message_type(value: str) -> str:
    """``std_msgs/Float64`` and ``std_msgs::msg::Float64`` -> ``std_msgs/msg/Float64``."""
    parts = [p for p in re.split(r"/|::", value.strip()) if p]
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    return "/".join(parts)
