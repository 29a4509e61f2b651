"""``estimator_node`` (``ros2 run mb_estimation estimator_node``): the online node on rclpy.

:class:`EstimatorNode` wraps the transport-neutral core
(:class:`~mb_estimation.online.core.EstimatorCore`); its parameters, subscriptions and messages
are made by the ``ros_parameters``, ``ros_inputs`` and ``ros_messages`` modules beside it,
what needs no ROS 2 is in ``ros_common``.

**A managed (lifecycle) node.** It starts unconfigured; ``configure`` loads the configuration,
declares the other parameters, makes the publishers, services and ``estimate.*`` parameters and
compiles the solver (``node.warm_up``); ``activate`` subscribes to the inputs and enables the
publishers (the ready line); ``deactivate`` unsubscribes; ``cleanup`` stops the worker and removes
what configure made; ``shutdown`` (or SIGINT/SIGTERM) stops it, writing the files once more. The
launch files drive these transitions; ``mb-estimation node`` sets ``autostart``. By hand::

    ros2 run mb_estimation estimator_node --ros-args -p config:=/path/to/furuta.yaml \
        -p autostart:=true -r joint_states:=/joint_states -r control_voltage:=/control_voltage

Its parameters (``config``, ``autostart``, ``robot_description``, the overrides,
``output_dir``, ``push.*``, the
node settings), the ``estimate.*``/``estimate_std.*`` outputs, its topics and its services are
described in ``docs/node.md``. The estimate parameters are read-only for everybody but the
node, which is not what ``ParameterDescriptor.read_only`` gives
(:mod:`mb_estimation.ros.ros_parameters` says why and how).

*Threads.* The core's worker thread calls the outputs. Publishing from it is allowed in rclpy
(the diagnostics publisher, shared with the 1 Hz timer, is guarded by a lock). Parameter updates,
the ``output_dir`` files and the push are not done on the worker: it hands the newest fused
estimate over under a lock and triggers a guard condition, whose callback runs on the executor in
the node's *default* callback group -- the group of rclpy's parameter services -- so an update
never interleaves with a get/set/list/describe request, and the worker never waits on ROS.
:func:`main` spins the node on a ``SingleThreadedExecutor`` (at 1 kHz rclpy's
``MultiThreadedExecutor`` starved the inputs in measurements); the callback
groups keep it correct where a user adds it to a multi-threaded one.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable

try:
    import rclpy
except ModuleNotFoundError as error:  # the console script on a machine without ROS 2
    raise ModuleNotFoundError(
        "the rclpy node needs rclpy: pip install 'mb_estimation[ros]' or source a ROS 2 "
        "installation (Humble or newer)",
        name="rclpy") from error
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from mb_estimation.config import Config
from mb_estimation.errors import first_line
from mb_estimation.numerics import configure_jax
from mb_estimation.online.adapter import ShadowFanout
from mb_estimation.online.core import (
    STOP_WAIT_S,
    EstimatorCore,
    NodeOutputs,
    estimate_window,
    leave_now,
)
from mb_estimation.online.fusion import ParameterEstimate
from mb_estimation.online.messages import warm_up_message, window_message
from mb_estimation.ros.ros_common import (
    COMPILING_MARKER,
    DEFAULT_NODE_NAME,
    DRAIN_TIMEOUT_S,
    READY_MARKER,
    StopSignals,
    logged_transition,
    write_fused,
)
from mb_estimation.ros.ros_inputs import RosInputs
from mb_estimation.ros.ros_messages import (
    diagnostic_array,
    joint_state_message,
    parameter_message,
    rate_message,
)
from mb_estimation.ros.ros_parameters import (
    EstimateParameters,
    ParameterPush,
    declare_config_parameters,
    declare_node_parameters,
    node_config,
)
from mb_estimation.ros.ros_player import ros_sink, run_ros_player, try_shutdown

__all__ = ["EstimatorNode", "main", "ros_sink", "run_ros_player"]

DIAGNOSTICS_PERIOD_S = 1.0
SHADOW_DEPTH = 2000
#: The main loop looks for a stop signal at least this often [s].
SPIN_PERIOD_S = 0.1


class EstimatorNode(LifecycleNode):
    """The estimator as a managed (lifecycle) node on rclpy: its transitions as the module says.

    Made unconfigured, with the ``config`` and ``autostart`` parameters declared; ``config``
    given here (tests) replaces the parameter; the warm-up compile is abandoned when
    ``stop_requested()`` turns true. ``estimator`` replaces the window estimator (tests); other
    keyword arguments go to ``rclpy.lifecycle.LifecycleNode`` (``context``, ...).
    """

    def __init__(self, config: Config | None = None, *, estimator=estimate_window,
                 node_name: str | None = None,
                 stop_requested: Callable[[], bool] = lambda: False, **node_kwargs) -> None:
        super().__init__(node_name or (config.node.name if config else DEFAULT_NODE_NAME),
                         **node_kwargs)
        self._given_config = config
        self._estimator = estimator
        self._stop_requested = stop_requested
        self._closing = False
        self._extra: Counter[str] = Counter()  # the node's own counters (diagnostics)
        self._extra_lock = threading.Lock()
        self._handoff = threading.Lock()
        self._pending_fused: tuple[ParameterEstimate, int] | None = None
        self._diagnostics_lock = threading.Lock()
        self._accepted_here = False
        self._made: list[tuple[Callable, object]] = []  # (destroy, entity) made by configure
        self.core: EstimatorCore | None = None
        self._retired: EstimatorCore | None = None  # the core the last cleanup removed
        self.config: Config | None = None
        self._inputs: RosInputs | None = None
        self._estimates: EstimateParameters | None = None
        self._push: ParameterPush | None = None
        #: why the last configure failed (None: it did not)
        self.configure_error: str | None = None
        #: the lifecycle shutdown ran (finalized: :func:`main` stops spinning and returns)
        self.finalized = False
        declare_config_parameters(self, config.source if config else "")
        self._inputs_group = MutuallyExclusiveCallbackGroup()
        self._control_group = MutuallyExclusiveCallbackGroup()

    # --- transitions -------------------------------------------------------------------

    @logged_transition
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Load the config, make the core and outputs, compile; FAILURE says why in the log."""
        self.configure_error = None
        try:
            parameters = declare_node_parameters(
                self, self._given_config or node_config(self))
        except Exception as error:  # ConfigError, a parameter of the wrong type, ...
            self.configure_error = " ".join(first_line(error).split()) or type(error).__name__
            self.get_logger().fatal(self.configure_error)
            return TransitionCallbackReturn.FAILURE
        self.config = config = parameters.config
        self.output_dir = parameters.output_dir
        self._closing = False
        self._accepted_here = False
        self._make_outputs()
        self._push = ParameterPush(self, parameters.push_target, parameters.push_mapping,
                                   count=self._count, report=self.core.on_message_error)
        self._estimates = EstimateParameters(self, config, self.core.fused)
        if config.node.warm_up:
            self.get_logger().info(f"{COMPILING_MARKER} for {config.node.window_s:g} s windows "
                                   f"of {', '.join(config.free)}")
        self.core.start()
        while "warming_up" in self.core.diagnostics():
            if self._stop_requested():
                return TransitionCallbackReturn.FAILURE
            time.sleep(SPIN_PERIOD_S / 2)
        return super().on_configure(state)

    @logged_transition
    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Subscribe to the inputs and enable the publishers; log the ready line."""
        self._inputs = RosInputs(self, self.core, self._inputs_group)
        result = super().on_activate(state)
        config = self.config
        inputs = ", ".join(f"{what} on {topic}" for what, topic in
                           zip(("joint states", "voltage"), self._inputs.topics, strict=False))
        self.get_logger().info(
            f"{READY_MARKER}: {inputs}; estimating {', '.join(config.free)} every "
            f"{config.node.stride_s:g} s; "
            + (warm_up_message(self.core.diagnostics()) or "no warm-up (node.warm_up "
               "false): the first window compiles the solver"))
        return result

    @logged_transition
    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Unsubscribe and disable the publishers (the worker finishes the cut windows)."""
        self._unsubscribe()
        return super().on_deactivate(state)

    @logged_transition
    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop the worker and remove what configure made (back to unconfigured)."""
        self._unconfigure()
        return super().on_cleanup(state)

    @logged_transition
    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop as :meth:`close` does (the cut windows, then the files), and remove the rest.

        What configure made goes (nothing is published once finalized), and :func:`main`
        stops spinning: the process ends, as after Ctrl-C.
        """
        self._unsubscribe()
        self.close(abandon_drain=self._stop_requested)
        if self.core is not None:
            self._remove_outputs()
        self.finalized = True
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """A transition raised: unsubscribe, stop, remove what configure made (unconfigured)."""
        self._unconfigure()
        return TransitionCallbackReturn.SUCCESS

    def _unsubscribe(self) -> None:
        if self._inputs is not None:
            self._inputs.close()
            self._inputs = None

    def _unconfigure(self) -> None:
        """Back to what the constructor made: no inputs, no worker, no outputs."""
        self._unsubscribe()
        self.close(drain=False)
        self._remove_outputs()

    def _make_outputs(self) -> None:
        """The core, the publishers, services, timer and guard condition of a configure."""
        def made(entity, destroy):
            self._made.append((destroy, entity))
            return entity

        def publisher(message, topic, qos):
            return made(self.create_lifecycle_publisher(message, topic, qos),
                        self.destroy_lifecycle_publisher)

        # the latest value for a subscriber that joins later (transient local, as
        # robot_state_publisher serves robot_description); a volatile subscriber gets the next
        latest = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.TRANSIENT_LOCAL)
        publish_parameters = publisher(Float64MultiArray, "~/parameters", latest).publish
        self._publish_fused = publisher(Float64MultiArray, "~/fused_parameters", latest).publish
        publish_rates = publisher(Float64MultiArray, "~/parameter_rates", latest).publish
        publish_shadow = publisher(JointState, "~/shadow_joint_states", QoSProfile(
            depth=SHADOW_DEPTH, reliability=ReliabilityPolicy.RELIABLE)).publish
        publish_filtered = publisher(JointState, "~/filtered_joint_states",
                                     qos_profile_sensor_data).publish
        self._publish_diagnostics = publisher(DiagnosticArray, "/diagnostics", 10).publish
        self._shadow = ShadowFanout(
            lambda s, n, a, r: publish_shadow(joint_state_message(s, n, a, r)),
            lambda text: None if self._closing else self.core.on_message_error(text))
        guarded = self._guarded
        self.core = EstimatorCore(self.config, NodeOutputs(
            parameters=guarded("~/parameters", lambda e, s: publish_parameters(
                parameter_message(e))),
            fused_parameters=guarded("~/fused_parameters", self._on_fused),
            parameter_rates=guarded("~/parameter_rates", lambda d, s: publish_rates(
                rate_message(d))),
            shadow_joint_states=self._shadow,
            filtered_joint_states=guarded(
                "~/filtered_joint_states",
                lambda s, n, a, r: publish_filtered(joint_state_message(s, n, a, r))),
            diagnostics=guarded("/diagnostics", self._diagnostics),
            window=lambda outcome: self.get_logger().info(window_message(outcome))),
            estimator=self._estimator)
        made(self.create_service(Trigger, "~/reset", self._on_reset,
                                 callback_group=self._control_group), self.destroy_service)
        made(self.create_service(Trigger, "~/calibrate_now", self._on_calibrate_now,
                                 callback_group=self._control_group), self.destroy_service)
        made(self.create_timer(DIAGNOSTICS_PERIOD_S, self._tick,
                               callback_group=self._control_group), self.destroy_timer)
        # Default callback group: the one of rclpy's parameter services (module docstring).
        self._update_guard = made(self.create_guard_condition(self._apply_fused),
                                  self.destroy_guard_condition)

    def _remove_outputs(self) -> None:
        for destroy, entity in reversed(self._made):
            destroy(entity)
        self._made.clear()
        if self._estimates is not None:
            self._estimates.remove()
        if self._push is not None:
            self._push.close()
        self._retired = self.core  # its worker may still be finishing a window (worker_busy)
        self.core = self._estimates = self._push = None

    # --- outputs (worker thread) -------------------------------------------------------

    def _guarded(self, what: str, function: Callable) -> Callable:
        def call(*args):
            try:
                function(*args)
            except Exception as error:  # a failed publish must not stop the worker
                if not self._closing:
                    self.core.on_message_error(f"{what}: {first_line(error)}")
        return call

    def _on_fused(self, estimate: ParameterEstimate, stamp_ns: int) -> None:
        with self._handoff:
            self._pending_fused = (estimate, int(stamp_ns))
        self._publish_fused(parameter_message(estimate))
        if not self._closing:
            self._update_guard.trigger()

    def _count(self, key: str) -> None:
        with self._extra_lock:
            self._extra[key] += 1

    def _diagnostics(self, snapshot: dict) -> None:
        snapshot = self._shadow.with_dropped(snapshot)
        with self._extra_lock:
            snapshot = {**snapshot, **{key: int(value) for key, value in self._extra.items()}}
        array = diagnostic_array(snapshot, f"{self.get_name()}: estimator", self.config.rig,
                                 self.get_clock().now().to_msg())
        with self._diagnostics_lock:
            self._publish_diagnostics(array)

    # --- executor callbacks ------------------------------------------------------------

    def _apply_fused(self) -> None:
        """Guard-condition callback: parameters, files and push for the newest estimate."""
        with self._handoff:
            pending, self._pending_fused = self._pending_fused, None
        if pending is None or self._estimates is None:
            return
        estimate, stamp_ns = pending
        self._set_estimates(estimate)
        if stamp_ns > 0:  # an accepted window (0: the estimate reloaded at start-up)
            self._accepted_here = True
            self._write_output(estimate)
            self._push.send(estimate)

    def _set_estimates(self, estimate: ParameterEstimate) -> None:
        result = self._estimates.write(estimate)
        if result.successful:
            self._count("parameter_updates")
        else:
            self.core.on_message_error(f"estimate parameters not updated: {result.reason}")

    def _write_output(self, estimate: ParameterEstimate) -> None:
        if self.output_dir is None:
            return
        try:
            write_fused(self.output_dir, estimate, self.config, node_name=self.get_name())
            self._count("output_writes")
        except (OSError, ValueError) as error:
            self.core.on_message_error(f"could not write {self.output_dir}: "
                                       f"{first_line(error)}")

    def _on_reset(self, request, response):
        self.core.reset("reset requested on ~/reset")
        response.success = True
        response.message = "buffers, pending windows, filters and the fused estimate reset"
        return response

    def _on_calibrate_now(self, request, response):
        response.success, response.message = self.core.calibrate_now()
        return response

    def _tick(self) -> None:
        if self._inputs is not None:
            self._inputs.check_topic_types()
        self._guarded("/diagnostics", self._diagnostics)(self.core.diagnostics())

    # --- stopping ----------------------------------------------------------------------

    def close(self, drain: bool = True, abandon_drain: Callable[[], bool] = lambda: False
              ) -> None:
        """Stop the worker; with ``output_dir``, finish the cut windows and write once more.

        Call after the executor stopped spinning (or from a transition). With ``output_dir``
        and ``drain``, the windows already cut are estimated first (at most
        :data:`DRAIN_TIMEOUT_S`, or until ``abandon_drain()`` is true); then the fused estimate
        is written if a window was accepted since the configure. The worker gets
        :data:`STOP_WAIT_S` to finish the window it is on (:attr:`EstimatorCore.busy` says
        whether it did). Publishing failures after an rclpy shutdown are ignored. Does nothing
        on a node that is not configured.
        """
        if self._closing or self.core is None:
            return
        if self.output_dir is not None and drain:
            deadline = time.monotonic() + DRAIN_TIMEOUT_S
            while (self.core.diagnostics().get("pending_windows", 0) or self.core.busy) and \
                    time.monotonic() < deadline and not abandon_drain():
                time.sleep(0.05)
        self._closing = True
        self.core.stop(timeout=STOP_WAIT_S)
        self._shadow.close(timeout=1.0)
        with self._handoff:
            pending, self._pending_fused = self._pending_fused, None
        if pending is not None and pending[1] > 0:
            self._accepted_here = True
        fused = self.core.fused
        if self.output_dir is not None:
            if fused is not None and self._accepted_here:
                self._write_output(fused)
                self.get_logger().info(f"fused estimate of {fused.windows} window(s) "
                                       f"written to {self.output_dir}")
            else:
                self.get_logger().warning(f"no fused estimate from an accepted window: "
                                          f"nothing written to {self.output_dir}")

    @property
    def worker_busy(self) -> bool:
        """Whether the worker is still compiling or estimating (it did not stop in time)."""
        return any(core is not None and core.busy for core in (self.core, self._retired))

    def destroy_node(self):
        self.close(drain=False)
        return super().destroy_node()


