"""Online (ROS 2 node) side of mb_estimation: real-time filtering alongside the estimator."""
