"""ROS 2 message type names the product reads and writes: one spelling for every layer.

Pure Python (no ROS, no DDS): the config validator, the bag reader and writer, the node core
and both transports name message types through these constants.
"""

JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64 = "std_msgs/msg/Float64"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"

#: The message types a motor voltage may arrive in (``recording.voltage_type``).
VOLTAGE_TYPES = (FLOAT64, FLOAT64_MULTI_ARRAY, JOINT_STATE)
