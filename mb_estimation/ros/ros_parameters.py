"""The rclpy node's parameters: its settings, its estimate parameters and the push to a controller.

:func:`declare_config_parameters` declares ``config`` and ``autostart`` when the node is made;
on configure, :func:`node_config` loads the configuration and :func:`declare_node_parameters`
declares the other read-only parameters (the list is in :mod:`mb_estimation.ros.ros_node`)
and applies them to it;
:class:`EstimateParameters` declares, guards and writes ``estimate.*`` and ``estimate_std.*``;
:class:`ParameterPush` sends the fused estimate to ``/<push.target_node>/set_parameters``. What
needs no rclpy (names, config defaults, checks) is in :mod:`mb_estimation.ros.ros_common`.

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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rcl_interfaces.srv import SetParameters
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter

from mb_estimation.config import Config, ConfigError, load_config, needs_robot_description
from mb_estimation.errors import first_line
from mb_estimation.io.parameter_files import plain_value
from mb_estimation.online.fusion import ParameterEstimate
from mb_estimation.ros.ros_common import (
    NODE_SETTINGS,
    NOT_DETERMINED,
    apply_node_overrides,
    estimate_parameter_values,
    node_setting_defaults,
    parse_push_mapping,
    with_node_settings,
)

ESTIMATE_PREFIXES = ("estimate.", "estimate_std.")


def _read_only(description: str) -> ParameterDescriptor:
    return ParameterDescriptor(description=description, read_only=True)


class NodeParameters(NamedTuple):
    """The configuration and the outputs as the node's parameters set them."""

    config: Config  # with the node settings and the free/set/compliance overrides
    output_dir: Path | None
    push_target: str  # a node name without slashes; empty: no push
    push_mapping: dict[str, str]  # estimate name -> controller parameter


def _declared(node: Node, name: str, default, descriptor: ParameterDescriptor):
    """The value of ``name``: declared now, or as declared by an earlier configure."""
    if node.has_parameter(name):
        return node.get_parameter(name).value
    return node.declare_parameter(name, default, descriptor).value


def declare_config_parameters(node: Node, source: str = "") -> None:
    """Declare ``config`` and ``autostart`` (the parameters read before a config exists)."""
    _declared(node, "config", source, _read_only(
        "mb_estimation YAML configuration (path or built-in name)"))
    _declared(node, "autostart", False, _read_only(
        "configure and activate at start-up, without a lifecycle manager"))


def node_config(node: Node) -> Config:
    """The configuration the ``config`` parameter names (ConfigError when unset or invalid).

    One that takes its rig from ``robot_description`` gets it from the node
    (:func:`robot_description`).
    """
    path = node.get_parameter("config").value
    if not isinstance(path, str):
        raise ConfigError(f"parameter config: expected a path, got {path!r}")
    if not path:
        raise ConfigError("parameter config is not set: start with --ros-args -p "
                          "config:=/path/to/furuta.yaml (or ros2 launch mb_estimation "
                          "estimator.launch.py config:=...)")
    if needs_robot_description(path):
        return load_config(path, robot_description(node))
    return load_config(path)


#: How long configure waits for the URDF on the robot_description topic [s].
ROBOT_DESCRIPTION_WAIT_S = 10.0


def robot_description(node: Node, wait_s: float | None = None) -> str:
    """The rig's URDF as ROS serves it: the ``robot_description`` parameter, else the topic.

    The parameter (read-only, declared here) where it is set; else the first message on the
    node's ``robot_description`` topic (std_msgs/String, transient local as
    robot_state_publisher publishes it), awaited up to ``wait_s`` (default
    :data:`ROBOT_DESCRIPTION_WAIT_S`) by a reader node of its own, so that a configure running
    in the node's executor does not wait on itself. ConfigError when neither gives one.
    """
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    given = _declared(node, "robot_description", "", _read_only(
        "the rig's URDF, where the config's urdf.file is robot_description (empty: the "
        "robot_description topic's)"))
    if given:
        return given
    wait_s = ROBOT_DESCRIPTION_WAIT_S if wait_s is None else wait_s
    topic = node.resolve_topic_name("robot_description")
    reader = Node(f"{node.get_name()}_description_reader", context=node.context)
    received: list[str] = []
    reader.create_subscription(String, topic, lambda message: received.append(message.data),
                               QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                          reliability=ReliabilityPolicy.RELIABLE))
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(reader)
    deadline = time.monotonic() + wait_s
    try:
        while not received and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
    finally:
        executor.shutdown()
        reader.destroy_node()
    if not received:
        raise ConfigError(f"no URDF for urdf.file robot_description: the parameter "
                          f"robot_description is empty and nothing came on {topic} within "
                          f"{wait_s:g} s (robot_state_publisher serves it there)")
    return received[0]


