"""``estimator_node`` (``ros2 run mb_estimation estimator_node``): the online node on rclpy.

:class:`EstimatorNode` wraps the same :class:`~mb_estimation.online.core.EstimatorCore` as the
DDS node (:mod:`mb_estimation.transport.dds_node`), with the same topics, types and QoS; the
input handlers and the shadow fan-out are shared (:mod:`mb_estimation.online.adapter`), and what
the launch files and the command line need without ROS 2 is in
:mod:`mb_estimation.transport.ros_common`.

Start it with the launch files (``ros2 launch mb_estimation estimator.launch.py``) or::

    ros2 run mb_estimation estimator_node --ros-args -p config:=/path/to/furuta.yaml

**Parameters** (read-only: read once at start-up; give them with ``-p`` or a parameter file):

* ``config`` (string, required): the mb_estimation YAML configuration (a path, or a built-in
  name such as ``furuta``). A single non-ROS command-line argument is taken as the path too.
  The node is named after the config's ``node.name`` (``mb_estimator``) unless remapped
  (``--ros-args -r __node:=other``); ``main`` reads ``config`` through a short-lived
  bootstrap node of that default name, so a parameter file must address it as ``/**`` or by the
  final (remapped) name;
* ``free`` (string ``NAME,NAME``), ``set`` (string ``NAME=VALUE,...``), ``compliance`` (double,
  0 = the config's): the command line's ``--free``/``--set``/``--compliance`` overrides;
* ``output_dir`` (string, empty = off): after each accepted window the fused estimate is written
  there (:func:`write_fused`: ``parameters.yaml`` and ``ros_parameters.yaml``, as ``calibrate``
  writes them), and once more when the node stops (it then first lets the worker finish the
  windows already cut, at most :data:`DRAIN_TIMEOUT_S`);
* ``push.target_node`` (string, empty = off) and ``push.mapping`` (string
  ``estimate_name:controller_param,...``; both default to the config's ``node.push_target_node``
  and ``node.push_mapping``): after each accepted window the mapped values of the
  fused estimate are sent to ``/<target_node>/set_parameters`` (rcl_interfaces/srv/SetParameters,
  asynchronously; a quaternion as a double array ``[w, x, y, z]``). A missing service, a failed
  call or a rejected parameter is counted (``push_failed``) and reported through the core's
  ``last_error`` (:meth:`EstimatorCore.on_message_error`);
* the node's settings, each defaulting to the config's value (``ros_common.NODE_SETTINGS``):
  ``window_s``, ``stride_s``, ``buffer_s``, ``max_rate_hz``, ``pending_windows``,
  ``forgetting``, ``max_cost``, ``min_motion_rad``, ``state_file``, ``warm_up`` (the config's
  ``node.*``) and ``joint_states_topic``, ``voltage_topic`` (its ``recording.*``); checked as
  the config file is;
* ``use_sim_time`` as for every node (bag replay: ``ros2 bag play --clock``).

**Estimate parameters** ``estimate.<name>`` (every parameter of the rig: the fused estimate for
the free ones, the config's value for the fixed ones, so that ``ros2 param dump`` gives the
same ``estimate.*`` keys as the ``ros_parameters.yaml`` of ``calibrate``) and
``estimate_std.<name>`` (free parameters; ``-1`` = not determined). They change after each
accepted window (and on a reloaded ``node.state_file``), so every update is on
``/parameter_events``; after ``~/reset`` they keep their last values until the next accepted
window. They are declared with ``ignore_override`` (they are outputs).

*Read-only, and how the node writes them.* ``ParameterDescriptor.read_only`` means "the value
cannot change after it has been initialized" (rcl_interfaces/msg/ParameterDescriptor.msg), and
rclpy enforces it for the node itself too: ``Node.set_parameters`` rejects the change ("Trying to
set a read-only parameter") and ``Node.undeclare_parameter`` raises
``ParameterImmutableException``. The only way around is a private method that skips the check
when given descriptors, which changed name and signature between releases
(``_set_parameters_atomically(params, descriptors)`` in Humble,
``_set_parameters_atomically_common(params, descriptors)`` from Iron on). So the estimate
parameters are declared *without* the read_only flag and made read-only for everybody else with
the public ``add_on_set_parameters_callback``: it rejects every change of ``estimate.*`` and
``estimate_std.*`` ("written by the estimator only") except the node's own, which it recognises
by a thread-local flag set around its own ``set_parameters`` call. ``ros2 param set`` therefore
fails with that reason; ``ros2 param describe`` shows the parameters as not read-only, with the
description saying who writes them.

*Threads.* The core's worker thread calls the outputs. Publishing from it is allowed in rclpy
(the diagnostics publisher, shared with the 1 Hz timer, is guarded by a lock). Parameter updates,
the ``output_dir`` files and the push are not done on the worker: it hands the newest fused
estimate over under a lock and triggers a guard condition, whose callback runs on the executor in
the node's *default* callback group -- the group of rclpy's parameter services -- so an update
never interleaves with a get/set/list/describe request, and the worker never waits on ROS.
:func:`main` spins the node on a ``SingleThreadedExecutor`` (at 1 kHz rclpy's
``MultiThreadedExecutor`` starved the inputs; measured in benchmarks/RESULTS.md); the callback
groups keep it correct where a user adds it to a multi-threaded one.

**Topics** (as :mod:`mb_estimation.transport.dds_node`): in, joint states
(sensor_msgs/JointState, sensor-data QoS) on the config's ``recording.joint_states_topic`` (their
header stamps cut the windows) and the voltage (std_msgs/Float64, or Float64MultiArray at
``voltage_index``, stamped with the joint state published last before it, by the messages'
source timestamps, as they carry no header; or the joint states' effort); out, ``~/parameters`` and
``~/fused_parameters`` (std_msgs/Float64MultiArray, :mod:`mb_estimation.online.messages`),
``~/shadow_joint_states`` (one sensor_msgs/JointState per estimation step of an accepted
window, reliable, depth 2000), ``~/filtered_joint_states`` (sensor-data QoS) and
``/diagnostics`` (diagnostic_msgs/DiagnosticArray, 1 Hz and after each window). A publisher of
another type on an input topic is reported in the diagnostics (checked once a second).
The shadow states of a window are published from a thread of their own
(:class:`~mb_estimation.online.adapter.ShadowFanout`): a slow reader never stalls the estimator.

**Services**: ``~/reset`` and ``~/calibrate_now`` (std_srvs/Trigger).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

try:
    import rclpy
except ModuleNotFoundError as error:  # the console script on a machine without ROS 2
    raise ModuleNotFoundError(
        "the rclpy node needs rclpy: pip install 'mb_estimation[ros]' or source a ROS 2 "
        "installation (Humble or newer); or run the node with --transport dds",
        name="rclpy") from error
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import (
    DurabilityPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)
from rclpy.subscription import Subscription
from rclpy.utilities import remove_ros_args
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray, MultiArrayDimension
from std_srvs.srv import Trigger

from mb_estimation.config import Config, ConfigError, load_config
from mb_estimation.errors import first_line
from mb_estimation.io.results import plain_value
from mb_estimation.message_types import FLOAT64, FLOAT64_MULTI_ARRAY, JOINT_STATE
from mb_estimation.numerics import enable_compilation_cache
from mb_estimation.online.adapter import ShadowFanout, input_handlers
from mb_estimation.online.core import EstimatorCore, NodeOutputs, estimate_window
from mb_estimation.online.fusion import ParameterEstimate
from mb_estimation.online.messages import (
    diagnostic_level,
    diagnostic_values,
    multiarray_layout,
    parameter_matrix,
)
from mb_estimation.stamps import sec_nanosec
from mb_estimation.transport import players
from mb_estimation.transport.players import PlayStats, TimedMessage, play
from mb_estimation.transport.ros_common import (
    DEFAULT_NODE_NAME,
    DRAIN_TIMEOUT_S,
    NODE_SETTINGS,
    NOT_DETERMINED,
    PLAYER_NODE_NAME,
    READY_MARKER,
    apply_node_overrides,
    estimate_parameter_values,
    node_setting_defaults,
    parse_push_mapping,
    with_node_settings,
    write_fused,
)

DIAGNOSTICS_PERIOD_S = 1.0
SHADOW_DEPTH = 2000
#: The input subscriptions queue this long a stall of the executor [s] at ``node.max_rate_hz``:
#: a window's solve holds the interpreter for a fraction of a second, and a sensor-data queue
#: of 5 would drop joint states meanwhile (both inputs are kept equally deep).
INPUT_QUEUE_S = 1.0
_ESTIMATE_PREFIXES = ("estimate.", "estimate_std.")
VOLTAGE_CLASSES = {FLOAT64: Float64, FLOAT64_MULTI_ARRAY: Float64MultiArray}


# --------------------------------------------------------------------------------------------
# Message conversion
# --------------------------------------------------------------------------------------------


def _stamp(nanoseconds: int) -> Time:
    sec, nanosec = sec_nanosec(int(nanoseconds))
    return Time(sec=sec, nanosec=nanosec)


def _read_only(description: str) -> ParameterDescriptor:
    return ParameterDescriptor(description=description, read_only=True)


def _with_source_timestamp(callback: Callable[[Any, int | None], None]) -> Callable:
    """``callback(msg, source_ns)`` as an rclpy subscription callback.

    rclpy from Iron on passes a ``MessageInfo`` holding the publisher's ``source_timestamp``
    [ns] to a callback of two arguments; Humble's passes the message only (``source_ns`` None).
    """
    if hasattr(Subscription, "CallbackType"):
        return lambda msg, info: callback(msg, info.get("source_timestamp") or None)
    return lambda msg: callback(msg, None)


def _joint_state(stamp_ns: int, names, positions, velocities=(), efforts=()):
    """A ``sensor_msgs/JointState`` stamped ``stamp_ns`` (empty ``frame_id``)."""
    msg = JointState()
    msg.header.stamp = _stamp(stamp_ns)
    msg.name = [str(n) for n in names]
    msg.position = [float(x) for x in positions]
    msg.velocity = [float(x) for x in velocities]
    msg.effort = [float(x) for x in efforts]
    return msg


def _parameter_message(estimate: ParameterEstimate):


    labels, matrix = parameter_matrix(estimate)
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=label, size=size, stride=stride)
                      for label, size, stride in multiarray_layout(labels)]
    msg.layout.data_offset = 0
    msg.data = [float(v) for v in matrix.ravel()]
    return msg


def to_ros(message: TimedMessage):
    """The rclpy message of a :class:`~mb_estimation.transport.players.TimedMessage`.

    A joint state gets ``header.stamp`` = ``stamp_ns`` (empty ``frame_id``); a
    Float64MultiArray an empty layout.
    """
    kind, payload = message.kind, message.payload
    if kind == players.JOINT_STATE:
        return _joint_state(message.stamp_ns, payload.names, payload.positions,
                            payload.velocities, payload.efforts)
    if kind == players.FLOAT64:

        return Float64(data=float(payload))
    if kind == players.FLOAT64_MULTIARRAY:

        return Float64MultiArray(data=[float(x) for x in payload])
    raise ValueError(f"unknown message kind {kind!r}; expected one of {', '.join(players.KINDS)}")


def _message_class(kind: str):

    if kind == players.JOINT_STATE:

        return JointState
    if kind == players.FLOAT64:

        return Float64
    if kind == players.FLOAT64_MULTIARRAY:

        return Float64MultiArray
    raise ValueError(f"unknown message kind {kind!r}; expected one of {', '.join(players.KINDS)}")


# --------------------------------------------------------------------------------------------
# Player sink (mb-estimation rig-sim / replay --transport ros)
# --------------------------------------------------------------------------------------------


class RosSink:
    """A :func:`~mb_estimation.transport.players.play` sink publishing through rclpy.

    The rclpy counterpart of :class:`~mb_estimation.transport.players.DdsSink`: one publisher
    per (topic, kind), created on first use (or ahead with :meth:`publisher`); joint states with
    sensor-data QoS (as ``joint_state_broadcaster``), the rest with the default QoS (reliable,
    depth 10). :attr:`counts` holds the messages published per topic.
    """

    def __init__(self, node, *, joint_state_qos=None, qos=None) -> None:

        self.node = node
        self.joint_state_qos = qos_profile_sensor_data if joint_state_qos is None \
            else joint_state_qos
        self.qos = 10 if qos is None else qos
        self.counts: Counter[str] = Counter()
        self._publishers: dict[tuple[str, str], Any] = {}

    def publisher(self, topic: str, kind: str):
        """The rclpy publisher for ``topic`` and message ``kind`` (created on the first call)."""
        key = (topic, kind)
        publisher = self._publishers.get(key)
        if publisher is None:
            qos = self.joint_state_qos if kind == players.JOINT_STATE else self.qos
            publisher = self.node.create_publisher(_message_class(kind), topic, qos)
            self._publishers[key] = publisher
        return publisher

    def wait_for_subscribers(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Wait until every publisher so far has ``count`` subscriptions; False on timeout."""
        deadline = time.monotonic() + timeout
        for publisher in self._publishers.values():
            while publisher.get_subscription_count() < count:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
        return True

    def __call__(self, message: TimedMessage) -> None:
        self.publisher(message.topic, message.kind).publish(to_ros(message))
        self.counts[message.topic] += 1


