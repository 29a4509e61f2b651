"""What the rclpy node shares with its launch files and the command line, without ROS 2.

The launch files, ``mb-estimation`` and the tests import this on machines without rclpy: the
node's parameter names and their config defaults, the ``free``/``set``/``compliance``
overrides, the push mapping, the ``estimate.*`` parameter values and the files a fused estimate
is written to. The node itself is :mod:`mb_estimation.ros.ros_node` (rclpy).
"""

from __future__ import annotations

import dataclasses
import functools
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

# pure Python (no rigs, no JAX): the launch files import this module
from mb_estimation.config.builtin import resolve_config
from mb_estimation.config.schema import ConfigError, NodeSettings, RecordingSettings
from mb_estimation.errors import first_line
from mb_estimation.message_types import (
    JOINT_STATE,
    NOT_DETERMINED,
    normalise_message_type,
    published_std,
)

if TYPE_CHECKING:
    from mb_estimation.config import Config
    from mb_estimation.online.fusion import ParameterEstimate

#: Logged by the node when its configure starts compiling the solver (``node.warm_up``).
COMPILING_MARKER = "mb_estimation node compiling the solver"
#: Logged by the node on activation: subscribed, its solver compiled.
READY_MARKER = "mb_estimation node ready"
DEFAULT_NODE_NAME = NodeSettings.name
PLAYER_NODE_NAME = "mb_estimation_player"
#: Longest wait for the windows already cut when the node stops with ``output_dir`` set [s].
DRAIN_TIMEOUT_S = 120.0
#: The node's input topics, relative names (``--ros-args -r joint_states:=/rig/joint_states``).
JOINT_STATES_INPUT = "joint_states"
VOLTAGE_INPUT = "control_voltage"

class NodeSetting(NamedTuple):
    """A node setting declared as a ROS parameter, by its key in the config's ``node``."""

    type: type  # the ROS parameter's type
    description: str


#: The node's settings declared as ROS parameters (by these names), each defaulting to the
#: config's value.
NODE_SETTINGS: dict[str, NodeSetting] = {
    "window_s": NodeSetting(float, "window length [s] (joint-state header stamps)"),
    "stride_s": NodeSetting(float, "time from one window's start to the next [s]"),
    "buffer_s": NodeSetting(float, "ring buffer length [s]"),
    "max_rate_hz": NodeSetting(float, "highest expected joint-state rate [Hz] (sizes the "
                               "buffers and input queues)"),
    "pending_windows": NodeSetting(int, "windows waiting for the estimator; beyond, the "
                                   "oldest is dropped"),
    "drift_noise": NodeSetting(float, "how far a parameter's rate may wander in an hour, as a "
                               "fraction of its value per hour"),
    "drift_noise_by_parameter": NodeSetting(str, "the same in the parameter's units per hour "
                                            "per √h: NAME=VALUE,... (empty: none)"),
    "drift_prior": NodeSetting(float, "each rate before the first window: 0 ± this fraction "
                               "of the value per hour"),
    "drift_alarm_std": NodeSetting(float, "a rate this many std from zero is drifting"),
    "drift_alarm_s": NodeSetting(float, "the drift alarm: drifting for this long [s]"),
    "max_cost": NodeSetting(float, "a window whose final cost is above this is rejected"),
    "min_motion_rad": NodeSetting(float, "a window whose joints all move less than this "
                                  "[rad] is at rest (rejected)"),
    "max_joint_speed_rad_s": NodeSetting(float, "a window in which a joint moves faster than "
                                         "this [rad/s] between two samples holds a jump no "
                                         "rig makes (rejected)"),
    "state_file": NodeSetting(str, "fused estimate persisted here and reloaded at start "
                              "(empty: none)"),
    "warm_up": NodeSetting(bool, "compile on a synthetic window when configured"),
}


def node_setting_defaults(config: Config) -> dict[str, Any]:
    """The :data:`NODE_SETTINGS` parameters' values in ``config``, of the parameters' types.

    A string setting's None is "" (a ROS parameter has no null).
    """
    values = {}
    for parameter, setting in NODE_SETTINGS.items():
        value = getattr(config.node, parameter)
        values[parameter] = "" if value is None else setting.type(value)
    return values


def with_node_settings(config: Config, values: dict[str, Any]) -> Config:
    """``config`` with the :data:`NODE_SETTINGS` parameters ``values``, checked as the YAML is.

    Raises :class:`~mb_estimation.config.ConfigError` naming the config key.
    """
    from mb_estimation.config.overrides import with_node_values

    changes = {parameter: None if NODE_SETTINGS[parameter].type is str and value == ""
               else value for parameter, value in values.items()}
    return with_node_values(config, changes, source="ROS parameter")


