"""``estimator_node`` (``ros2 run mb_estimation estimator_node``): the online node on rclpy.

The same :class:`~mb_estimation.online.core.EstimatorCore` as the DDS adapter
(:mod:`mb_estimation.transport.dds_node`), with the same topics, types and QoS, on rclpy (ROS 2
Humble and newer). Nothing here imports rclpy or the estimator when the module is imported (the
launch files and the command line import it on machines without ROS 2); rclpy is imported inside
the functions that need it, and :class:`RosEstimatorNode` is created on first access.

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

**Topics** (as :mod:`mb_estimation.transport.dds_node`): in, joint states
(sensor_msgs/JointState, sensor-data QoS) on the config's ``recording.joint_states_topic`` (their
header stamps cut the windows) and the voltage (std_msgs/Float64, or Float64MultiArray at
``voltage_index``, stamped with the node clock -- the /clock time under ``use_sim_time`` -- as the
messages carry none; or the joint states' effort); out, ``~/parameters`` and
``~/fused_parameters`` (std_msgs/Float64MultiArray, :mod:`mb_estimation.online.messages`),
``~/shadow_joint_states`` (one sensor_msgs/JointState per estimation step of an accepted
window, reliable, depth 2000), ``~/filtered_joint_states`` (sensor-data QoS) and
``/diagnostics`` (diagnostic_msgs/DiagnosticArray, 1 Hz and after each window). A publisher of
another type on an input topic is reported in the diagnostics (checked once a second).

**Services**: ``~/reset`` and ``~/calibrate_now`` (std_srvs/Trigger).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mb_estimation.io.config import Config
    from mb_estimation.online.fusion import ParameterEstimate
    from mb_estimation.transport.players import PlayStats, TimedMessage

# ``RosEstimatorNode`` is public too; it is created by the module's ``__getattr__`` on first access.
__all__ = [
    "DEFAULT_NODE_NAME",
    "DIAGNOSTICS_PERIOD_S",
    "DRAIN_TIMEOUT_S",
    "NOT_DETERMINED",
    "PLAYER_NODE_NAME",
    "READY_MARKER",
    "RosSink",
    "apply_node_overrides",
    "config_topics",
    "estimate_parameter_values",
    "main",
    "parse_push_mapping",
    "ros_sink",
    "call_trigger",
    "run_ros_player",
    "to_ros",
    "write_fused",
]

#: Logged by :func:`main` once the node listens (after the warm-up); bag_calibration.launch.py
#: starts the bag when it sees it.
READY_MARKER = "mb_estimation node ready"
DEFAULT_NODE_NAME = "mb_estimator"
PLAYER_NODE_NAME = "mb_estimation_player"
DIAGNOSTICS_PERIOD_S = 1.0
#: Longest wait for the windows already cut when the node stops with ``output_dir`` set [s].
DRAIN_TIMEOUT_S = 120.0
#: Standard deviation published for a direction the data does not determine (as on the topics).
NOT_DETERMINED = -1.0
SHADOW_DEPTH = 2000
#: The input subscriptions queue this long a stall of the executor [s] at ``node.max_rate_hz``:
#: a window's solve or shadow burst holds the interpreter for a fraction of a second, and a
#: sensor-data queue of 5 would drop joint states meanwhile -- after which the voltage,
#: stamped with the newest joint state, would be paired with the wrong sample.
INPUT_QUEUE_S = 1.0
_NS = 1_000_000_000
_ESTIMATE_PREFIXES = ("estimate.", "estimate_std.")
_JOINT_STATE_TYPE = "sensor_msgs/msg/JointState"


# --------------------------------------------------------------------------------------------
# Pure helpers (no ROS): overrides, push mapping, estimate values, files, launch topics
# --------------------------------------------------------------------------------------------


def apply_node_overrides(config: Config, *, free: str = "", set_text: str = "",
                         compliance: float = 0.0) -> Config:
    """The node's ``free``/``set``/``compliance`` parameters applied to ``config``.

    Empty strings and a compliance of 0 leave the config as it is; the values are checked like
    the command line's (:class:`~mb_estimation.io.config.ConfigError`).
    """
    from mb_estimation.io.config import apply_overrides, parse_assignments, parse_free_list

    free = (free or "").strip()
    set_text = (set_text or "").strip()
    if not free and not set_text and not compliance:
        return config
    return apply_overrides(
        config,
        free=parse_free_list(free) if free else None,
        set_values=parse_assignments(set_text) if set_text else None,
        compliance=float(compliance) if compliance else None)


def parse_push_mapping(text: str, free: Iterable[str]) -> dict[str, str]:
    """``"J_Azz:arm_inertia,K:motor_gain"`` as ``{estimate name: controller parameter}``.

    Every estimate name must be one of the ``free`` parameters (only estimates are pushed); a
    name may be pushed to one controller parameter only. Raises ValueError naming the entry.
    """
    free = tuple(free)
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        name, sep, target = (s.strip() for s in item.partition(":"))
        if not sep or not name or not target:
            raise ValueError(f"push.mapping: {item!r} is not estimate_name:controller_param")
        if name not in free:
            raise ValueError(f"push.mapping: {name!r} is not estimated (free parameters: "
                             f"{', '.join(free) or 'none'})")
        if name in mapping:
            raise ValueError(f"push.mapping: {name!r} mapped twice")
        mapping[name] = target
    return mapping


def _plain(value) -> float | list[float]:
    import numpy as np

    array = np.asarray(value, dtype=np.float64).ravel()
    return float(array[0]) if array.size == 1 else [float(v) for v in array]


def _std_value(std) -> float | list[float]:
    import numpy as np

    array = np.asarray(std, dtype=np.float64).ravel()
    values = [float(s) if math.isfinite(s) else NOT_DETERMINED for s in array]
    return values[0] if len(values) == 1 else values


def estimate_parameter_values(config: Config, estimate: ParameterEstimate | None
                              ) -> dict[str, float | list[float]]:
    """The node's ``estimate.<name>`` and ``estimate_std.<name>`` parameter values.

    ``estimate.<name>`` for every parameter of the config (the estimate's value for the names it
    holds, the config's otherwise; a quaternion as ``[w, x, y, z]``); ``estimate_std.<name>``
    for every free parameter (three tangent entries [rad] for a quaternion; ``-1`` where not
    determined or not estimated yet).
    """
    values: dict[str, float | list[float]] = {
        f"estimate.{name}": _plain(value) for name, value in config.parameters.items()}
    for name in config.free:
        size = 3 if isinstance(config.parameters[name], tuple) else 1
        values[f"estimate_std.{name}"] = NOT_DETERMINED if size == 1 else [NOT_DETERMINED] * 3
    if estimate is not None:
        std = estimate.std
        for name in estimate.names:
            if name in config.parameters:
                values[f"estimate.{name}"] = _plain(estimate.values[name])
                values[f"estimate_std.{name}"] = _std_value(std[name])
    return values


def write_fused(directory: str | Path, estimate: ParameterEstimate, config: Config, *,
                node_name: str = DEFAULT_NODE_NAME) -> Path:
    """Write a fused estimate as ``calibrate`` writes a result; returns the folder.

    ``parameters.yaml`` has the schema of :func:`mb_estimation.io.results.parameters_document`
    as far as a fused estimate allows (so :func:`~mb_estimation.io.results.read_parameters` and
    ``--parameters`` read it): ``rig``; ``parameters`` (the estimated ones: ``value``, ``std`` --
    three tangent entries [rad] for a quaternion, ``.inf`` where not determined -- ``unit``, and
    ``excited`` = every std finite); ``fixed`` (the config's other values); ``fit`` (no cost or
    states: ``status: fused``, the number of fused ``windows`` and the node's window settings);
    ``method``. ``ros_parameters.yaml`` is ``{node_name: {ros__parameters: {estimate.<name>:
    value}}}`` for every parameter, as ``calibrate`` writes it. Both files are replaced
    atomically (a reader never sees half a file); ``states.csv`` is not written (a fused
    estimate has no states).
    """
    import yaml

    from mb_estimation.online.fusion import write_text_atomically

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    spec = config.rig_spec
    std = estimate.std
    estimated = {}
    for name in estimate.names:
        spread = [float(s) for s in std[name]]
        estimated[name] = {
            "value": _plain(estimate.values[name]),
            "std": spread[0] if len(spread) == 1 else spread,
            "unit": spec.parameter(name).unit,
            "excited": bool(all(math.isfinite(s) for s in spread)),
        }
    fixed = {name: _plain(value) for name, value in config.parameters.items()
             if name not in estimated}
    node = config.node
    fit = {
        "status": "fused", "converged": True, "windows": int(estimate.windows),
        "message": (f"online fused estimate of {estimate.windows} accepted window(s) of "
                    f"{node.window_s:g} s (stride {node.stride_s:g} s, forgetting "
                    f"{node.forgetting:g})"),
        "window_s": node.window_s, "stride_s": node.stride_s, "forgetting": node.forgetting,
    }
    document = {"rig": spec.name, "parameters": estimated, "fixed": fixed, "fit": fit,
                "method": dataclasses.asdict(config.method)}
    write_text_atomically(directory / "parameters.yaml", yaml.safe_dump(document, sort_keys=False))
    values = {name: _plain(value) for name, value in config.parameters.items()}
    values.update({name: entry["value"] for name, entry in estimated.items()})
    ros = {f"estimate.{name}": value for name, value in values.items()}
    write_text_atomically(directory / "ros_parameters.yaml",
                      yaml.safe_dump({node_name: {"ros__parameters": ros}}, sort_keys=False))
    return directory


def config_topics(path: str | Path) -> tuple[str, str | None]:
    """Joint-state topic and voltage topic (None: in the joint states' effort) of a config file.

    For the launch files' remappings: a plain YAML read of ``recording`` (no validation, no
    estimator import; the node validates the file); defaults where the file cannot be read or
    does not say.
    """
    import yaml

    joint_topic, voltage_topic = "/joint_states", "/control_voltage"
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return joint_topic, voltage_topic
    recording = data.get("recording") if isinstance(data, dict) else None
    if not isinstance(recording, dict):
        return joint_topic, voltage_topic
    joint_topic = str(recording.get("joint_states_topic") or joint_topic)
    voltage_topic = str(recording.get("voltage_topic") or voltage_topic)
    voltage_type = str(recording.get("voltage_type") or "")
    if voltage_type.replace("/msg/", "/") in ("sensor_msgs/JointState",):
        return joint_topic, None
    return joint_topic, voltage_topic


# --------------------------------------------------------------------------------------------
# Message conversion (rclpy message classes imported on use)
# --------------------------------------------------------------------------------------------


def _stamp(stamp_ns: int):
    from builtin_interfaces.msg import Time

    stamp_ns = int(stamp_ns)
    return Time(sec=stamp_ns // _NS, nanosec=stamp_ns % _NS)


def _stamp_ns(stamp) -> int:
    return int(stamp.sec) * _NS + int(stamp.nanosec)


def _joint_state(stamp_ns: int, names, positions, velocities=(), efforts=()):
    """A ``sensor_msgs/JointState`` stamped ``stamp_ns`` (empty ``frame_id``)."""
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.header.stamp = _stamp(stamp_ns)
    msg.name = [str(n) for n in names]
    msg.position = [float(x) for x in positions]
    msg.velocity = [float(x) for x in velocities]
    msg.effort = [float(x) for x in efforts]
    return msg


def _parameter_message(estimate: ParameterEstimate):
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension

    from mb_estimation.online.messages import multiarray_layout, parameter_matrix

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
    from mb_estimation.transport import players

    kind, payload = message.kind, message.payload
    if kind == players.JOINT_STATE:
        return _joint_state(message.stamp_ns, payload.names, payload.positions,
                            payload.velocities, payload.efforts)
    if kind == players.FLOAT64:
        from std_msgs.msg import Float64

        return Float64(data=float(payload))
    if kind == players.FLOAT64_MULTIARRAY:
        from std_msgs.msg import Float64MultiArray

        return Float64MultiArray(data=[float(x) for x in payload])
    raise ValueError(f"unknown message kind {kind!r}; expected one of {', '.join(players.KINDS)}")


def _message_class(kind: str):
    from mb_estimation.transport import players

    if kind == players.JOINT_STATE:
        from sensor_msgs.msg import JointState

        return JointState
    if kind == players.FLOAT64:
        from std_msgs.msg import Float64

        return Float64
    if kind == players.FLOAT64_MULTIARRAY:
        from std_msgs.msg import Float64MultiArray

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
        from rclpy.qos import qos_profile_sensor_data

        self.node = node
        self.joint_state_qos = qos_profile_sensor_data if joint_state_qos is None \
            else joint_state_qos
        self.qos = 10 if qos is None else qos
        self.counts: Counter[str] = Counter()
        self._publishers: dict[tuple[str, str], Any] = {}

    def publisher(self, topic: str, kind: str):
        """The rclpy publisher for ``topic`` and message ``kind`` (created on the first call)."""
        from mb_estimation.transport import players

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
    import rclpy

    from mb_estimation.transport.players import play

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
    import rclpy
    from std_srvs.srv import Trigger

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
    import rclpy

    try_shutdown = getattr(rclpy, "try_shutdown", None)
    if try_shutdown is not None:
        try_shutdown(context=context)
    elif rclpy.ok(context=context):
        rclpy.shutdown(context=context)


# --------------------------------------------------------------------------------------------
# The node
# --------------------------------------------------------------------------------------------


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def _make_node_class():
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
    from rcl_interfaces.srv import SetParameters
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.qos import (
        DurabilityPolicy,
        QoSProfile,
        ReliabilityPolicy,
        qos_profile_sensor_data,
    )
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64, Float64MultiArray
    from std_srvs.srv import Trigger

    from mb_estimation.online.core import EstimatorCore, NodeOutputs, estimate_window
    from mb_estimation.online.messages import diagnostic_level, diagnostic_values

    voltage_classes = {"std_msgs/msg/Float64": Float64,
                       "std_msgs/msg/Float64MultiArray": Float64MultiArray}

    def read_only(description: str) -> ParameterDescriptor:
        return ParameterDescriptor(description=description, read_only=True)

    class RosEstimatorNode(Node):
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
            declare("config", config.source, read_only(
                "mb_estimation YAML configuration (path or built-in name)"))
            free = declare("free", "", read_only("free parameters, NAME,NAME (empty: the "
                                                 "config's)")).value
            set_text = declare("set", "", read_only("values NAME=VALUE,... set before "
                                                    "estimating")).value
            compliance_descriptor = read_only(
                "every hinge compliance [m/N, rad/(N m)]; 0: the config's")
            compliance_descriptor.dynamic_typing = True  # -p compliance:=0 (an integer) works
            compliance = declare("compliance", 0.0, compliance_descriptor).value
            if isinstance(compliance, bool) or not isinstance(compliance, (int, float)):
                raise ValueError(f"parameter compliance: expected a number, got {compliance!r}")
            output_dir = declare("output_dir", "", read_only(
                "folder for parameters.yaml/ros_parameters.yaml of the fused estimate; "
                "empty: none")).value
            target = declare("push.target_node", config.node.push_target_node or "", read_only(
                "node whose parameters receive the fused estimate; empty: no push (default: "
                "the config's node.push_target_node)")).value
            mapping_text = declare("push.mapping", config.node.push_mapping or "", read_only(
                "estimate_name:controller_param,... (default: the config's "
                "node.push_mapping)")).value

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
            self._publish_shadow = self.create_publisher(
                JointState, "~/shadow_joint_states",
                QoSProfile(depth=SHADOW_DEPTH, reliability=ReliabilityPolicy.RELIABLE))
            self._publish_filtered = self.create_publisher(
                JointState, "~/filtered_joint_states", qos_profile_sensor_data)
            self._publish_diagnostics = self.create_publisher(
                DiagnosticArray, "/diagnostics", 10)

            guarded = self._guarded
            self.core = EstimatorCore(self.config, NodeOutputs(
                parameters=guarded("~/parameters", lambda e, s: self._publish_parameters.publish(
                    _parameter_message(e))),
                fused_parameters=guarded("~/fused_parameters", self._on_fused),
                shadow_joint_states=guarded("~/shadow_joint_states", self._shadow),
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
                        self.core.on_message_error(f"{what}: {_first_line(error)}")
            return call

        def _on_fused(self, estimate: ParameterEstimate, stamp_ns: int) -> None:
            with self._handoff:
                self._pending_fused = (estimate, int(stamp_ns))
            self._publish_fused.publish(_parameter_message(estimate))
            if not self._closing:
                self._update_guard.trigger()

        def _shadow(self, stamps, names, angles, rates) -> None:
            for k in range(len(stamps)):
                self._publish_shadow.publish(_joint_state(stamps[k], names, angles[k], rates[k]))

        def _count(self, key: str) -> None:
            with self._extra_lock:
                self._extra[key] += 1

        def _diagnostics(self, snapshot: dict) -> None:
            snapshot = dict(snapshot)
            with self._extra_lock:
                snapshot.update({key: int(value) for key, value in self._extra.items()})
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
                                           f"{_first_line(error)}")

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
                Parameter(target, value=_plain(estimate.values[name])).to_parameter_msg()
                for name, target in self.push_mapping.items()]
            future = client.call_async(request)
            self._count("push_sent")
            future.add_done_callback(lambda done: self._pushed(done, service, request))

        def _pushed(self, future, service: str, request) -> None:
            try:
                response = future.result()
            except Exception as error:
                self._count("push_failed")
                self.core.on_message_error(f"push: {service}: {_first_line(error)}")
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
            core = self.core
            from_effort = recording.voltage_type == _JOINT_STATE_TYPE
            depth = max(10, math.ceil(self.config.node.max_rate_hz * INPUT_QUEUE_S))
            # both queues equally deep: the executor takes one message from each ready
            # subscription in turn, which keeps joint state k and voltage k together
            sensor_data = QoSProfile(depth=depth, reliability=ReliabilityPolicy.BEST_EFFORT,
                                     durability=DurabilityPolicy.VOLATILE)

            def on_joint_state(msg) -> None:
                stamp = _stamp_ns(msg.header.stamp)
                core.on_joint_state(stamp, msg.name, msg.position)
                if from_effort:
                    core.on_joint_effort(stamp, msg.name, msg.effort)

            inputs = [(self.create_subscription(
                JointState, recording.joint_states_topic, on_joint_state,
                sensor_data, callback_group=self._inputs_group), _JOINT_STATE_TYPE)]
            if self.config.rig_spec.inputs and not from_effort:
                def on_voltage(msg) -> None:
                    # held from the newest joint-state stamp, as the DDS transport does: bag
                    # stamps and the node's clock can differ
                    core.on_voltage_message(msg.data)

                inputs.append((self.create_subscription(
                    voltage_classes[recording.voltage_type], recording.voltage_topic,
                    on_voltage, QoSProfile(depth=depth), callback_group=self._inputs_group),
                    recording.voltage_type))
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

    return RosEstimatorNode


_NODE_CLASS = None


def _node_class():
    global _NODE_CLASS
    if _NODE_CLASS is None:
        import importlib.util

        if importlib.util.find_spec("rclpy") is None:
            raise ModuleNotFoundError("RosEstimatorNode needs rclpy: source a ROS 2 (Humble or "
                                      "newer) installation, or use the DDS transport",
                                      name="rclpy")
        _NODE_CLASS = _make_node_class()
    return _NODE_CLASS


def __getattr__(name: str):
    """``RosEstimatorNode`` is created (importing rclpy) on first access."""
    if name == "RosEstimatorNode":
        return _node_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _bootstrap_config(argv: list[str]) -> Config:
    """The configuration named by the ``config`` parameter (or the one positional argument)."""
    import rclpy
    from rclpy.utilities import remove_ros_args

    from mb_estimation.io.config import ConfigError, load_config

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
            raise ConfigError(f"parameter config: {_first_line(error)} (expected a path)") \
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
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    try:
        from rclpy.executors import ExternalShutdownException
    except ImportError:  # older rclpy
        ExternalShutdownException = KeyboardInterrupt  # noqa: N806

    from mb_estimation.numerics import enable_compilation_cache

    enable_compilation_cache()  # as mb-estimation: a second start skips the warm-up compile
    argv = list(sys.argv if argv is None else argv)
    rclpy.init(args=argv)
    logger = rclpy.logging.get_logger("estimator_node")
    node = None
    try:
        try:
            node = _node_class()(_bootstrap_config(argv))
        except ValueError as error:  # ConfigError is a ValueError
            logger.fatal(" ".join(str(error).split()) or type(error).__name__)
            return 2
        except Exception as error:  # e.g. a parameter of the wrong type
            logger.fatal(" ".join(_first_line(error).split()))
            return 2
        warm_up_s = node.start()
        voltage = node.config.recording.voltage_topic if node.config.rig_spec.inputs else None
        node.get_logger().info(
            f"{READY_MARKER} (warm-up {warm_up_s:.1f} s): joint states on "
            f"{node.config.recording.joint_states_topic}"
            + (f", voltage on {voltage}" if voltage else "")
            + f"; estimating {', '.join(node.config.free)} every {node.config.node.stride_s:g} s")
        executor = MultiThreadedExecutor(num_threads=4)
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