def ros_sink(node, **qos) -> RosSink:
    """A sink that publishes :class:`TimedMessage` objects through ``node``'s rclpy publishers."""
    return RosSink(node, **qos)


def run_ros_player(messages: Iterable[TimedMessage], rate: float = 1.0, *,
                   topics: dict[str, str] | None = None, wait_s: float = 2.0, stop=None,
                   args: list[str] | None = None) -> PlayStats:
    """Play ``messages`` on ROS 2 topics from a node ``mb_estimation_player``; returns the stats.

    ``rate`` as in :func:`~mb_estimation.transport.players.play` (0: as fast as possible).
    ``topics`` (topic -> message kind, e.g. :func:`~mb_estimation.transport.players.
    rig_sim_topics`) creates those publishers first and waits up to ``wait_s`` for a subscriber
    on each, so that the first messages are not lost to discovery. rclpy is initialised (with
    ``args``) unless it already is, and shut down again if it was initialised here; the node is
    destroyed in any case (also on Ctrl-C, which propagates as KeyboardInterrupt).
    """
    owns_context = not rclpy.ok()
    if owns_context:
        rclpy.init(args=args)
    node = rclpy.create_node(PLAYER_NODE_NAME)
    try:
        sink = ros_sink(node)
        for topic, kind in (topics or {}).items():
            sink.publisher(topic, kind)
        if topics and wait_s > 0 and not sink.wait_for_subscribers(1, wait_s):
            node.get_logger().warning(
                f"no subscriber on {', '.join(topics)} after {wait_s:g} s; playing anyway")
        return play(messages, sink, rate=rate, stop=stop)
    finally:
        node.destroy_node()
        if owns_context:
            _try_shutdown()