def declare_node_parameters(node: Node, config: Config) -> NodeParameters:
    """Declare the node's read-only parameters on ``node`` and apply them to ``config``.

    Idempotent: a parameter declared by an earlier configure keeps its value (the node
    settings' defaults are those of the first config). Raises ValueError
    (:class:`~mb_estimation.config.ConfigError` for the config's checks) on a value that is
    invalid or inconsistent with the others.
    """
    def declare(name, default, description, dynamic_typing=False):
        descriptor = _read_only(description)
        descriptor.dynamic_typing = dynamic_typing
        return _declared(node, name, default, descriptor)

    free = declare("free", "", "free parameters, NAME,NAME (empty: the config's)")
    set_text = declare("set", "", "values NAME=VALUE,... set before estimating")
    # dynamic typing: -p compliance:=0 (an integer) works
    compliance = declare("compliance", 0.0, "every hinge compliance [m/N, rad/(N m)]; 0: the "
                         "config's", dynamic_typing=True)
    if isinstance(compliance, bool) or not isinstance(compliance, (int, float)):
        raise ValueError(f"parameter compliance: expected a number, got {compliance!r}")
    output_dir = declare("output_dir", "", "folder for parameters.yaml/ros_parameters.yaml "
                         "of the fused estimate; empty: none")
    target = declare("push.target_node", config.node.push_target_node or "",
                     "node whose parameters receive the fused estimate; empty: no push "
                     "(default: the config's node.push_target_node)")
    mapping_text = declare("push.mapping", config.node.push_mapping or "",
                           "estimate_name:controller_param,... (default: the config's "
                           "node.push_mapping)")
    # dynamic typing for the numbers in seconds, hertz...: -p window_s:=10 (an integer) works;
    # the config's checks then take or refuse the value
    settings = {
        name: declare(name, value, f"{NODE_SETTINGS[name].description} (default: the "
                      f"config's node.{name})", dynamic_typing=NODE_SETTINGS[name].type is float)
        for name, value in node_setting_defaults(config).items()}
    config = with_node_settings(config, settings)
    config = apply_node_overrides(config, free=free, set_text=set_text, compliance=compliance)
    output_dir = Path(output_dir).expanduser().resolve() if output_dir else None
    push_target = str(target).strip().strip("/")
    push_mapping = parse_push_mapping(mapping_text, config.free)
    if push_mapping and not push_target:
        raise ValueError("push.mapping is set but push.target_node is empty")
    if push_target and not push_mapping:
        raise ValueError(f"push.target_node {push_target!r} is set but push.mapping is empty")
    return NodeParameters(config, output_dir, push_target, push_mapping)


