"""What the launch files share: inputs remapped to the rig, a lifecycle node driven through.

Needs the ROS 2 launch system (``launch``, ``launch_ros``): only the launch files import this.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from launch.actions import OpaqueFunction, RegisterEventHandler
from launch.event import Event
from launch.event_handler import EventHandler
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode
from launch_ros.ros_adapters import get_ros_node
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState

from mb_estimation.ros.ros_common import config_topics, input_remappings

#: The transitions :func:`drive_lifecycle` asks for, in order, and what a refusal means.
TRANSITIONS = ((Transition.TRANSITION_CONFIGURE, "could not be configured (its log says why)"),
               (Transition.TRANSITION_ACTIVATE, "could not be activated (its log says why)"))
_POLL_S = 1.0  # how often a wait looks whether the launch is shutting down


class _Activated(Event):
    """Emitted by :func:`drive_lifecycle` once its node answered that it is active."""

    name = "mb_estimation.ros.ros_launch.Activated"

    def __init__(self, node: LifecycleNode) -> None:
        super().__init__()
        self.node = node


class _Refused(Event):
    """Emitted by :func:`drive_lifecycle` when its node refused a transition (``message``)."""

    name = "mb_estimation.ros.ros_launch.Refused"

    def __init__(self, node: LifecycleNode, message: str) -> None:
        super().__init__()
        self.node = node
        self.message = message


def _fail(context) -> None:
    """Raise the refusal of the event handled: the launch ends with exit status 1."""
    raise RuntimeError(context.locals.event.message)


def drive_lifecycle(node: LifecycleNode, *, what: str = "the estimator node",
                    when_active=()) -> list:
    """Actions that configure ``node``, activate it once configured, then run ``when_active``.

    Each transition is asked for through the node's ``change_state`` service and judged by
    the service's answer. A refused one (the node logs why; ``what`` names the node in the
    launch's line) shuts the launch down with a non-zero exit status. Not by the node's
    ``transition_event`` messages, as launch_ros's ``OnStateTransition`` is: a node whose
    configure fails at once (a missing config) may publish its event before the launch's
    subscription is matched to it, and a launch waiting for that event would wait for ever.
    The refusal is raised while the launch handles an event, not in the thread that waited for
    the answer: launch drops a finished thread's future without reading its exception when it
    finished while events were queued, and the launch then ran on. Place them after ``node``.
    """
    def start(context) -> None:
        ros_node = get_ros_node(context)
        service = f"{node.node_name}/change_state"

        def run() -> None:
            refused = change_states(ros_node, service, [t for t, _ in TRANSITIONS],
                                    stopped=lambda: context.is_shutdown)
            if context.is_shutdown:
                return
            event = (_Activated(node) if refused is None
                     else _Refused(node, f"{what} {dict(TRANSITIONS)[refused]}"))
            context.asyncio_loop.call_soon_threadsafe(lambda: context.emit_event_sync(event))

        context.add_completion_future(context.asyncio_loop.run_in_executor(None, run))

    return [
        RegisterEventHandler(EventHandler(
            matcher=lambda event: isinstance(event, _Activated) and event.node is node,
            entities=list(when_active))),
        RegisterEventHandler(EventHandler(
            matcher=lambda event: isinstance(event, _Refused) and event.node is node,
            entities=[OpaqueFunction(function=_fail)])),
        OpaqueFunction(function=start),
    ]


def change_states(ros_node, service: str, transitions: list[int],
                  stopped: Callable[[], bool]) -> int | None:
    """Ask ``service`` (a ``lifecycle_msgs/ChangeState``) for each transition in turn.

    Returns the first transition the node refused, or None: all made, or ``stopped()`` became
    true while waiting for the service or an answer (the launch shutting down). ``ros_node``
    is spun elsewhere (the launch's own node is).
    """
    client = ros_node.create_client(ChangeState, service)
    try:
        while not client.wait_for_service(timeout_sec=_POLL_S):
            if stopped():
                return None
        for transition in transitions:
            answered = threading.Event()
            request = ChangeState.Request()
            request.transition.id = transition
            future = client.call_async(request)
            future.add_done_callback(lambda _, answered=answered: answered.set())
            while not answered.wait(_POLL_S):
                if stopped():
                    future.cancel()
                    return None
            if not future.result().success:
                return transition
        return None
    finally:
        ros_node.destroy_client(client)


def rig_remappings(context) -> list[tuple[str, str]]:
    """The node's inputs remapped to the rig's topics, from the launch arguments.

    ``joint_states_topic`` and ``voltage_topic``, each where given, else the topic of the
    ``config`` (a path or a built-in name, found as the node finds it).
    """
    joint_topic, voltage_topic = config_topics(LaunchConfiguration("config").perform(context))
    return input_remappings(
        LaunchConfiguration("joint_states_topic").perform(context) or joint_topic,
        LaunchConfiguration("voltage_topic").perform(context) or voltage_topic)
