"""The online node's core, without ROS: buffers, windows, fusion, the real-time filter."""
