"""The online estimator on the rig: ``ros2 launch mb_estimation estimator.launch.py``.

Starts ``estimator_node`` (parameters, topics and services in
``mb_estimation/ros/ros_node.py``), a lifecycle node, and drives it: configure (load the
config, compile the solver), then activate (subscribe, publish). A failed configure ends the
launch (exit status 1). Launch arguments (``name:=value``):

* ``config``: the mb_estimation YAML configuration (default: the installed
  ``share/mb_estimation/config/furuta.yaml``; a built-in name such as ``furuta`` works too);
* ``joint_states_topic``, ``voltage_topic``: where the rig publishes its joint states and motor
  voltage; the node's inputs ``joint_states`` and ``control_voltage`` are remapped to them
  (empty, the default: the config's ``recording.joint_states_topic`` and
  ``recording.voltage_topic``);
* ``free`` (``NAME,NAME``), ``set`` (``NAME=VALUE,...``), ``compliance`` (0: the config's): the
  command line's ``--free``/``--set``/``--compliance``;
* the node's settings ``window_s``, ``stride_s``, ``drift_noise``, ``max_cost``,
  ``min_motion_rad``, ... (every name in ``ros_common.NODE_SETTINGS``; empty, the default: the
  config's value);
* ``use_sim_time`` (``false``);
* ``node_name`` (``mb_estimator``): topics and services live under ``/<node_name>/``.

Example::

    ros2 launch mb_estimation estimator.launch.py joint_states_topic:=/rig/joint_states
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.parameter_descriptions import ParameterValue

from mb_estimation.ros.ros_common import NODE_SETTINGS
from mb_estimation.ros.ros_launch import drive_lifecycle, rig_remappings

PACKAGE = "mb_estimation"


def _node_settings(context) -> dict:
    """The node settings given as launch arguments (the empty ones keep the config's)."""
    return {name: ParameterValue(LaunchConfiguration(name), value_type=setting.type)
            for name, setting in NODE_SETTINGS.items()
            if LaunchConfiguration(name).perform(context)}


def _estimator(context):
    node = LifecycleNode(
        package=PACKAGE,
        executable="estimator_node",
        name=LaunchConfiguration("node_name"),
        namespace="",
        output="screen",
        parameters=[{
            "config": ParameterValue(LaunchConfiguration("config"), value_type=str),
            "free": ParameterValue(LaunchConfiguration("free"), value_type=str),
            "set": ParameterValue(LaunchConfiguration("set"), value_type=str),
            "compliance": ParameterValue(LaunchConfiguration("compliance"), value_type=float),
            "use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool),
        }, _node_settings(context)],
        remappings=rig_remappings(context),
    )
    return [node, *drive_lifecycle(node)]


def generate_launch_description():
    """The estimator node with its launch arguments."""
    default_config = os.path.join(get_package_share_directory(PACKAGE), "config", "furuta.yaml")
    return LaunchDescription([
        DeclareLaunchArgument(
            "config", default_value=default_config,
            description="mb_estimation YAML configuration (path or built-in name)"),
        DeclareLaunchArgument(
            "joint_states_topic", default_value="",
            description="topic of the rig's sensor_msgs/JointState (empty: the config's "
                        "recording.joint_states_topic)"),
        DeclareLaunchArgument(
            "voltage_topic", default_value="",
            description="topic of the rig's motor voltage (empty: the config's "
                        "recording.voltage_topic)"),
        DeclareLaunchArgument(
            "free", default_value="",
            description="free parameters NAME,NAME (empty: the config's)"),
        DeclareLaunchArgument(
            "set", default_value="",
            description="values NAME=VALUE,... set before estimating"),
        DeclareLaunchArgument(
            "compliance", default_value="0.0",
            description="every hinge compliance; 0: the config's"),
        DeclareLaunchArgument(
            "use_sim_time", default_value="false",
            description="use /clock (bag replay with ros2 bag play --clock)"),
        DeclareLaunchArgument(
            "node_name", default_value="mb_estimator",
            description="node name: topics and services under /<node_name>/"),
        *(DeclareLaunchArgument(name, default_value="",
                                description=f"{setting.description} (empty: the config's "
                                            f"node.{name})")
          for name, setting in NODE_SETTINGS.items()),
        OpaqueFunction(function=_estimator),
    ])