def call_trigger(argv: list[str] | None = None) -> int:
    """Call a std_srvs/Trigger service once: ``argv = [SERVICE]``, e.g. ``/mb_estimator/reset``.

    What ``ros2 service call SERVICE std_srvs/srv/Trigger`` does, for machines with rclpy but
    without the ``ros2`` command line (bag_calibration.launch.py uses it). Prints the response;
    returns 0 when the service answered with success, 1 when it answered without, 2 when it
    did not answer within 30 s.
    """
    (service,) = sys.argv[1:] if argv is None else argv
    rclpy.init()
    node = rclpy.create_node("mb_estimation_trigger")
    try:
        client = node.create_client(Trigger, service)
        if not client.wait_for_service(timeout_sec=30.0):
            print(f"{service}: no such service after 30 s", file=sys.stderr)
            return 2
        future = client.call_async(Trigger.Request())
        rclpy.spin_until_future_complete(node, future, timeout_sec=30.0)
        if not future.done() or future.result() is None:
            print(f"{service}: no response after 30 s", file=sys.stderr)
            return 2
        response = future.result()
        print(f"{service}: success={response.success} message={response.message!r}")
        return 0 if response.success else 1
    finally:
        node.destroy_node()
        _try_shutdown()


def _try_shutdown(context=None) -> None:

    try_shutdown = getattr(rclpy, "try_shutdown", None)
    if try_shutdown is not None:
        try_shutdown(context=context)
    elif rclpy.ok(context=context):
        rclpy.shutdown(context=context)




