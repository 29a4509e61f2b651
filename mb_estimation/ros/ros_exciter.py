"""``exciter_node``: plays a designed input on the rig, within its limits, then calibrates.

A managed (lifecycle) node around :class:`~mb_estimation.online.exciter.Exciter` (the state and
the safety rules, without ROS). ``configure`` reads the config and the input file
(``excite``'s ``excitation.csv``; its limits from the ``excitation.yaml`` beside it unless the
parameters say otherwise) and makes the input publisher and the ``~/stop`` service;
``activate`` starts a fresh run: it subscribes to the joint states and starts a timer at the
file's rate (``deactivate`` stops the run and removes both); the input plays from the first
joint state on, faded in and out, and stops for good with a zero on the
input topic when the arm leaves its limits, a joint state is not finite, the joint states stop
arriving, ``~/stop`` is called or the node is deactivated. Played to its end, it calls the
estimator node's ``~/calibrate_now`` and logs its answer. By hand::

    ros2 run mb_estimation exciter_node --ros-args -p config:=furuta.yaml \
        -p excitation:=design/excitation.csv -p autostart:=true

Its parameters, topics and services are described in ``docs/node.md`` ("The exciter").
"""

from __future__ import annotations

import math
import sys
import time

try:
    import rclpy
except ModuleNotFoundError as error:  # the console script on a machine without ROS 2
    raise ModuleNotFoundError(
        "the exciter node needs rclpy: pip install 'mb_estimation[ros]' or source a ROS 2 "
        "installation (Humble or newer)", name="rclpy") from error
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import qos_profile_sensor_data
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray
from std_srvs.srv import Trigger

from mb_estimation.config import load_config
from mb_estimation.errors import first_line
from mb_estimation.fade import RAMP_S
from mb_estimation.message_types import FLOAT64, JOINT_STATE
from mb_estimation.online.exciter import (
    DONE,
    STOPPED,
    ExcitationRun,
    Exciter,
    excitation_run,
)
from mb_estimation.ros.ros_common import (
    JOINT_STATES_INPUT,
    VOLTAGE_INPUT,
    StopSignals,
    logged_transition,
)
from mb_estimation.ros.ros_player import try_shutdown

NODE_NAME = "mb_exciter"
READY_MARKER = "mb_estimation exciter ready"
#: After the input's end, the estimator is asked to calibrate this much later [s], so that
#: the last joint states are in its buffer.
SETTLE_S = 0.5
#: This long after activation the estimator's ``~/calibrate_now`` must be seen [s] (DDS
#: discovery takes a fraction of it); else a warning says the run will not be calibrated.
ESTIMATOR_SEEN_S = 2.0
SPIN_PERIOD_S = 0.05
#: How long the last zero is given to leave before its publisher is destroyed [s].
ZERO_SETTLE_S = 0.05
#: The watchdog runs out this long after the joint-state timeout [s] (a timer may fire a
#: little early; the stream counts as lost only after the whole timeout).
WATCHDOG_MARGIN_S = 0.002
#: The parameters (name: default, description); a limit of 0 takes the excitation.yaml's.
PARAMETERS = {
    "config": ("", "the mb_estimation configuration (path or built-in name): topics, joints"),
    "excitation": ("", "the input file (excite's excitation.csv: time_s,input)"),
    "max_input": (0.0, "largest input magnitude [input units] (0: excitation.yaml's)"),
    "max_arm_rad": (0.0, "largest arm excursion from its start [rad] (0: excitation.yaml's, "
                         "else none)"),
    "max_arm_rate": (0.0, "largest arm rate [rad/s] (0: excitation.yaml's, else none)"),
    "ramp_s": (RAMP_S, "the input's bound fades in and out over this [s] (excite's design is "
                       "faded so already)"),
    "timeout_s": (0.1, "stop when no joint state arrives for this long [s]"),
    "estimator": ("/mb_estimator", "the estimator node whose ~/calibrate_now is called at the "
                                   "end (empty: none)"),
    "autostart": (False, "configure and activate at start"),
}


