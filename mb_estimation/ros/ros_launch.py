"""What the launch files share: a lifecycle node (estimator, exciter) driven through its states.

Needs the ROS 2 launch system (``launch``, ``launch_ros``): only the launch files import this.
"""

from __future__ import annotations

from launch.actions import EmitEvent, LogInfo, RegisterEventHandler
from launch.events import Shutdown, matches_action
from launch_ros.actions import LifecycleNode
from launch_ros.event_handlers import OnStateTransition
from launch_ros.events.lifecycle import ChangeState
from lifecycle_msgs.msg import Transition


def drive_lifecycle(node: LifecycleNode, *, what: str = "the estimator node",
                    when_active=()) -> list:
    """Actions that configure ``node``, activate it once configured, then run ``when_active``.

    A failed configure (the node logs why; ``what`` names the node in the launch's line) shuts
    the launch down. Place them after ``node``.
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
        on("configuring", "unconfigured", [
            LogInfo(msg=f"{what} could not be configured (its log says why)"),
            EmitEvent(event=Shutdown(reason=f"{what} not configured"))]),
        on("activating", "active", list(when_active)),
        change(Transition.TRANSITION_CONFIGURE),
    ]