class EstimatorNode(Node):
    """The estimator node on rclpy (module docstring): core, topics, parameters, services.

    ``config`` is the configuration the ``config`` parameter names (:func:`main` loads it);
    the ``free``/``set``/``compliance`` parameters are applied to it here. ``estimator``
    replaces the window estimator (tests); other keyword arguments go to ``rclpy.node.Node``
    (``context``, ``parameter_overrides``, ...). Call :meth:`start` before spinning and
    :meth:`close` after.
    """

    def __init__(self, config: Config, *, estimator=estimate_window,
                 node_name: str | None = None, **node_kwargs) -> None:
        super().__init__(node_name or config.node.name, **node_kwargs)
        self._writing = threading.local()
        self._closing = False
        self._extra: Counter[str] = Counter()  # the node's own counters (diagnostics)
        self._extra_lock = threading.Lock()
        self._handoff = threading.Lock()
        self._pending_fused: tuple[ParameterEstimate, int] | None = None
        self._diagnostics_lock = threading.Lock()
        self._reported_types: set[tuple[str, str]] = set()
        self._accepted_here = False

        declare = self.declare_parameter
        declare("config", config.source, _read_only(
            "mb_estimation YAML configuration (path or built-in name)"))
        free = declare("free", "", _read_only("free parameters, NAME,NAME (empty: the "
                                             "config's)")).value
        set_text = declare("set", "", _read_only("values NAME=VALUE,... set before "
                                                "estimating")).value
        compliance_descriptor = _read_only(
            "every hinge compliance [m/N, rad/(N m)]; 0: the config's")
        compliance_descriptor.dynamic_typing = True  # -p compliance:=0 (an integer) works
        compliance = declare("compliance", 0.0, compliance_descriptor).value
        if isinstance(compliance, bool) or not isinstance(compliance, (int, float)):
            raise ValueError(f"parameter compliance: expected a number, got {compliance!r}")
        output_dir = declare("output_dir", "", _read_only(
            "folder for parameters.yaml/ros_parameters.yaml of the fused estimate; "
            "empty: none")).value
        target = declare("push.target_node", config.node.push_target_node or "", _read_only(
            "node whose parameters receive the fused estimate; empty: no push (default: "
            "the config's node.push_target_node)")).value
        mapping_text = declare("push.mapping", config.node.push_mapping or "", _read_only(
            "estimate_name:controller_param,... (default: the config's "
            "node.push_mapping)")).value

        settings = {
            name: declare(name, value, _read_only(
                f"{NODE_SETTINGS[name].description} (default: the config's "
                f"{NODE_SETTINGS[name].section}.{name})")).value
            for name, value in node_setting_defaults(config).items()}
        config = with_node_settings(config, settings)
        self.config = apply_node_overrides(config, free=free, set_text=set_text,
                                           compliance=compliance)
        self.output_dir = Path(output_dir).expanduser().resolve() if output_dir else None
        self.push_target = str(target).strip().strip("/")
        self.push_mapping = parse_push_mapping(mapping_text, self.config.free)
        if self.push_mapping and not self.push_target:
            raise ValueError("push.mapping is set but push.target_node is empty")
        if self.push_target and not self.push_mapping:
            raise ValueError(f"push.target_node {self.push_target!r} is set but "
                             "push.mapping is empty")

        self._inputs_group = MutuallyExclusiveCallbackGroup()
        self._control_group = MutuallyExclusiveCallbackGroup()
        self._publish_parameters = self.create_publisher(
            Float64MultiArray, "~/parameters", 10)
        self._publish_fused = self.create_publisher(
            Float64MultiArray, "~/fused_parameters", 10)
        publish_shadow = self.create_publisher(
            JointState, "~/shadow_joint_states",
            QoSProfile(depth=SHADOW_DEPTH, reliability=ReliabilityPolicy.RELIABLE)).publish
        self._shadow = ShadowFanout(
            lambda s, n, a, r: publish_shadow(_joint_state(s, n, a, r)),
            lambda text: None if self._closing else self.core.on_message_error(text))
        self._publish_filtered = self.create_publisher(
            JointState, "~/filtered_joint_states", qos_profile_sensor_data)
        self._publish_diagnostics = self.create_publisher(
            DiagnosticArray, "/diagnostics", 10)

        guarded = self._guarded
        self.core = EstimatorCore(self.config, NodeOutputs(
            parameters=guarded("~/parameters", lambda e, s: self._publish_parameters.publish(
                _parameter_message(e))),
            fused_parameters=guarded("~/fused_parameters", self._on_fused),
            shadow_joint_states=self._shadow,
            filtered_joint_states=guarded(
                "~/filtered_joint_states",
                lambda s, n, a, r: self._publish_filtered.publish(_joint_state(s, n, a, r))),
            diagnostics=guarded("/diagnostics", self._diagnostics)), estimator=estimator)

        self._inputs = self._subscribe()
        self.create_service(Trigger, "~/reset", self._on_reset,
                            callback_group=self._control_group)
        self.create_service(Trigger, "~/calibrate_now", self._on_calibrate_now,
                            callback_group=self._control_group)
        self._timer = self.create_timer(DIAGNOSTICS_PERIOD_S, self._tick,
                                        callback_group=self._control_group)
        # Default callback group: the one of rclpy's parameter services (module docstring).
        self._update_guard = self.create_guard_condition(self._apply_fused)
        self._push_client = None
        if self.push_target:
            self._push_client = self.create_client(
                SetParameters, f"/{self.push_target}/set_parameters",
                callback_group=ReentrantCallbackGroup())

        self._declare_estimates()
        self.add_on_set_parameters_callback(self._guard_estimates)

    # --- estimate parameters ---------------------------------------------------------

    def _declare_estimates(self) -> None:
        spec = self.config.rig_spec
        values = estimate_parameter_values(self.config, self.core.fused)
        for key, value in values.items():
            kind, _, parameter = key.partition(".")
            unit = spec.parameter(parameter).unit
            what = ("fused estimate" if parameter in self.config.free else
                    "fixed value (from the config)") if kind == "estimate" else \
                f"standard deviation of the fused estimate ({NOT_DETERMINED:g}: not " \
                "determined)"
            self.declare_parameter(key, value, ParameterDescriptor(
                description=f"{parameter} [{unit}]: {what}; written by the estimator only",
                read_only=False), ignore_override=True)

    def _guard_estimates(self, parameters):
        if getattr(self._writing, "active", False):
            return SetParametersResult(successful=True)
        blocked = [p.name for p in parameters if p.name.startswith(_ESTIMATE_PREFIXES)]
        if blocked:
            return SetParametersResult(
                successful=False,
                reason=f"{', '.join(blocked)}: written by the estimator only (read-only)")
        return SetParametersResult(successful=True)

    def _set_estimates(self, estimate: ParameterEstimate) -> None:
        values = estimate_parameter_values(self.config, estimate)
        changed = [Parameter(key, value=value) for key, value in values.items()
                   if key.startswith("estimate_std.") or key.partition(".")[2]
                   in estimate.names]
        self._writing.active = True
        try:
            result = self.set_parameters_atomically(changed)
        finally:
            self._writing.active = False
        if result.successful:
            self._count("parameter_updates")
        else:
            self.core.on_message_error(f"estimate parameters not updated: {result.reason}")

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
        self._publish_fused.publish(_parameter_message(estimate))
        if not self._closing:
            self._update_guard.trigger()

    def _count(self, key: str) -> None:
        with self._extra_lock:
            self._extra[key] += 1

    def _diagnostics(self, snapshot: dict) -> None:
        snapshot = self._shadow.with_dropped(snapshot)
        with self._extra_lock:
            snapshot = {**snapshot, **{key: int(value) for key, value in self._extra.items()}}
        level, message = diagnostic_level(snapshot)
        status = DiagnosticStatus(
            level=bytes([level]), name=f"{self.get_name()}: estimator", message=message,
            hardware_id=self.config.rig,
            values=[KeyValue(key=k, value=v) for k, v in diagnostic_values(snapshot)])
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        with self._diagnostics_lock:
            self._publish_diagnostics.publish(array)

    # --- executor callbacks ------------------------------------------------------------

    def _apply_fused(self) -> None:
        """Guard-condition callback: parameters, files and push for the newest estimate."""
        with self._handoff:
            pending, self._pending_fused = self._pending_fused, None
        if pending is None:
            return
        estimate, stamp_ns = pending
        self._set_estimates(estimate)
        if stamp_ns > 0:  # an accepted window (0: the estimate reloaded at start-up)
            self._accepted_here = True
            self._write_output(estimate)
            self._push(estimate)

    def _write_output(self, estimate: ParameterEstimate) -> None:
        if self.output_dir is None:
            return
        try:
            write_fused(self.output_dir, estimate, self.config, node_name=self.get_name())
            self._count("output_writes")
        except (OSError, ValueError) as error:
            self.core.on_message_error(f"could not write {self.output_dir}: "
                                       f"{first_line(error)}")

    def _push(self, estimate: ParameterEstimate) -> None:
        client = self._push_client
        if client is None:
            return
        service = f"/{self.push_target}/set_parameters"
        if not client.service_is_ready():
            self._count("push_failed")
            self.core.on_message_error(f"push: {service} is not available")
            return
        request = SetParameters.Request()
        request.parameters = [
            Parameter(target, value=plain_value(estimate.values[name])).to_parameter_msg()
            for name, target in self.push_mapping.items()]
        future = client.call_async(request)
        self._count("push_sent")
        future.add_done_callback(lambda done: self._pushed(done, service, request))

    def _pushed(self, future, service: str, request) -> None:
        try:
            response = future.result()
        except Exception as error:
            self._count("push_failed")
            self.core.on_message_error(f"push: {service}: {first_line(error)}")
            return
        if response is None:
            self._count("push_failed")
            self.core.on_message_error(f"push: {service}: no response")
            return
        failed = [f"{p.name} ({r.reason or 'rejected'})"
                  for p, r in zip(request.parameters, response.results, strict=False)
                  if not r.successful]
        if failed:
            self._count("push_failed")
            self.core.on_message_error(f"push: {service} rejected {', '.join(failed)}")
        else:
            self._count("push_ok")

    def _on_reset(self, request, response):
        self.core.reset("reset requested on ~/reset")
        response.success = True
        response.message = "buffers, pending windows, filters and the fused estimate reset"
        return response

    def _on_calibrate_now(self, request, response):
        response.success, response.message = self.core.calibrate_now()
        return response

    def _tick(self) -> None:
        self.check_topic_types()
        self._guarded("/diagnostics", self._diagnostics)(self.core.diagnostics())

    # --- inputs --------------------------------------------------------------------------

    def _subscribe(self) -> list[tuple[Any, str]]:
        recording = self.config.recording
        on_joint_state, on_voltage = input_handlers(self.core)
        depth = max(10, math.ceil(self.config.node.max_rate_hz * INPUT_QUEUE_S))
        sensor_data = QoSProfile(depth=depth, reliability=ReliabilityPolicy.BEST_EFFORT,
                                 durability=DurabilityPolicy.VOLATILE)
        inputs = [(self.create_subscription(
            JointState, recording.joint_states_topic, _with_source_timestamp(on_joint_state),
            sensor_data, callback_group=self._inputs_group), JOINT_STATE)]
        if on_voltage is not None:
            inputs.append((self.create_subscription(
                VOLTAGE_CLASSES[recording.voltage_type], recording.voltage_topic,
                _with_source_timestamp(on_voltage), QoSProfile(depth=depth),
                callback_group=self._inputs_group), recording.voltage_type))
        return inputs

    def check_topic_types(self) -> None:
        """Report (once each) input topics with a publisher of a type not the config's."""
        for subscription, expected in self._inputs:
            topic = getattr(subscription, "topic_name", None) or subscription.topic
            try:
                publishers = self.get_publishers_info_by_topic(topic)
            except Exception:  # graph queries can fail while shutting down
                return
            for info in publishers:
                key = (topic, info.topic_type)
                if info.topic_type != expected and key not in self._reported_types:
                    self._reported_types.add(key)
                    self.core.on_message_error(
                        f"{topic}: node {info.node_name} publishes {info.topic_type}, the "
                        f"config expects {expected}: its messages are not received")

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> float:
        """Warm up and start the worker (:meth:`EstimatorCore.start`); returns warm-up [s]."""
        return self.core.start()

    def close(self, drain_timeout_s: float | None = None) -> None:
        """Stop the worker; with ``output_dir``, finish the cut windows and write once more.

        Call after the executor stopped spinning. The windows already cut are estimated
        first (at most ``drain_timeout_s``, default :data:`DRAIN_TIMEOUT_S`) when
        ``output_dir`` is set; then the fused estimate is written if a window was accepted
        since the start. Publishing failures after an rclpy shutdown are ignored.
        """
        if self._closing:
            return
        timeout = DRAIN_TIMEOUT_S if drain_timeout_s is None else drain_timeout_s
        deadline = time.monotonic() + timeout
        if self.output_dir is not None:
            while self.core.diagnostics().get("pending_windows", 0) and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            self.core.stop(timeout=max(1.0, deadline - time.monotonic()))
        self._closing = True
        self.core.stop(timeout=5.0)
        self._shadow.close()
        self._timer.cancel()
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

    def destroy_node(self):
        if not self._closing:
            self.close(drain_timeout_s=0.0)
        return super().destroy_node()