class ExciterNode(LifecycleNode):
    """The exciter on rclpy; its transitions as the module says. ``clock``: seconds, monotonic.

    A transition that raises is logged (rclpy would turn it into ERROR silently) and fails.
    """

    def __init__(self, *, node_name: str = NODE_NAME, clock=time.monotonic, **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        for name, (default, description) in PARAMETERS.items():
            self.declare_parameter(name, default, ParameterDescriptor(description=description))
        self._monotonic = clock
        self.exciter: Exciter | None = None
        self._publisher = self._input_message = None
        self._made: list = []  # (destroy, entity) made by configure
        self._active: list = []  # ... and by activate
        self.finalized = False  # the lifecycle shutdown ran: main stops spinning
        self._run: ExcitationRun | None = None
        self._arm: tuple[str, int] | None = None  # recorded name and sign of the arm joint
        self._calibration = None  # the pending ~/calibrate_now call
        self._calibrate_client = None
        self._ended_s: float | None = None
        self._estimator_due_s: float | None = None  # when to look for the estimator (once)
        self._watchdog = None

    def _parameter(self, name):
        return self.get_parameter(name).value

    # --- transitions -------------------------------------------------------------------

    @logged_transition
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Read the config and the input; make the input publisher and ``~/stop``."""
        try:
            config = load_config(self._parameter("config") or _missing("config"))
            recording = config.recording
            if recording.voltage_type == JOINT_STATE:
                raise ValueError(f"config {config.source}: the rig's input travels in the joint "
                                 "states' effort; the exciter publishes on a command topic "
                                 "(recording.voltage_type Float64 or Float64MultiArray)")
            arm = recording.joints[config.rig_spec.joints[0]]
            run = excitation_run(self._parameter("excitation") or _missing("excitation"),
                                 **{name: self._parameter(name) for name in (
                                     "max_input", "max_arm_rad", "max_arm_rate", "ramp_s",
                                     "timeout_s")})
        except Exception as error:  # ConfigError, UserError, ValueError: one line
            self.get_logger().fatal(" ".join(first_line(error).split()))
            return TransitionCallbackReturn.FAILURE
        self._arm, self._run = (arm.name, arm.sign), run
        if recording.voltage_type == FLOAT64:
            kind, self._input_message = Float64, lambda value: Float64(data=value)
        else:
            index = int(recording.voltage_index)
            kind = Float64MultiArray
            self._input_message = lambda value: Float64MultiArray(data=[0.0] * index + [value])
        self._publisher = self.create_publisher(kind, VOLTAGE_INPUT, 10)
        self._made = [(self.destroy_publisher, self._publisher),
                      (self.destroy_service, self.create_service(Trigger, "~/stop",
                                                                 self._on_stop))]
        estimator = self._parameter("estimator")
        if estimator:
            self._calibrate_client = self.create_client(
                Trigger, f"{estimator.rstrip('/')}/calibrate_now")
            self._made.append((self.destroy_client, self._calibrate_client))
        return TransitionCallbackReturn.SUCCESS

    @logged_transition
    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A fresh run: subscribe to the joint states and start the timers; the input plays."""
        run = self._run
        self.exciter, self._ended_s, self._calibration = Exciter(run), None, None
        if self._calibrate_client is not None:
            self._estimator_due_s = self._monotonic() + ESTIMATOR_SEEN_S
        # a lost stream is seen when the watchdog, restarted by every joint state, runs out
        self._watchdog = self.create_timer(run.timeout_s + WATCHDOG_MARGIN_S, self._tick)
        self._active = [
            (self.destroy_timer, self._watchdog),
            (self.destroy_timer, self.create_timer(1.0 / run.rate_hz, self._tick)),
            (self.destroy_subscription, self.create_subscription(
                JointState, JOINT_STATES_INPUT, self._on_joint_state, qos_profile_sensor_data))]
        limits = ", ".join(f"{name} {value:g}" for name, value in (
            ("input", run.max_input), ("arm rad", run.max_arm_rad),
            ("arm rad/s", run.max_arm_rate)) if value is not None)
        self.get_logger().info(
            f"{READY_MARKER}: {run.duration_s:g} s of input at {run.rate_hz:g} Hz on "
            f"{self._publisher.topic_name} from the first joint state on "
            f"{self.resolve_topic_name(JOINT_STATES_INPUT)}; limits: {limits}")
        return TransitionCallbackReturn.SUCCESS

    @logged_transition
    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop the run (a zero input), the timers and the subscription."""
        self._halt("deactivated")
        self._active = _destroyed(self._active)
        return TransitionCallbackReturn.SUCCESS

    @logged_transition
    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Remove what configure made (back to unconfigured)."""
        self._halt("cleaned up")
        self._made = _destroyed(self._made)
        self._publisher = self._calibrate_client = None
        return TransitionCallbackReturn.SUCCESS

    @logged_transition
    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Zero the input, then remove the timers, subscription and publisher.

        The process ends: a finalized exciter must not share the command topic with the
        controller that drives the rig next.
        """
        self._halt("shut down")
        time.sleep(ZERO_SETTLE_S)  # let the zero leave before the publisher goes
        self._active = _destroyed(self._active)
        self._made = _destroyed(self._made)
        self._publisher = self._calibrate_client = None
        self.finalized = True
        return TransitionCallbackReturn.SUCCESS

    # --- the input -----------------------------------------------------------------------

    def _publish(self, value: float) -> None:
        if self._publisher is not None:
            self._publisher.publish(self._input_message(float(value)))

    def _halt(self, reason: str) -> None:
        """Stop the run (if it still plays) and publish zero, then log it."""
        was = self.exciter.state if self.exciter is not None else None
        if self.exciter is not None:
            self.exciter.stop(reason)
        self._publish(0.0)
        self._report(was)

    def _on_joint_state(self, message: JointState) -> None:
        """Answer the rig's sample with its input (zero where that stops the run)."""
        name, sign = self._arm
        try:
            index = list(message.name).index(name)
        except ValueError:
            return  # another driver's joints
        rate = sign * message.velocity[index] if len(message.velocity) > index else None
        finite = all(math.isfinite(v) for v in (*message.position, *message.velocity))
        stamp = message.header.stamp.sec + 1e-9 * message.header.stamp.nanosec
        self._watchdog.reset()
        was = self.exciter.state
        self._publish(self.exciter.joint_state(self._monotonic(), stamp,
                                               sign * message.position[index], rate, finite))
        self._report(was)

    def _on_stop(self, request, response):
        self._halt("stopped on ~/stop")
        response.success = True
        response.message = f"input zero ({self.exciter.state if self.exciter else 'unconfigured'})"
        return response

    def _tick(self) -> None:
        """Zeros while not playing; a lost joint-state stream stops the run here."""
        now = self._monotonic()
        was = self.exciter.state
        value = self.exciter.tick(now)
        if value is not None:
            self._publish(value)
        self._report(was)
        if self._estimator_due_s is not None and now >= self._estimator_due_s:
            self._estimator_due_s = None
            self._warn_without_estimator()
        if (self._ended_s is not None and now - self._ended_s >= SETTLE_S
                and self._calibrate_client is not None and self._calibration is None):
            self._calibration = self._calibrate()

    def _report(self, was: str | None) -> None:
        """Log a stop or the end (once), and note when it ended."""
        exciter = self.exciter
        if exciter is None or exciter.state == was:
            return
        if exciter.state == STOPPED:
            self.get_logger().warning(f"exciter stopped: {exciter.reason}; input zero")
        elif exciter.state == DONE:
            self._ended_s = self._monotonic()
            self.get_logger().info(
                f"exciter done: {exciter.run.duration_s:g} s played, the arm at most "
                f"{exciter.arm_peak_rad:.3g} rad from its start and {exciter.arm_rate_peak:.3g} "
                "rad/s; input zero")

    def _warn_without_estimator(self) -> None:
        """Warn where the estimator asked to calibrate at the run's end is not running."""
        client = self._calibrate_client
        if client is not None and not client.service_is_ready():
            self.get_logger().warning(
                f"exciter: {client.srv_name} is not available {ESTIMATOR_SEEN_S:g} s after "
                "activation: the run plays, but is calibrated at its end only if the estimator "
                "runs by then (else record the run and calibrate the bag)")

    def _calibrate(self):
        """Call the estimator's ``~/calibrate_now``; its answer is logged when it comes."""
        client, service = self._calibrate_client, self._calibrate_client.srv_name
        if not client.service_is_ready():
            self.get_logger().error(f"exciter: {service} is not available: the estimator "
                                    "node is not running (calibrate from a recording instead)")
            return False
        future = client.call_async(Trigger.Request())

        def report(done):
            response = done.result()
            log = self.get_logger().info if response.success else self.get_logger().error
            log(f"exciter: {service}: {response.message}")
        future.add_done_callback(report)
        self.get_logger().info(f"exciter: calling {service}")
        return future


def _destroyed(made: list) -> list:
    """Destroy each ``(destroy, entity)``, the last made first; an empty list."""
    for destroy, entity in reversed(made):
        destroy(entity)
    return []


def _missing(name: str):
    raise ValueError(f"parameter {name} is not set (--ros-args -p {name}:=...)")


def main(argv: list[str] | None = None) -> int:
    """Run the exciter until SIGINT/SIGTERM; 2 when an autostart configure fails."""
    stop = StopSignals()
    argv = list(sys.argv if argv is None else argv)
    try:
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as error:  # a ROS argument rclpy cannot parse, a missing params file
        rclpy.logging.get_logger(NODE_NAME).fatal(" ".join(first_line(error).split()))
        return 2
    node = None
    status = 0
    try:
        node = ExciterNode()
        if node.get_parameter("autostart").value:
            if node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                node.trigger_activate()
            else:
                status = 2
        if status == 0:
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            while not stop and rclpy.ok() and not node.finalized:
                executor.spin_once(timeout_sec=SPIN_PERIOD_S)
    except ExternalShutdownException:
        pass
    finally:
        if node is not None:
            node._halt("the node ends")
            time.sleep(ZERO_SETTLE_S)  # let the zero leave before the publisher goes
            node.destroy_node()
        try_shutdown()
    return status


if __name__ == "__main__":
    sys.exit(main())
