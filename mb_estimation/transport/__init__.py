"""Transports of the online node: rclpy (on a ROS 2 install) and bare DDS (cyclonedds)."""
