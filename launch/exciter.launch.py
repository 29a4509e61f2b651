"""A designed experiment on the rig: ``ros2 launch mb_estimation exciter.launch.py``.

Starts ``exciter_node`` (``mb_estimation/ros/ros_exciter.py``), a lifecycle node, and drives
it: configure (read the config and the input file), then activate. From the first joint state
on it publishes the input file on the rig's input topic at the file's rate, faded in and out,
and stops with a zero input when the arm leaves its limits, a joint state is not finite, the
joint states stop arriving or ``/<node_name>/stop`` is called; at the end it calls the
estimator node's ``~/calibrate_now`` (start the estimator first: ``estimator.launch.py``).
A failed configure ends the launch (exit status 1). Launch arguments (``name:=value``):

* ``excitation`` (required): the input file, ``excite``'s ``excitation.csv``; its limits are read
  from the ``excitation.yaml`` beside it unless given here;
* ``config``: the mb_estimation YAML configuration (default: the installed
  ``share/mb_estimation/config/furuta.yaml``; a built-in name works too): the topics, the arm
  joint's name and sign, the input's message type;
* ``joint_states_topic``, ``voltage_topic``: the rig's joint states and input topic (empty, the
  default: the config's ``recording.joint_states_topic`` and ``recording.voltage_topic``);
* ``max_input``, ``max_arm_rad``, ``max_arm_rate`` (0, the default: excitation.yaml's limits),
  ``ramp_s`` (0.5), ``timeout_s`` (0.1);
* ``estimator`` (``/mb_estimator``; empty: no calibration at the end);
* ``node_name`` (``mb_exciter``).

Example::

    ros2 launch mb_estimation exciter.launch.py excitation:=design/excitation.csv \
        config:=my_rig.yaml max_arm_rad:=1.5
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.parameter_descriptions import ParameterValue

from mb_estimation.ros.ros_launch import drive_lifecycle, rig_remappings

PACKAGE = "mb_estimation"
#: Launch argument: (default, type, description).
SETTINGS = {
    "max_input": ("0.0", float, "largest input magnitude (0: excitation.yaml's)"),
    "max_arm_rad": ("0.0", float, "largest arm excursion from its start [rad] (0: "
                                  "excitation.yaml's, else none)"),
    "max_arm_rate": ("0.0", float, "largest arm rate [rad/s] (0: excitation.yaml's, else "
                                   "none)"),
    "ramp_s": ("0.5", float, "the input's bound fades in and out over this [s] (excite's "
                             "design is faded so already)"),
    "timeout_s": ("0.1", float, "stop when no joint state arrives for this long [s]"),
    "estimator": ("/mb_estimator", str, "the estimator node to calibrate at the end (empty: "
                                        "none)"),
}


def _exciter(context):
    node = LifecycleNode(
        package=PACKAGE,
        executable="exciter_node",
        name=LaunchConfiguration("node_name"),
        namespace="",
        output="screen",
        parameters=[{
            "config": ParameterValue(LaunchConfiguration("config"), value_type=str),
            "excitation": ParameterValue(LaunchConfiguration("excitation"), value_type=str),
            **{name: ParameterValue(LaunchConfiguration(name), value_type=kind)
               for name, (_, kind, _) in SETTINGS.items()},
        }],
        remappings=rig_remappings(context),
    )
    return [node, *drive_lifecycle(node, what="the exciter node")]


def generate_launch_description():
    """The exciter node with its launch arguments."""
    default_config = os.path.join(get_package_share_directory(PACKAGE), "config", "furuta.yaml")
    return LaunchDescription([
        DeclareLaunchArgument(
            "excitation", description="the input file (excite's excitation.csv)"),
        DeclareLaunchArgument(
            "config", default_value=default_config,
            description="mb_estimation YAML configuration (path or built-in name)"),
        DeclareLaunchArgument(
            "joint_states_topic", default_value="",
            description="topic of the rig's sensor_msgs/JointState (empty: the config's "
                        "recording.joint_states_topic)"),
        DeclareLaunchArgument(
            "voltage_topic", default_value="",
            description="the rig's input topic (empty: the config's recording.voltage_topic)"),
        DeclareLaunchArgument(
            "node_name", default_value="mb_exciter",
            description="node name: its stop service is /<node_name>/stop"),
        *(DeclareLaunchArgument(name, default_value=default, description=description)
          for name, (default, _, description) in SETTINGS.items()),
        OpaqueFunction(function=_exciter),
    ])