def main(argv: list[str] | None = None) -> int:
    """Run the node until SIGINT/SIGTERM or shutdown; ``argv`` as ``sys.argv`` (program first).

    With ``autostart`` the node configures and activates itself; otherwise it waits,
    unconfigured, for a lifecycle manager (the launch files). Returns 0, or 2 when an autostart
    configure fails (one log line says why) or the arguments are wrong. On SIGINT a node with
    ``output_dir`` first estimates the windows already cut (a second SIGINT, or SIGTERM, skips
    that); otherwise the node stops within :data:`STOP_WAIT_S` and a few seconds of shutdown:
    when its worker is still compiling or estimating a window by then, the process leaves
    without waiting for it (the persisted estimate is only ever replaced whole).
    """
    stop = StopSignals()
    configure_jax()  # as mb-estimation: a second start skips the warm-up compile
    argv = list(sys.argv if argv is None else argv)
    logger = rclpy.logging.get_logger("estimator_node")
    try:
        positional = remove_ros_args(args=argv)[1:]
        if len(positional) > 1:
            raise ValueError(f"unexpected arguments {' '.join(positional[1:])!r}: give the "
                             "configuration as the config parameter (--ros-args -p "
                             "config:=PATH)")
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as error:  # a ROS argument rclpy cannot parse, a missing params file
        logger.fatal(" ".join(first_line(error).split()))
        return 2
    node = None
    status = 0
    try:
        node = EstimatorNode(stop_requested=lambda: bool(stop), parameter_overrides=[
            Parameter("config", value=positional[0])] if positional else [])
        if node.get_parameter("autostart").value:
            if node.trigger_configure() == TransitionCallbackReturn.SUCCESS:
                node.trigger_activate()
            elif not stop:
                status = 2
        else:
            node.get_logger().info(
                f"{node.get_fully_qualified_name()} is unconfigured: a lifecycle manager "
                "configures and activates it (the launch files do; or set autostart:=true)")
        if status == 0:
            _spin(node, stop)
    except ExternalShutdownException:
        pass
    except Exception as error:  # e.g. a parameter of the wrong type
        logger.fatal(" ".join(first_line(error).split()))
        status = 2
    finally:
        worker_busy = False
        if node is not None:
            node.close(drain=stop.first != signal.SIGTERM,
                       abandon_drain=lambda: stop.count > 1 or stop.first == signal.SIGTERM)
            worker_busy = node.worker_busy
            node.destroy_node()
        try_shutdown()
    if worker_busy:
        leave_now(status)
    return status


def _spin(node: EstimatorNode, stop: StopSignals) -> None:
    """Spin ``node`` until a stop signal, an rclpy shutdown or its lifecycle shutdown."""
    # One thread: at 1 kHz rclpy's MultiThreadedExecutor starved the inputs (a few hundred
    # joint states per second at most) while this takes all of them at ~70 % of a core; no
    # callback here waits on another.
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        while not stop and rclpy.ok() and not node.finalized:
            executor.spin_once(timeout_sec=SPIN_PERIOD_S)
    finally:
        executor.shutdown(timeout_sec=1.0)


if __name__ == "__main__":
    sys.exit(main())