def _bootstrap_config(argv: list[str]) -> Config:
    """The configuration named by the ``config`` parameter (or the one positional argument)."""
    positional = remove_ros_args(args=argv)[1:]
    if len(positional) > 1:
        raise ConfigError(f"unexpected arguments {' '.join(positional[1:])!r}: give the "
                          "configuration as the config parameter (--ros-args -p config:=PATH)")
    node = rclpy.create_node(DEFAULT_NODE_NAME, start_parameter_services=False,
                             enable_rosout=False)
    try:
        try:
            path = node.declare_parameter("config", "").value
        except Exception as error:
            raise ConfigError(f"parameter config: {first_line(error)} (expected a path)") \
                from None
    finally:
        node.destroy_node()
    path = path or (positional[0] if positional else "")
    if not path:
        raise ConfigError("parameter config is not set: start with --ros-args -p "
                          "config:=/path/to/furuta.yaml (or ros2 launch mb_estimation "
                          "estimator.launch.py config:=...)")
    return load_config(path)


def main(argv: list[str] | None = None) -> int:
    """Run the node until Ctrl-C or shutdown; ``argv`` as ``sys.argv`` (program name first).

    Returns 0, or 2 when the configuration or a parameter is missing or invalid (one log line
    says why).
    """
    enable_compilation_cache()  # as mb-estimation: a second start skips the warm-up compile
    argv = list(sys.argv if argv is None else argv)
    rclpy.init(args=argv)
    logger = rclpy.logging.get_logger("estimator_node")
    node = None
    try:
        try:
            node = EstimatorNode(_bootstrap_config(argv))
        except ValueError as error:  # ConfigError is a ValueError
            logger.fatal(" ".join(str(error).split()) or type(error).__name__)
            return 2
        except Exception as error:  # e.g. a parameter of the wrong type
            logger.fatal(" ".join(first_line(error).split()))
            return 2
        warm_up_s = node.start()
        voltage = node.config.recording.voltage_topic if node.config.rig_spec.inputs else None
        node.get_logger().info(
            f"{READY_MARKER} (warm-up {warm_up_s:.1f} s): joint states on "
            f"{node.config.recording.joint_states_topic}"
            + (f", voltage on {voltage}" if voltage else "")
            + f"; estimating {', '.join(node.config.free)} every {node.config.node.stride_s:g} s")
        # One thread: at 1 kHz rclpy's MultiThreadedExecutor starved the inputs (a few hundred
        # joint states per second at most) while this takes all of them at ~70 % of a core
        # (benchmarks/RESULTS.md, issue 15); no callback here waits on another.
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        try:
            executor.spin()
        finally:
            executor.shutdown(timeout_sec=1.0)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.close()
            node.destroy_node()
        _try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