#: The ROS parameters behind :func:`apply_node_overrides`' overrides, for messages.
_OVERRIDE_SOURCES = {"free": "ROS parameter free", "set_values": "ROS parameter set",
                     "compliance": "ROS parameter compliance"}


def apply_node_overrides(config: Config, *, free: str = "", set_text: str = "",
                         compliance: float = 0.0) -> Config:
    """The node's ``free``/``set``/``compliance`` parameters applied to ``config``.

    Empty strings and a compliance of 0 leave the config as it is; the values are checked like
    the command line's (:class:`~mb_estimation.config.ConfigError`, naming the ROS parameter
    and the config key).
    """
    from mb_estimation.config.overrides import (
        apply_overrides,
        parse_assignments,
        parse_free_list,
    )

    free = (free or "").strip()
    set_text = (set_text or "").strip()
    if not free and not set_text and not compliance:
        return config
    return apply_overrides(
        config,
        free=parse_free_list(free, _OVERRIDE_SOURCES["free"]) if free else None,
        set_values=parse_assignments(set_text, _OVERRIDE_SOURCES["set_values"])
        if set_text else None,
        compliance=float(compliance) if compliance else None,
        sources=_OVERRIDE_SOURCES)


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


def estimate_parameter_values(config: Config, estimate: ParameterEstimate | None
                              ) -> dict[str, float | list[float]]:
    """The node's ``estimate.<name>`` and ``estimate_std.<name>`` parameter values.

    ``estimate.<name>`` for every parameter of the config (the estimate's value for the names it
    holds, the config's otherwise; a quaternion as ``[w, x, y, z]``); ``estimate_std.<name>``
    for every free parameter (three tangent entries [rad] for a quaternion; ``-1`` where not
    determined or not estimated yet).
    """
    from mb_estimation.io.parameter_files import plain_value

    values: dict[str, float | list[float]] = {
        f"estimate.{name}": plain_value(value) for name, value in config.parameters.items()}
    for name in config.free:
        size = 3 if isinstance(config.parameters[name], tuple) else 1
        values[f"estimate_std.{name}"] = NOT_DETERMINED if size == 1 else [NOT_DETERMINED] * 3
    if estimate is not None:
        std = estimate.std
        for name in estimate.names:
            if name in config.parameters:
                values[f"estimate.{name}"] = plain_value(estimate.values[name])
                values[f"estimate_std.{name}"] = published_std(std[name])
    return values


def write_fused(directory: str | Path, estimate: ParameterEstimate, config: Config, *,
                node_name: str = DEFAULT_NODE_NAME) -> Path:
    """Write a fused estimate as ``calibrate`` writes a result; returns the folder.

    ``parameters.yaml`` has the schema of :func:`mb_estimation.results.parameters_document`
    as far as a fused estimate allows (so
    :func:`~mb_estimation.io.parameter_files.read_parameters` and ``--parameters`` read it):
    ``rig``; ``parameters`` (the estimated ones: ``value``, ``std`` --
    three tangent entries [rad] for a quaternion, ``.inf`` where not determined -- ``unit``, and
    ``excited`` as ``calibrate`` judges it: a std at most half the value, a tilt's
    two directions within 0.1 rad); ``fixed`` (the config's other values); ``fit`` (no cost or
    states: ``status: fused``, the number of fused ``windows`` and the node's window settings);
    ``covariance`` (``rows``, ``matrix``: the fused one, a quaternion's rows its tangent's);
    ``method`` (as each window was fitted). ``ros_parameters.yaml`` is ``{node_name:
    {ros__parameters: {estimate.<name>: value}}}`` for every parameter, as ``calibrate`` writes
    it. Both files are written by
    :func:`mb_estimation.io.parameter_files.write_parameter_files`, replaced atomically (a
    reader never sees half a file); ``states.csv`` is not written (a fused estimate has no states).
    The Furuta rig's ``calibrated.urdf`` (:mod:`mb_estimation.io.urdf_files`) beside them.
    """
    import numpy as np

    from mb_estimation.estimation.solver import excited_by_data
    from mb_estimation.io.parameter_files import (
        covariance_document,
        plain_value,
        write_parameter_files,
    )
    from mb_estimation.io.urdf_files import write_calibrated_urdf
    from mb_estimation.online.windows import window_config

    spec = config.rig_spec
    std = estimate.std
    estimated = {}
    for name in estimate.names:
        value = np.asarray(estimate.values[name], dtype=np.float64)
        estimated[name] = {
            "value": plain_value(estimate.values[name]),
            "std": plain_value(std[name]),
            "unit": spec.parameter(name).unit,
            "excited": excited_by_data("quaternion" if value.size == 4 else "scalar",
                                       np.asarray(std[name]), value),
        }
    fixed = {name: plain_value(value) for name, value in config.parameters.items()
             if name not in estimated}
    node = config.node
    fit = {
        "status": "fused", "converged": True, "windows": int(estimate.windows),
        "message": (f"online fused estimate of {estimate.windows} accepted window(s) of "
                    f"{node.window_s:g} s (stride {node.stride_s:g} s), each parameter's "
                    f"drift tracked"),
        "window_s": node.window_s, "stride_s": node.stride_s,
    }
    sizes = {name: rows.stop - rows.start for name, rows in estimate.slices.items()}
    windowed = window_config(config)  # what each window was fitted with
    document = {"rig": spec.name, "parameters": estimated,
                "covariance": covariance_document(sizes, estimate.covariance),
                "fixed": fixed, "fit": fit,
                "method": {**dataclasses.asdict(windowed.method),
                           "advanced": dataclasses.asdict(windowed.advanced)}}
    values = dict(config.parameters)
    values.update({name: entry["value"] for name, entry in estimated.items()})
    written = write_parameter_files(directory, document, values, node_name)
    write_calibrated_urdf(directory, config, values)
    return written


