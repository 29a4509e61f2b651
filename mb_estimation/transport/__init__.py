"""The online node's transport: rclpy (a ROS 2 install), its players and what they share."""