class EstimateParameters:
    """A node's ``estimate.<name>`` and ``estimate_std.<name>`` parameters (module docstring).

    Declares them on ``node`` with the values of ``estimate`` (None: the config's values and
    "not determined") and adds the callback that rejects every change but :meth:`write`'s.
    """

    def __init__(self, node: Node, config: Config, estimate: ParameterEstimate | None) -> None:
        self.node = node
        self.config = config
        self._writing = threading.local()
        spec = config.rig_spec
        values = estimate_parameter_values(config, estimate)
        for key, value in values.items():
            kind, _, parameter = key.partition(".")
            unit = spec.parameter(parameter).unit
            what = ("fused estimate" if parameter in config.free else
                    "fixed value (from the config)") if kind == "estimate" else \
                f"standard deviation of the fused estimate ({NOT_DETERMINED:g}: not " \
                "determined)"
            node.declare_parameter(key, value, ParameterDescriptor(
                description=f"{parameter} [{unit}]: {what}; written by the estimator only",
                read_only=False), ignore_override=True)
        self._keys = list(values)
        node.add_on_set_parameters_callback(self.guard)

    def remove(self) -> None:
        """Undeclare the parameters and their guard (the node's cleanup)."""
        self.node.remove_on_set_parameters_callback(self.guard)
        for key in self._keys:
            self.node.undeclare_parameter(key)

    def guard(self, parameters) -> SetParametersResult:
        """The set-parameters callback: ``estimate.*``/``estimate_std.*`` are not for others."""
        if getattr(self._writing, "active", False):
            return SetParametersResult(successful=True)
        blocked = [p.name for p in parameters if p.name.startswith(ESTIMATE_PREFIXES)]
        if blocked:
            return SetParametersResult(
                successful=False,
                reason=f"{', '.join(blocked)}: written by the estimator only (read-only)")
        return SetParametersResult(successful=True)

    def write(self, estimate: ParameterEstimate) -> SetParametersResult:
        """Set the parameters of ``estimate``'s names (and every std) at once."""
        values = estimate_parameter_values(self.config, estimate)
        changed = [Parameter(key, value=value) for key, value in values.items()
                   if key.startswith("estimate_std.") or key.partition(".")[2]
                   in estimate.names]
        self._writing.active = True
        try:
            return self.node.set_parameters_atomically(changed)
        finally:
            self._writing.active = False


class ParameterPush:
    """The fused estimate's mapped values sent to ``/<target>/set_parameters`` (asynchronously).

    ``mapping`` is estimate name -> controller parameter (a quaternion goes as a double array
    ``[w, x, y, z]``). ``count(key)`` is called with ``push_sent``, ``push_ok`` and
    ``push_failed``; ``report(text)`` with what failed. An empty ``target`` pushes nothing.
    """

    def __init__(self, node: Node, target: str, mapping: dict[str, str], *,
                 count: Callable[[str], None], report: Callable[[str], None]) -> None:
        self.target = target
        self.mapping = mapping
        self._node = node
        self._count = count
        self._report = report
        self._client = None
        if target:
            self._client = node.create_client(
                SetParameters, f"/{target}/set_parameters",
                callback_group=ReentrantCallbackGroup())

    def close(self) -> None:
        """Destroy the service client (the node's cleanup)."""
        if self._client is not None:
            self._node.destroy_client(self._client)
            self._client = None

    def send(self, estimate: ParameterEstimate) -> None:
        """Send the mapped values of ``estimate`` (the answer is handled when it comes)."""
        client = self._client
        if client is None:
            return
        service = f"/{self.target}/set_parameters"
        if not client.service_is_ready():
            self._count("push_failed")
            self._report(f"push: {service} is not available")
            return
        request = SetParameters.Request()
        request.parameters = [
            Parameter(target, value=plain_value(estimate.values[name])).to_parameter_msg()
            for name, target in self.mapping.items()]
        future = client.call_async(request)
        self._count("push_sent")
        future.add_done_callback(lambda done: self._answered(done, service, request))

    def _answered(self, future, service: str, request) -> None:
        try:
            response = future.result()
        except Exception as error:
            self._count("push_failed")
            self._report(f"push: {service}: {first_line(error)}")
            return
        if response is None:
            self._count("push_failed")
            self._report(f"push: {service}: no response")
            return
        failed = [f"{p.name} ({r.reason or 'rejected'})"
                  for p, r in zip(request.parameters, response.results, strict=False)
                  if not r.successful]
        if failed:
            self._count("push_failed")
            self._report(f"push: {service} rejected {', '.join(failed)}")
        else:
            self._count("push_ok")
