"""What the launch files share: inputs remapped to the rig, a lifecycle node driven through.

Needs the ROS 2 launch system (``launch``, ``launch_ros``): only the launch files import this.
"""

from __future__ import annotations

from launch.actions import EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.events import matches_action
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition

from mb_estimation.ros.ros_common import config_topics, input_remappings


def drive_lifecycle(node: LifecycleNode, *, what: str = "the estimator node",
                    when_active=()) -> list:
    """Actions that configure ``node``, activate it once configured, then run ``when_active``.

    A failed configure (the node logs why; ``what`` names the node in the launch's line) shuts
    the launch down with a non-zero exit status. Place them after ``node``.
    """
    def change(transition_id: int) -> EmitEvent:
        return EmitEvent(event=ChangeState(lifecycle_node_matcher=matches_action(node),
                                           transition_id=transition_id))

    def on(start_state: str, goal_state: str, entities: list) -> RegisterEventHandler:
        return RegisterEventHandler(OnStateTransition(
            target_lifecycle_node=node, start_state=start_state, goal_state=goal_state,
            entities=entities))

    return [
        on("configuring", "inactive", [change(Transition.TRANSITION_ACTIVATE)]),
        on("configuring", "unconfigured", [OpaqueFunction(function=_not_configured,
                                                          args=[what])]),
        on("activating", "active", list(when_active)),
        change(Transition.TRANSITION_CONFIGURE),
    ]


def _not_configured(context, what: str) -> None:
    """Fail the launch: the launch system shuts down and exits 1 on an action's exception."""
    raise RuntimeError(f"{what} could not be configured (its log says why)")


def rig_remappings(context) -> list[tuple[str, str]]:
    """The node's inputs remapped to the rig's topics, from the launch arguments.

    ``joint_states_topic`` and ``voltage_topic``, each where given, else the topic of the
    ``config`` (a path or a built-in name, found as the node finds it).
    """
    joint_topic, voltage_topic = config_topics(LaunchConfiguration("config").perform(context))
    return input_remappings(
        LaunchConfiguration("joint_states_topic").perform(context) or joint_topic,
        LaunchConfiguration("voltage_topic").perform(context) or voltage_topic)