def input_remappings(joint_topic: str, voltage_topic: str | None) -> list[tuple[str, str]]:
    """The node's inputs remapped to these topics (``voltage_topic`` None: no voltage input).

    ``(relative input name, topic)`` pairs, as launch files take them; ``--ros-args -r
    FROM:=TO`` on a command line.
    """
    remappings = [(JOINT_STATES_INPUT, joint_topic)]
    if voltage_topic is not None:
        remappings.append((VOLTAGE_INPUT, voltage_topic))
    return remappings


def config_topics(config: str | Path) -> tuple[str, str | None]:
    """Joint-state topic and voltage topic (None: in the joint states' effort) of a config.

    ``config`` is a path or a built-in name, found as the node finds it
    (:func:`~mb_estimation.config.builtin.resolve_config`). For the launch files' remappings: a
    plain YAML read of ``recording`` (no validation, no estimator import; the node validates the
    file); the schema's defaults where the file cannot be found or read, or does not say.
    """
    import yaml

    joint_topic = RecordingSettings.joint_states_topic
    voltage_topic = RecordingSettings.voltage_topic
    try:
        data = yaml.safe_load(resolve_config(config).read_text(encoding="utf-8"))
    except (ConfigError, OSError, UnicodeDecodeError, yaml.YAMLError):
        return joint_topic, voltage_topic
    recording = data.get("recording") if isinstance(data, dict) else None
    if not isinstance(recording, dict):
        return joint_topic, voltage_topic
    joint_topic = str(recording.get("joint_states_topic") or joint_topic)
    voltage_topic = str(recording.get("voltage_topic") or voltage_topic)
    voltage_type = str(recording.get("voltage_type") or "")
    if normalise_message_type(voltage_type) == JOINT_STATE:
        return joint_topic, None
    return joint_topic, voltage_topic


def logged_transition(transition: Callable) -> Callable:
    """A lifecycle node's transition callback whose exception is logged, then raised.

    rclpy turns an exception in a transition into its ERROR outcome silently; the estimator and
    the exciter node decorate their transitions with this.
    """
    @functools.wraps(transition)
    def run(node, state):
        try:
            return transition(node, state)
        except Exception as error:
            node.get_logger().error(f"{transition.__name__}: {first_line(error)}")
            raise
    return run


class StopSignals:
    """SIGINT and SIGTERM noted instead of raised: the main loop ends, the node closes cleanly.

    ``first`` is the first signal's number (None until one arrives); ``count`` how many came.
    Installed before anything slow, so a signal during start-up ends the node as well.
    """

    def __init__(self) -> None:
        self.first: int | None = None
        self.count = 0
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, self._note)

    def _note(self, number, _frame) -> None:
        self.count += 1
        if self.first is None:
            self.first = number

    def __bool__(self) -> bool:
        return self.count > 0
