"""Online calibration from a bag: ``ros2 launch mb_estimation bag_calibration.launch.py bag:=B``.

Runs ``estimator_node`` (as ``/mb_estimator``, ``use_sim_time``) on a replayed rosbag2 bag and
leaves the fused estimate in ``output`` as ``calibrate`` would (``parameters.yaml`` and
``ros_parameters.yaml``, see ``write_fused`` in ``mb_estimation/ros/ros_common.py``):

1. the node (a lifecycle node) is configured (it loads the config and compiles the solver) and
   activated (it subscribes); on its transition to active the bag is played by the ``player``:
   ``rosbag2`` (default) runs ``ros2 bag play <bag> --clock 1000 --rate <rate>`` and the node
   runs on that sim time; ``mb_estimation`` runs the package's own rclpy player,
   ``mb-estimation replay <bag> --rate <rate>`` (header stamps kept; no ``/clock``, so the node
   keeps the system time -- the windows are cut on the joint states' stamps either way), for
   machines without rosbag2;
2. after each accepted window the node rewrites the files in ``output`` (its ``output_dir``);
3. when the bag has been played, ``~/calibrate_now`` is called (one more window over the newest
   buffered data; :func:`~mb_estimation.ros.ros_player.call_trigger`, which needs no ``ros2``
   command line), and after a short grace period the launch shuts down: the node first
   estimates the windows already cut (``DRAIN_TIMEOUT_S``), writes the files once more and exits.

If the node exits on its own (a bad configuration), the launch shuts down too.

Launch arguments: ``bag`` (required: a bag folder or ``.db3``/``.mcap`` file), ``config``
(default: the installed ``share/mb_estimation/config/furuta.yaml``; its ``recording`` topics
must be the bag's), ``rate`` (playback speed, default 1.0), ``output`` (default
``./mb_estimation_calibration``, relative to where the launch was started) and ``player``
(``rosbag2`` or ``mb_estimation``).
"""

import os
import sys

from ament_index_python.packages import get_package_share_directory
from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    ExecuteProcess,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
    TimerAction,
)
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.parameter_descriptions import ParameterValue

from mb_estimation.ros.ros_common import DRAIN_TIMEOUT_S, config_topics, input_remappings
from mb_estimation.ros.ros_launch import drive_lifecycle

PACKAGE = "mb_estimation"
NODE_NAME = "mb_estimator"
CLOCK_HZ = "1000"
GRACE_S = 2.0  # after ~/calibrate_now answered, before the shutdown


PLAYERS = ("rosbag2", "mb_estimation")


def _player(context):
    """The bag player's command, and whether the node runs on its /clock."""
    player = LaunchConfiguration("player").perform(context)
    bag, rate = (LaunchConfiguration(name).perform(context) for name in ("bag", "rate"))
    if player == "rosbag2":
        return ["ros2", "bag", "play", bag, "--clock", CLOCK_HZ, "--rate", rate], True
    if player == "mb_estimation":
        return [sys.executable, "-m", "mb_estimation.cli", "replay", bag, "--rate", rate], False
    raise ValueError(f"player:={player}: expected one of {', '.join(PLAYERS)}")


def _end_with_the_node(event, context):
    """The node exited: shut down, unless the launch is already (one Shutdown event only)."""
    if context.is_shutdown:
        return None
    return [EmitEvent(event=Shutdown(reason="estimator node exited"))]


def _calibration(context):
    output = os.path.abspath(os.path.expanduser(LaunchConfiguration("output").perform(context)))
    player, sim_time = _player(context)
    node = LifecycleNode(
        package=PACKAGE,
        executable="estimator_node",
        name=NODE_NAME,
        namespace="",
        output="screen",
        parameters=[{
            "config": ParameterValue(LaunchConfiguration("config"), value_type=str),
            "output_dir": output,
            "use_sim_time": sim_time,
        }],
        # the inputs on the bag's topics, which the config's recording section names
        remappings=input_remappings(*config_topics(LaunchConfiguration("config").perform(
            context))),
        # the node drains its cut windows on SIGINT before writing the final files
        sigterm_timeout=str(int(DRAIN_TIMEOUT_S) + 30),
    )
    bag_play = ExecuteProcess(cmd=player, name="bag_play", output="screen")
    calibrate_now = ExecuteProcess(
        cmd=[sys.executable, "-c", "import sys; from mb_estimation.ros.ros_player import "
             "call_trigger; sys.exit(call_trigger())", f"/{NODE_NAME}/calibrate_now"],
        name="calibrate_now",
        output="screen",
    )
    return [
        node,
        *drive_lifecycle(node, when_active=[LogInfo(msg="estimator active: playing the bag"),
                                            bag_play]),
        RegisterEventHandler(OnProcessExit(
            target_action=bag_play,
            on_exit=[LogInfo(msg="bag played: final window over the buffered data"),
                     calibrate_now])),
        RegisterEventHandler(OnProcessExit(
            target_action=calibrate_now,
            on_exit=[TimerAction(period=GRACE_S, actions=[
                LogInfo(msg=f"writing the fused estimate to {output} and shutting down"),
                EmitEvent(event=Shutdown(reason="bag calibration finished"))])])),
        RegisterEventHandler(OnProcessExit(target_action=node, on_exit=_end_with_the_node)),
    ]


def generate_launch_description():
    """The estimator node, the bag player and the end-of-bag sequence."""
    default_config = os.path.join(get_package_share_directory(PACKAGE), "config", "furuta.yaml")
    return LaunchDescription([
        DeclareLaunchArgument(
            "bag", description="rosbag2 bag to calibrate from (folder or .db3/.mcap file)"),
        DeclareLaunchArgument(
            "config", default_value=default_config,
            description="mb_estimation YAML configuration (path or built-in name)"),
        DeclareLaunchArgument(
            "rate", default_value="1.0", description="playback speed factor"),
        DeclareLaunchArgument(
            "output", default_value="./mb_estimation_calibration",
            description="folder for parameters.yaml and ros_parameters.yaml"),
        DeclareLaunchArgument(
            "player", default_value="rosbag2", choices=list(PLAYERS),
            description="rosbag2: ros2 bag play --clock; mb_estimation: the package's own "
                        "rclpy replay (no rosbag2 needed)"),
        OpaqueFunction(function=_calibration),
    ])
