"""ROS 2 through rclpy: the lifecycle node, what its launch files use, the rig-sim and replay."""
