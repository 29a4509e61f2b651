"""Configuration files: YAML in, validated frozen dataclasses out.

A configuration names the rig, gives a value to every model parameter, says which parameters are
estimated ("free") and within which bounds, and holds the estimator, simulation and recording
settings. Parameter names, units and admissible ranges come from
:mod:`mb_estimation.rigs.parameters`; this module only checks user input against them.

Schema (every value in SI units)::

    rig: furuta                # furuta | pendulum
    friction: dry              # pendulum only: viscous | dry | stribeck (default dry)
    drift_correction: false    # true: SPOOK rows with the constraints' curvature (no drift with
                               # damped stiff hinges, see multibody.constraints); false: (2.8)
    parameters:                # EVERY parameter of the rig must be given
      l1: 0.128
      tilt: [1.0, 0.0, 0.0, 0.0]       # unit quaternion [w, x, y, z]
      ...
    free:                      # parameters to estimate; initial values = the values above
      J_Azz: {lower: 1.0e-6, upper: 1.0}   # bounds optional, default: the parameter's range
      J_Byy: {}                # (a plain list of names works too: free: [J_Azz, J_Byy])
      tilt: {}                 # quaternions take no bounds (estimated in their tangent space)
    method:                    # estimator settings, all optional with these defaults
      dt: 0.01                 # estimation time step h [s]
      kappa: 100.0             # state error weight (Omega^-1 = kappa I)
      filter_cutoff_hz: 10.0   # zero-phase Butterworth low-pass for initial states [Hz]
      max_iterations: 60       # Levenberg-Marquardt iteration limit
      gradient_tolerance: 1.0e-2 # stop when |g| <= this
      step_tolerance: 1.0e-6   # stop when |delta| <= this
    simulation:                # forward simulation defaults, all optional
      dt: 1.0e-4               # simulation time step [s]
      rate_hz: 1000.0          # sample rate of recorded joint states [Hz]
      noise_rad: 0.0           # standard deviation of Gaussian angle noise [rad]
      encoder_counts: null     # counts per revolution for quantisation, or null
    recording:                 # how recordings map onto the rig, all optional
      joint_states_topic: /joint_states
      joints:                  # one entry per rig joint: recorded = sign * model + offset
        arm: {name: arm, offset: 0.0, sign: 1}          # (or just  arm: joint0)
        pendulum: {name: pendulum, offset: 0.0, sign: 1}
      voltage_topic: /control_voltage
      voltage_type: std_msgs/msg/Float64   # | std_msgs/msg/Float64MultiArray
                                           # | sensor_msgs/msg/JointState (its effort field)
      voltage_index: 0         # index into Float64MultiArray data
      voltage_joint: null      # JointState type: the joint whose effort holds the voltage
      stamp_source: auto       # auto (header stamps when sane) | header | receive

Rules: unknown keys are errors (with the closest valid name suggested); numbers must be finite
numbers (not strings, not booleans); values must lie in the parameter's admissible range (no
negative masses); a free parameter's bounds must satisfy lower < upper and contain its initial
value; the ``tilt`` quaternion must have norm 1 within 1e-6 (it is then renormalised exactly).
For the pendulum, only the parameters of the chosen friction model may be free (``r_mu`` for
``dry``; ``r_mu_k``, ``r_mu_delta``, ``zeta`` for ``stribeck``), but every parameter must be given.
YAML note: ``1e-4`` (no dot) is read as a number here, unlike plain PyYAML.

Every problem raises one :class:`ConfigError` whose message names the file and the key, e.g.
``config/x.yaml: parameters.J_Azz: expected a number, got 'abc'``.

Command-line overrides (``--free``, ``--set``, ``--dt``, ``--kappa``, ``--compliance``; DESIGN.md
section 6) go through :func:`parse_free_list`, :func:`parse_assignments` and
:func:`apply_overrides`, which validate exactly like the file.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import re
import site
import sys
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import yaml

from mb_estimation.rigs.parameters import (
    COMPLIANCE_PARAMETERS,
    PENDULUM_FRICTION_MODELS,
    RIGS,
    ParameterSpec,
    RigSpec,
)

__all__ = [
    "QUATERNION_TOLERANCE",
    "STAMP_SOURCES",
    "VOLTAGE_TYPES",
    "Bounds",
    "Config",
    "ConfigError",
    "JointMapping",
    "MethodSettings",
    "RecordingSettings",
    "SimulationSettings",
    "NodeSettings",
    "apply_overrides",
    "builtin_config_names",
    "builtin_config_path",
    "load_config",
    "parse_assignments",
    "recorded_joint_states",
    "parse_config",
    "parse_free_list",
]

QUATERNION_TOLERANCE = 1e-6  # allowed deviation of |tilt| from 1
VOLTAGE_TYPES = (
    "std_msgs/msg/Float64",
    "std_msgs/msg/Float64MultiArray",
    "sensor_msgs/msg/JointState",
)
STAMP_SOURCES = ("auto", "header", "receive")
ESTIMATORS = ("consistent", "paper")  # method.estimator
REFINEMENT_MODES = ("auto", "on", "off")  # method.simulation_refinement
TOP_LEVEL_KEYS = ("rig", "friction", "drift_correction", "parameters", "free", "method",
                  "simulation", "recording", "node")

# Pendulum parameters that only a particular friction model uses (paper §4.2, (4.1)).
_PENDULUM_FRICTION_PARAMETERS = {
    "viscous": (),
    "dry": ("r_mu",),
    "stribeck": ("r_mu_k", "r_mu_delta", "zeta"),
}
_DEFAULT_PENDULUM_FRICTION = "dry"
_TINY_LOWER = 1e-9  # spec lower bounds at or below this (but > 0) read as "must be positive"


class ConfigError(ValueError):
    """An invalid configuration (file or command-line override); the message says where, why."""


# --------------------------------------------------------------------------------------------
# Dataclasses


@dataclass(frozen=True)
class Bounds:
    """Box bounds ``lower <= value <= upper`` of a free parameter (paper §3.1, the box B).

    Quaternion parameters carry ``Bounds(-inf, inf)``: they are not bounded.
    """

    lower: float
    upper: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the closed box."""
        return self.lower <= value <= self.upper


@dataclass(frozen=True)
class MethodSettings:
    """Estimator settings (paper §3, §4.4, §4.6; the consistent path, estimation/consistent.py).

    ``estimator``: ``consistent`` (default: joint coordinates in the rigid limit, a second-order
    step refined over ``refinement_levels`` steps down to ``refinement_dt``, κ per unit time) or
    ``paper`` (the paper's single fit in maximal coordinates at step ``dt``).
    ``simulation_refinement`` (consistent only): a final multiple-shooting fit through the
    config's own simulator (its hinges, ``simulation.dt``), segments of
    ``simulation_segment_s`` first, lengthened while the simulator follows the data
    (estimation/shooting.py). ``off`` (default): never — a note says when the rigid-hinge
    fit does not predict the recordings; ``auto``: only then (its 0.5 s prediction error
    through the config's simulator over 5× the fit's angle noise), kept when the refit
    predicts better; ``on``: always. YAML true/false mean on/off. Not ``auto`` by default:
    the prediction runs the config's hinges, whose damping τ is often a method setting, and
    those mispredict a rigid rig too (benchmarks/RESULTS.md, issue 14).
    """

    estimator: str = "consistent"  # consistent | paper
    dt: float = 0.01  # the paper's single fit: its time step h [s]
    refinement_dt: float | None = None  # consistent: finest step [s]; None: the sample period
    refinement_levels: int = 2  # consistent: steps refinement_dt * 2^(levels-1) ... refinement_dt
    simulation_refinement: str = "off"  # consistent: fit through the simulator? off|auto|on
    simulation_segment_s: float = 1.0  # its first shooting segments [s] (then up to 4 s)
    kappa: float = 100.0  # state error weight, Omega^-1 = kappa I (consistent: read at h = 0.01 s)
    filter_cutoff_hz: float = 10.0  # Butterworth cutoff for the initial states [Hz]
    max_iterations: int = 60  # Levenberg-Marquardt iteration limit
    gradient_tolerance: float = 1e-2  # epsilon_g (the paper: 10)
    step_tolerance: float = 1e-6  # epsilon_delta


@dataclass(frozen=True)
class NodeSettings:
    """The online node (DESIGN §7): windows, acceptance, fusion, persistence, names."""

    name: str = "mb_estimator"  # node name: topics ~/parameters etc. live under /<name>/
    window_s: float = 5.0  # window length [s] (header stamps)
    stride_s: float = 5.0  # time from one window's start to the next [s]
    buffer_s: float = 30.0  # ring buffer length [s]: bounds memory
    max_rate_hz: float = 2000.0  # highest expected joint-state rate [Hz] (sizes the buffers)
    pending_windows: int = 1  # windows waiting for the worker; beyond, the oldest is dropped
    forgetting: float = 0.9  # fusion: weight of the old information per accepted window, (0, 1]
    max_cost: float = 1.0e-2  # a window whose final cost is above this is rejected
    min_motion_rad: float = 0.05  # a window whose joints all move less than this is at rest
    state_file: str | None = None  # fused estimate persisted here (atomic) and reloaded
    warm_up: bool = True  # compile on a synthetic window at start-up
    # rclpy node: push accepted fused values to this node's set_parameters service, mapped as
    # "estimate_name:controller_param,..." (None: no push)
    push_target_node: str | None = None
    push_mapping: str | None = None


@dataclass(frozen=True)
class SimulationSettings:
    """Forward-simulation defaults (synthetic recordings)."""

    dt: float = 1e-4  # simulation time step [s]
    rate_hz: float = 1000.0  # sample rate of the recorded joint states [Hz]
    noise_rad: float = 0.0  # standard deviation of additive Gaussian angle noise [rad]
    encoder_counts: int | None = None  # counts per revolution for quantisation; None: none


@dataclass(frozen=True)
class JointMapping:
    """How one rig joint appears in recordings: ``recorded = sign * model + offset``."""

    name: str  # joint name in the recorded sensor_msgs/JointState
    offset: float = 0.0  # [rad]
    sign: int = 1  # +1 or -1

    def to_model(self, recorded):
        """Model angle from a recorded angle (floats or arrays): ``sign * (recorded - offset)``."""
        return self.sign * (recorded - self.offset)

    def to_recorded(self, model):
        """Recorded angle from a model angle (floats or arrays): ``sign * model + offset``."""
        return self.sign * model + self.offset


def recorded_joint_states(mappings: Sequence[JointMapping], angles, rates):
    """Recorded positions and velocities ``[..., j]`` of model angles [rad] and rates [rad/s].

    ``sign · θ + offset`` and ``sign · θ̇`` per joint; ``mappings`` in the order of the last
    axis (the rig's joints).
    """
    signs = np.array([mapping.sign for mapping in mappings], dtype=np.float64)
    offsets = np.array([mapping.offset for mapping in mappings], dtype=np.float64)
    return (signs * np.asarray(angles, dtype=np.float64) + offsets,
            signs * np.asarray(rates, dtype=np.float64))


@dataclass(frozen=True)
class RecordingSettings:
    """Topics, message types and joint mapping of recordings (DESIGN.md section 5)."""

    joint_states_topic: str = "/joint_states"
    joints: dict[str, JointMapping] = field(default_factory=dict)  # rig joint -> mapping
    voltage_topic: str = "/control_voltage"
    voltage_type: str = "std_msgs/msg/Float64"
    voltage_index: int = 0  # index into Float64MultiArray data
    voltage_joint: str | None = None  # JointState voltage: joint whose effort holds it
    stamp_source: str = "auto"  # auto | header | receive
    # Input for recordings without a voltage topic: ((t [s], value), ...) held from each t on,
    # t counted from the first joint-state sample; the voltage topic is then not read.
    voltage_script: tuple[tuple[float, float], ...] | None = None
    # The driver's joint velocities (low-passed) for the initial state velocities instead of
    # differences of the filtered angles; off: velocities in the recording are ignored.
    use_driver_velocities: bool = False

    @classmethod
    def for_rig(cls, rig: RigSpec) -> RecordingSettings:
        """Default settings for ``rig``: every joint recorded under its own name, unchanged."""
        return cls(joints={joint: JointMapping(joint) for joint in rig.joints})


@dataclass(frozen=True)
class Config:
    """A validated configuration.

    ``parameters`` holds every parameter of the rig in the rig's order (floats; ``tilt`` as a
    unit quaternion tuple ``(w, x, y, z)``); ``free`` maps the estimated parameters (in the rig's
    order) to their bounds; their values in ``parameters`` are the initial values. ``friction`` is
    the pendulum's friction model and ``None`` for other rigs. ``drift_correction`` selects the
    drift-corrected holonomic rows (:attr:`mb_estimation.multibody.Multibody.drift_correction`)
    for simulation and estimation alike. ``source`` names where the configuration came from (a
    path), for messages.
    """

    rig: str
    friction: str | None
    parameters: dict[str, float | tuple[float, float, float, float]]
    free: dict[str, Bounds]
    method: MethodSettings = field(default_factory=MethodSettings)
    simulation: SimulationSettings = field(default_factory=SimulationSettings)
    recording: RecordingSettings = field(default_factory=RecordingSettings)
    node: NodeSettings = field(default_factory=NodeSettings)
    drift_correction: bool = False
    source: str = "<config>"

    @property
    def rig_spec(self) -> RigSpec:
        """The rig's :class:`~mb_estimation.rigs.parameters.RigSpec`."""
        return RIGS[self.rig]

    @property
    def free_names(self) -> tuple[str, ...]:
        """Names of the free parameters, in the rig's order."""
        return tuple(self.free)

    @property
    def fixed_parameters(self) -> dict[str, float | tuple[float, float, float, float]]:
        """Values of the parameters that are not free."""
        return {name: value for name, value in self.parameters.items() if name not in self.free}

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form in the file schema (``parse_config(c.to_dict())`` gives ``c`` back).

        Only lists, dicts, strings, numbers and None: safe for ``yaml.safe_dump``.
        """
        spec = self.rig_spec
        free: dict[str, Any] = {}
        for name, bounds in self.free.items():
            if spec.parameter(name).kind == "quaternion":
                free[name] = {}
            else:
                free[name] = {"lower": bounds.lower, "upper": bounds.upper}
        data: dict[str, Any] = {"rig": self.rig}
        if self.friction is not None:
            data["friction"] = self.friction
        if self.drift_correction:
            data["drift_correction"] = True
        data["parameters"] = {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in self.parameters.items()
        }
        data["free"] = free
        data["method"] = dataclasses.asdict(self.method)
        data["simulation"] = dataclasses.asdict(self.simulation)
        recording = dataclasses.asdict(self.recording)
        recording["joints"] = {
            joint: dataclasses.asdict(mapping) for joint, mapping in self.recording.joints.items()
        }
        if self.recording.voltage_script is not None:
            recording["voltage_script"] = [list(pair) for pair in self.recording.voltage_script]
        data["recording"] = recording
        data["node"] = dataclasses.asdict(self.node)
        return data


# --------------------------------------------------------------------------------------------
# YAML loading


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads ``1e-4`` as a float and rejects duplicate keys."""


# PyYAML follows YAML 1.1, where a float needs a dot: ``1e-4`` would be the string "1e-4".
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    mapping: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                "found an unhashable key", key_node.start_mark)
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r}", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=deep)
    return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_load(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = error.problem or error.context or "syntax error"
        raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: invalid YAML: {error}") from None


# --------------------------------------------------------------------------------------------
# Small validators. Each takes the message source (a path, or "--set" etc.) and the key path.


def _fail(source: str, key: str | None, message: str) -> NoReturn:
    raise ConfigError(f"{source}: {key}: {message}" if key else f"{source}: {message}")


def _fmt(value: Any) -> str:
    """Format a value for a message: floats shortest-exact, strings quoted."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _describe(value: Any) -> str:
    """Say what a wrongly typed value is, for 'expected X, got Y'."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, numbers.Real):
        return _fmt(float(value))
    return f"a {type(value).__name__}"


def _suggest(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or ``""``."""
    candidates = list(candidates)
    for candidate in candidates:
        if candidate.lower() == str(name).lower():
            return f"; did you mean {candidate!r}?"
    close = difflib.get_close_matches(str(name), candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _boolean(value: Any, source: str, key: str | None) -> bool:
    if not isinstance(value, bool):
        _fail(source, key, f"expected true or false, got {value!r}")
    return value


def _refinement_mode(value: Any, source: str, key: str | None) -> str:
    """``auto``, ``on`` or ``off``; a YAML boolean (``true``, and ``on`` as YAML reads it) too."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return _choice(value, REFINEMENT_MODES, source, key, "refinement mode")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _number(value: Any, source: str, key: str | None, *, allow_infinite: bool = False) -> float:
    if not _is_number(value):
        _fail(source, key, f"expected a number, got {_describe(value)}")
    number = float(value)
    if math.isnan(number) or (math.isinf(number) and not allow_infinite):
        _fail(source, key, f"expected a finite number, got {_fmt(number)}")
    return number


def _positive(value: Any, source: str, key: str | None) -> float:
    number = _number(value, source, key)
    if number <= 0.0:
        _fail(source, key, f"must be positive, got {_fmt(number)}")
    return number


def _non_negative(value: Any, source: str, key: str | None) -> float:
    number = _number(value, source, key)
    if number < 0.0:
        _fail(source, key, f"must not be negative, got {_fmt(number)}")
    return number


def _integer(value: Any, source: str, key: str | None, *, minimum: int) -> int:
    if _is_number(value) and float(value).is_integer():
        number = int(value)
        if number < minimum:
            _fail(source, key, f"must be an integer >= {minimum}, got {number}")
        return number
    _fail(source, key, f"expected an integer >= {minimum}, got {_describe(value)}")


def _string(value: Any, source: str, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(source, key, f"expected a non-empty string, got {_describe(value)}")
    return value.strip()


def _mapping(value: Any, source: str, key: str, what: str = "a mapping") -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        _fail(source, key, f"expected {what}, got {_describe(value)}")
    return value


def _check_keys(mapping: Mapping, allowed: Sequence[str], source: str, prefix: str | None) -> None:
    for name in mapping:
        if name not in allowed:
            key = f"{prefix}.{name}" if prefix else None
            what = "top-level key" if prefix is None else "key"
            _fail(source, key, f"unknown {what} {str(name)!r}{_suggest(name, allowed)} "
                               f"(allowed: {', '.join(allowed)})")


def _choice(value: Any, choices: Sequence[str], source: str, key: str, what: str) -> str:
    if not isinstance(value, str) or value not in choices:
        shown = repr(value) if isinstance(value, str) else _describe(value)
        hint = _suggest(value, choices) if isinstance(value, str) else ""
        _fail(source, key, f"unknown {what} {shown}{hint} (choose one of {', '.join(choices)})")
    return value


# --------------------------------------------------------------------------------------------
# Parameters


def _range_text(spec: ParameterSpec) -> str:
    unit = f" [{spec.unit}]" if spec.unit not in ("1", "quaternion") else ""
    return f"{spec.description}{unit}"


def _check_range(spec: ParameterSpec, value: float, source: str, key: str) -> None:
    if value < spec.lower:
        if spec.lower == 0.0:
            need = "must not be negative"
        elif 0.0 < spec.lower <= _TINY_LOWER:
            need = "must be positive"
        else:
            need = f"must be at least {_fmt(spec.lower)}"
        _fail(source, key, f"{need} ({spec.name}: {_range_text(spec)}), got {_fmt(value)}")
    if value > spec.upper:
        _fail(source, key, f"must be at most {_fmt(spec.upper)} ({spec.name}: "
                           f"{_range_text(spec)}), got {_fmt(value)}")


def _quaternion(value: Any, source: str, key: str) -> tuple[float, float, float, float]:
    expected = "expected a unit quaternion [w, x, y, z] (4 numbers)"
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        if hasattr(value, "tolist"):  # numpy array
            return _quaternion(value.tolist(), source, key)
        _fail(source, key, f"{expected}, got {_describe(value)}")
    if len(value) != 4:
        _fail(source, key, f"{expected}, got {_describe(value)}")
    q = [_number(x, source, f"{key}[{i}]") for i, x in enumerate(value)]
    norm = math.sqrt(sum(x * x for x in q))
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        hint = ""
        if norm > 0.0:
            hint = "; normalised it reads [" + ", ".join(f"{x / norm:.9g}" for x in q) + "]"
        _fail(source, key, f"not a unit quaternion: its norm is {norm:.9g} (must be 1 within "
                           f"{QUATERNION_TOLERANCE:g}){hint}")
    w, x, y, z = (c / norm for c in q)
    return (w, x, y, z)


def _parameter_value(spec: ParameterSpec, value: Any, source: str, key: str):
    if spec.kind == "quaternion":
        return _quaternion(value, source, key)
    number = _number(value, source, key)
    _check_range(spec, number, source, key)
    return number


def _resolve_parameter(rig: RigSpec, name: Any, source: str, key: str) -> ParameterSpec:
    if isinstance(name, str) and name in rig.parameter_names:
        return rig.parameter(name)
    hint = _suggest(str(name), rig.parameter_names)
    _fail(source, key, f"not a parameter of rig {rig.name}{hint} "
                       f"(parameters: {', '.join(rig.parameter_names)})")


def _parse_parameters(raw: Any, rig: RigSpec, source: str) -> dict[str, Any]:
    if raw is None:
        _fail(source, "parameters", f"missing; every parameter of rig {rig.name} must be given: "
                                    f"{', '.join(rig.parameter_names)}")
    raw = _mapping(raw, source, "parameters", "a mapping of parameter names to values")
    for name in raw:
        if name not in rig.parameter_names:
            _fail(source, f"parameters.{name}",
                  f"unknown parameter of rig {rig.name}{_suggest(str(name), rig.parameter_names)}"
                  f" (parameters: {', '.join(rig.parameter_names)})")
    missing = [spec for spec in rig.parameters if raw.get(spec.name) is None]
    if missing:
        listed = "; ".join(f"{spec.name} ({_range_text(spec)})" for spec in missing)
        plural = "s" if len(missing) > 1 else ""
        _fail(source, "parameters", f"missing value{plural} for {listed}; every parameter of rig "
                                    f"{rig.name} must be given")
    return {spec.name: _parameter_value(spec, raw[spec.name], source, f"parameters.{spec.name}")
            for spec in rig.parameters}


def _default_bounds(spec: ParameterSpec) -> Bounds:
    if spec.kind == "quaternion":
        return Bounds(-math.inf, math.inf)
    return Bounds(spec.lower, spec.upper)


def _parse_bounds(raw: Any, spec: ParameterSpec, source: str, key: str) -> Bounds:
    raw = _mapping(raw, source, key, "a mapping {lower: ..., upper: ...} (or {})")
    _check_keys(raw, ("lower", "upper"), source, key)
    if spec.kind == "quaternion":
        if raw:
            _fail(source, key, f"bounds do not apply to the quaternion parameter {spec.name} "
                               f"(it is estimated in its 3-dimensional tangent space); use {{}}")
        return _default_bounds(spec)
    lower = spec.lower
    upper = spec.upper
    if raw.get("lower") is not None:
        lower = _number(raw["lower"], source, f"{key}.lower", allow_infinite=True)
        if lower < spec.lower:
            _check_range(spec, lower, source, f"{key}.lower")
    if raw.get("upper") is not None:
        upper = _number(raw["upper"], source, f"{key}.upper", allow_infinite=True)
        if upper > spec.upper:
            _check_range(spec, upper, source, f"{key}.upper")
    if lower > upper:
        _fail(source, key, f"lower bound {_fmt(lower)} is greater than upper bound {_fmt(upper)}")
    if lower == upper:
        _fail(source, key, f"lower and upper bound are both {_fmt(lower)}; a free parameter needs "
                           f"lower < upper (to hold it fixed, remove it from free)")
    return Bounds(lower, upper)


def _check_friction_use(rig: RigSpec, friction: str | None, name: str, source: str,
                        key: str) -> None:
    if rig.name != "pendulum" or friction is None:
        return
    for model, names in _PENDULUM_FRICTION_PARAMETERS.items():
        if name in names and model != friction:
            _fail(source, key, f"{name} is not used by the {friction!r} friction model (it "
                               f"belongs to friction: {model}); it cannot be estimated")


def _check_initial_value(spec: ParameterSpec, value: Any, bounds: Bounds, source: str, key: str,
                         origin: str) -> None:
    if spec.kind == "quaternion" or bounds.contains(value):
        return
    _fail(source, key, f"initial value {_fmt(value)} ({origin}) is outside the bounds "
                       f"[{_fmt(bounds.lower)}, {_fmt(bounds.upper)}]")


def _parse_free(raw: Any, rig: RigSpec, friction: str | None, parameters: Mapping[str, Any],
                source: str) -> dict[str, Bounds]:
    if raw is None:
        return {}
    entries: dict[str, Any] = {}
    if isinstance(raw, Mapping):
        entries = dict(raw)
    elif isinstance(raw, Sequence) and not isinstance(raw, str):
        for index, name in enumerate(raw):
            if not isinstance(name, str):
                _fail(source, f"free[{index}]",
                      f"expected a parameter name, got {_describe(name)}")
            if name in entries:
                _fail(source, "free", f"{name} is listed twice")
            entries[name] = None
    else:
        _fail(source, "free", f"expected a list of parameter names or a mapping "
                              f"name: {{lower: ..., upper: ...}}, got {_describe(raw)}")
    free: dict[str, Bounds] = {}
    for name, raw_bounds in entries.items():
        key = f"free.{name}"
        spec = _resolve_parameter(rig, name, source, key)
        _check_friction_use(rig, friction, spec.name, source, key)
        bounds = _parse_bounds(raw_bounds, spec, source, key)
        _check_initial_value(spec, parameters[name], bounds, source, key,
                             f"parameters.{name}")
        free[name] = bounds
    return {name: free[name] for name in rig.parameter_names if name in free}


# --------------------------------------------------------------------------------------------
# Sections


def _section_reader(raw: Any, source: str, section: str, settings: type):
    """``get(name, check)`` for a settings section: the checked value, or the default if unset.

    Unknown keys in the section are an error.
    """
    raw = _mapping(raw, source, section)
    _check_keys(raw, tuple(f.name for f in dataclasses.fields(settings)), source, section)
    default = settings()

    def get(name, check):
        value = raw.get(name)
        return getattr(default, name) if value is None else check(value, source,
                                                                  f"{section}.{name}")
    return get


def _parse_method(raw: Any, source: str) -> MethodSettings:
    get = _section_reader(raw, source, "method", MethodSettings)

    return MethodSettings(
        estimator=get("estimator", lambda v, s, k: _choice(v, ESTIMATORS, s, k, "estimator")),
        dt=get("dt", _positive),
        refinement_dt=get("refinement_dt", _positive),
        refinement_levels=get("refinement_levels",
                              lambda v, s, k: _integer(v, s, k, minimum=1)),
        simulation_refinement=get("simulation_refinement", _refinement_mode),
        simulation_segment_s=get("simulation_segment_s", _positive),
        kappa=get("kappa", _positive),
        filter_cutoff_hz=get("filter_cutoff_hz", _positive),
        max_iterations=get("max_iterations",
                           lambda v, s, k: _integer(v, s, k, minimum=0)),
        gradient_tolerance=get("gradient_tolerance", _non_negative),
        step_tolerance=get("step_tolerance", _non_negative),
    )


def _parse_simulation(raw: Any, source: str) -> SimulationSettings:
    get = _section_reader(raw, source, "simulation", SimulationSettings)

    return SimulationSettings(
        dt=get("dt", _positive),
        rate_hz=get("rate_hz", _positive),
        noise_rad=get("noise_rad", _non_negative),
        encoder_counts=get("encoder_counts", lambda v, s, k: _integer(v, s, k, minimum=1)),
    )


def _parse_node(raw: Any, source: str) -> NodeSettings:
    get = _section_reader(raw, source, "node", NodeSettings)

    def text(value, source, key):
        if not isinstance(value, str) or not value.strip():
            _fail(source, key, f"expected a non-empty string, got {value!r}")
        return value

    def fraction(value, source, key):
        number = _positive(value, source, key)
        if number > 1.0:
            _fail(source, key, f"expected a number in (0, 1], got {value!r}")
        return number

    settings = NodeSettings(
        name=get("name", text),
        window_s=get("window_s", _positive),
        stride_s=get("stride_s", _positive),
        buffer_s=get("buffer_s", _positive),
        max_rate_hz=get("max_rate_hz", _positive),
        pending_windows=get("pending_windows", lambda v, s, k: _integer(v, s, k, minimum=1)),
        forgetting=get("forgetting", fraction),
        max_cost=get("max_cost", _positive),
        min_motion_rad=get("min_motion_rad", _non_negative),
        state_file=get("state_file", text),
        warm_up=get("warm_up", _boolean),
        push_target_node=get("push_target_node", text),
        push_mapping=get("push_mapping", text),
    )
    if settings.buffer_s < settings.window_s + settings.stride_s:
        _fail(source, "node.buffer_s", f"must hold a window and a stride "
              f"({settings.window_s + settings.stride_s:g} s), got {settings.buffer_s:g} s")
    return settings


def _normalise_message_type(value: str) -> str:
    """``std_msgs/Float64`` and ``std_msgs::msg::Float64`` -> ``std_msgs/msg/Float64``."""
    parts = [p for p in re.split(r"/|::", value.strip()) if p]
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    return "/".join(parts)


def _parse_joint(raw: Any, joint: str, source: str, key: str) -> JointMapping:
    if isinstance(raw, str):
        return JointMapping(_string(raw, source, key))
    if raw is None:
        raw = {}
    raw = _mapping(raw, source, key, "a mapping {name: ..., offset: ..., sign: ...} or a name")
    _check_keys(raw, ("name", "offset", "sign"), source, key)
    name = joint if raw.get("name") is None else _string(raw["name"], source, f"{key}.name")
    offset = 0.0 if raw.get("offset") is None else _number(raw["offset"], source,
                                                            f"{key}.offset")
    sign = raw.get("sign", 1)
    if not _is_number(sign) or float(sign) not in (1.0, -1.0):
        _fail(source, f"{key}.sign", f"must be 1 or -1, got {_describe(sign)}")
    return JointMapping(name=name, offset=offset, sign=int(sign))


def _parse_recording(raw: Any, rig: RigSpec, source: str) -> RecordingSettings:
    raw = _mapping(raw, source, "recording")
    names = tuple(f.name for f in dataclasses.fields(RecordingSettings))
    _check_keys(raw, names, source, "recording")
    default = RecordingSettings.for_rig(rig)

    def text(name):
        value = raw.get(name)
        return getattr(default, name) if value is None else _string(value, source,
                                                                    f"recording.{name}")

    joints = dict(default.joints)
    if raw.get("joints") is not None:
        raw_joints = _mapping(raw["joints"], source, "recording.joints",
                              "a mapping of rig joints to recorded joints")
        for joint in raw_joints:
            if joint not in rig.joints:
                _fail(source, f"recording.joints.{joint}",
                      f"unknown joint of rig {rig.name}{_suggest(str(joint), rig.joints)} "
                      f"(rig joints: {', '.join(rig.joints)})")
        for joint in rig.joints:
            if joint not in raw_joints:
                _fail(source, "recording.joints",
                      f"missing an entry for rig joint {joint!r} (e.g. {joint}: {{name: "
                      f"<recorded joint name>, offset: 0.0, sign: 1}})")
        joints = {joint: _parse_joint(raw_joints[joint], joint, source,
                                      f"recording.joints.{joint}") for joint in rig.joints}
        seen: dict[str, str] = {}
        for joint, mapping in joints.items():
            if mapping.name in seen:
                _fail(source, "recording.joints", f"rig joints {seen[mapping.name]!r} and "
                                                  f"{joint!r} both map to recorded joint "
                                                  f"{mapping.name!r}")
            seen[mapping.name] = joint

    voltage_type = default.voltage_type
    if raw.get("voltage_type") is not None:
        given = _string(raw["voltage_type"], source, "recording.voltage_type")
        voltage_type = _choice(_normalise_message_type(given), VOLTAGE_TYPES, source,
                               "recording.voltage_type", "voltage message type")
    voltage_index = default.voltage_index
    if raw.get("voltage_index") is not None:
        voltage_index = _integer(raw["voltage_index"], source, "recording.voltage_index",
                                 minimum=0)
    voltage_joint = None
    if raw.get("voltage_joint") is not None:
        voltage_joint = _string(raw["voltage_joint"], source, "recording.voltage_joint")
    if voltage_type == "sensor_msgs/msg/JointState" and voltage_joint is None and rig.inputs:
        _fail(source, "recording.voltage_joint",
              "required when voltage_type is sensor_msgs/msg/JointState (the recorded joint "
              "whose effort field holds the voltage)")
    stamp_source = default.stamp_source
    if raw.get("stamp_source") is not None:
        stamp_source = _choice(raw["stamp_source"], STAMP_SOURCES, source,
                               "recording.stamp_source", "stamp source")
    voltage_script = None
    if raw.get("voltage_script") is not None:
        voltage_script = _parse_voltage_script(raw["voltage_script"], source)
    use_driver_velocities = raw.get("use_driver_velocities", False)
    if not isinstance(use_driver_velocities, bool):
        _fail(source, "recording.use_driver_velocities",
              f"expected true or false, got {use_driver_velocities!r}")
    return RecordingSettings(
        joint_states_topic=text("joint_states_topic"),
        joints=joints,
        voltage_topic=text("voltage_topic"),
        voltage_type=voltage_type,
        voltage_index=voltage_index,
        voltage_joint=voltage_joint,
        stamp_source=stamp_source,
        voltage_script=voltage_script,
        use_driver_velocities=use_driver_velocities,
    )


def _parse_voltage_script(raw: Any, source: str) -> tuple[tuple[float, float], ...]:
    key = "recording.voltage_script"
    example = "a list of [time_s, value] pairs, e.g. [[0.0, 0.43]] for a constant input"
    if _is_number(raw):
        return ((0.0, float(raw)),)
    if not isinstance(raw, list) or not raw:
        _fail(source, key, f"must be a number or {example}, got {_describe(raw)}")
    pairs = []
    for k, pair in enumerate(raw):
        if not (isinstance(pair, list) and len(pair) == 2 and all(map(_is_number, pair))):
            _fail(source, f"{key}[{k}]", f"must be a [time_s, value] pair of numbers, got "
                                         f"{_describe(pair)}")
        pairs.append((float(pair[0]), float(pair[1])))
    times = [t for t, _ in pairs]
    if any(b <= a for a, b in zip(times[:-1], times[1:], strict=True)):
        _fail(source, key, f"times must increase, got {times}")
    if not all(math.isfinite(v) for pair in pairs for v in pair):
        _fail(source, key, "times and values must be finite")
    return tuple(pairs)


# --------------------------------------------------------------------------------------------
# Public API


def parse_config(data: Any, source: str = "<config>") -> Config:
    """Validate plain data (as loaded from YAML) into a :class:`Config`.

    ``source`` names the origin in error messages. Raises :class:`ConfigError`.
    """
    if data is None:
        _fail(source, None, "the configuration is empty; expected a mapping with at least "
                            "'rig' and 'parameters'")
    if not isinstance(data, Mapping):
        _fail(source, None, f"expected a mapping with keys {', '.join(TOP_LEVEL_KEYS)} at the "
                            f"top level, got {_describe(data)}")
    _check_keys(data, TOP_LEVEL_KEYS, source, None)

    if data.get("rig") is None:
        _fail(source, "rig", f"missing; choose one of {', '.join(RIGS)}")
    rig = RIGS[_choice(data["rig"], tuple(RIGS), source, "rig", "rig")]

    friction = None
    if rig.name == "pendulum":
        friction = _DEFAULT_PENDULUM_FRICTION
        if data.get("friction") is not None:
            friction = _choice(data["friction"], PENDULUM_FRICTION_MODELS, source, "friction",
                               "friction model")
    elif data.get("friction") is not None:
        _fail(source, "friction", f"only the pendulum rig has a choice of friction model; remove "
                                  f"this key for rig {rig.name}")

    drift_correction = data.get("drift_correction", False)
    if not isinstance(drift_correction, bool):
        _fail(source, "drift_correction",
              f"expected true or false, got {_describe(drift_correction)}")
    parameters = _parse_parameters(data.get("parameters"), rig, source)
    free = _parse_free(data.get("free"), rig, friction, parameters, source)
    return Config(
        rig=rig.name,
        friction=friction,
        parameters=parameters,
        free=free,
        method=_parse_method(data.get("method"), source),
        simulation=_parse_simulation(data.get("simulation"), source),
        recording=_parse_recording(data.get("recording"), rig, source),
        node=_parse_node(data.get("node"), source),
        drift_correction=drift_correction,
        source=source,
    )


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML configuration file.

    A bare name without directory or ``.yaml`` suffix that is not an existing file (``furuta``)
    names a built-in configuration (:func:`builtin_config_path`). Raises :class:`ConfigError`.
    """
    path = Path(path)
    source = str(path)
    if not path.exists():
        if path.suffix == "" and path.parent == Path(".") and path.name in builtin_config_names():
            path = builtin_config_path(path.name)
            source = str(path)
        else:
            _fail(source, None, f"file not found (built-in configurations, usable by name: "
                                f"{', '.join(builtin_config_names()) or 'none found'})")
    if path.is_dir():
        _fail(source, None, "is a directory, expected a YAML configuration file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        _fail(source, None, "is not a UTF-8 text file, expected a YAML configuration file")
    except OSError as error:
        _fail(source, None, f"cannot be read: {error.strerror or error}")
    return parse_config(_yaml_load(text, source), source)


def _config_dirs() -> list[Path]:
    """Directories that may hold the built-in configurations, most specific first."""
    here = Path(__file__).resolve()
    candidates = []
    checkout = here.parents[2]  # repository root of a source checkout / editable install
    if (checkout / "resource" / "mb_estimation").is_file():
        candidates.append(checkout / "config")
    try:  # a ROS 2 (colcon) install
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory("mb_estimation")) / "config")
    except Exception:  # no ament index, or the package is not in it
        pass
    share = Path("share") / "mb_estimation" / "config"
    if len(here.parents) > 5:  # <prefix>/lib/pythonX.Y/site-packages/mb_estimation/io/config.py
        candidates.append(here.parents[5] / share)
    for prefix in (sys.prefix, sys.exec_prefix, sys.base_prefix, site.USER_BASE):
        if prefix:
            candidates.append(Path(prefix) / share)
    unique: list[Path] = []
    for candidate in candidates:
        if candidate.is_dir() and candidate not in unique:
            unique.append(candidate)
    return unique


def builtin_config_names() -> tuple[str, ...]:
    """Names of the built-in configurations (``furuta``, ``examples/...``), sorted."""
    names: set[str] = set()
    for directory in _config_dirs():
        names.update(p.stem for p in directory.glob("*.yaml"))
        names.update(f"examples/{p.stem}" for p in directory.glob("examples/*.yaml"))
    return tuple(sorted(names))


def builtin_config_path(name: str) -> Path:
    """Path of a built-in configuration, e.g. ``builtin_config_path("furuta")``.

    ``name`` may carry the ``.yaml`` suffix and an ``examples/`` prefix. Looks in the source
    checkout's ``config/`` (editable installs) first, then in ``share/mb_estimation/config`` of
    the ament index and the install prefixes. Raises :class:`ConfigError` when not found.
    """
    relative = name if name.endswith((".yaml", ".yml")) else f"{name}.yaml"
    directories = _config_dirs()
    for directory in directories:
        candidate = directory / relative
        if candidate.is_file():
            return candidate
    available = ", ".join(builtin_config_names()) or "none"
    searched = ", ".join(str(d) for d in directories) or "no config directory found"
    _fail(name, None, f"no such built-in configuration (available: {available}; "
                      f"searched: {searched})")


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_free_list(text: str) -> list[str]:
    """Split a ``--free`` argument ``"J_Azz,J_Byy"`` into names (``""`` gives ``[]``).

    Only the syntax is checked here; :func:`apply_overrides` checks the names against the rig.
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if not _NAME.match(name):
            _fail("--free", None, f"{name!r} is not a parameter name (expected NAME,NAME,...)")
    return names


def _split_top_level(text: str, source: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                _fail(source, None, f"unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        _fail(source, None, f"unbalanced '[' in {text!r}")
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def parse_assignments(text: str) -> dict[str, float | tuple[float, ...]]:
    """Parse a ``--set`` argument: ``"J_Azz=0.01,b1=1e-4,tilt=[1,0,0,0]"``.

    Values are numbers or bracketed lists of numbers (quaternions), returned as floats and tuples
    of floats. Names are checked against the rig by :func:`apply_overrides`.
    """
    source = "--set"
    values: dict[str, float | tuple[float, ...]] = {}
    for item in _split_top_level(text, source):
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not _NAME.match(name) or not raw:
            _fail(source, None, f"{item!r} is not an assignment NAME=VALUE "
                                f"(e.g. J_Azz=0.01,tilt=[1,0,0,0])")
        if name in values:
            _fail(source, name, "given twice")
        try:
            value = yaml.load(raw, Loader=_Loader)  # a SafeLoader subclass
        except yaml.YAMLError:
            value = raw
        if _is_number(value):
            values[name] = float(value)
        elif isinstance(value, list) and value and all(_is_number(x) for x in value):
            values[name] = tuple(float(x) for x in value)
        else:
            _fail(source, name, f"expected a number or a list like [1, 0, 0, 0], got {raw!r}")
    return values


def with_section_values(config: Config, section: str, changes: Mapping[str, Any],
                        source: str = "override") -> Config:
    """``config`` with ``changes`` to its ``node`` section or its ``recording`` topics.

    Checked as the YAML is (the same messages, naming ``section.key``); for the node's own
    settings (e.g. ROS parameters that default to the config's values).
    """
    if section == "node":
        raw = {**dataclasses.asdict(config.node), **changes}
        return dataclasses.replace(config, node=_parse_node(raw, source))
    if section == "recording" and set(changes) <= {"joint_states_topic", "voltage_topic"}:
        checked = {key: _string(value, source, f"recording.{key}")
                   for key, value in changes.items()}
        return dataclasses.replace(config, recording=dataclasses.replace(config.recording,
                                                                         **checked))
    raise ValueError(f"no such settings: {section} {sorted(changes)}")


def apply_overrides(
    config: Config,
    *,
    free: Iterable[str] | None = None,
    set_values: Mapping[str, Any] | None = None,
    dt: float | None = None,
    kappa: float | None = None,
    compliance: float | None = None,
    max_iterations: int | None = None,
    estimator: str | None = None,
    simulation_refinement: bool | str | None = None,
) -> Config:
    """Apply command-line overrides (DESIGN.md section 6) and validate the result.

    ``free`` replaces the set of free parameters; a name that was already free keeps the bounds
    the config gave it, a new one gets its default range. ``compliance`` sets every compliance
    parameter of the rig (``COMPLIANCE_PARAMETERS``); ``set_values`` then overrides single values
    (for free parameters: initial values). ``dt``, ``kappa``, ``max_iterations``,
    ``estimator`` and ``simulation_refinement`` override the method settings; ``dt`` is the
    estimation step of either estimator (the paper's step and the consistent path's finest
    step). Returns a new :class:`Config`; raises :class:`ConfigError`.
    """
    rig = config.rig_spec
    parameters = dict(config.parameters)
    origin = {name: f"from {config.source}" for name in parameters}

    if compliance is not None:
        eps = _positive(compliance, "--compliance", None)
        for name in COMPLIANCE_PARAMETERS[rig.name]:
            parameters[name] = _parameter_value(rig.parameter(name), eps, "--compliance", name)
            origin[name] = "set by --compliance"

    for name, value in (set_values or {}).items():
        spec = _resolve_parameter(rig, name, "--set", str(name))
        parameters[name] = _parameter_value(spec, value, "--set", name)
        origin[name] = "set by --set"

    if free is None:
        free_bounds = dict(config.free)
    else:
        if isinstance(free, str):
            free = parse_free_list(free)
        free_bounds = {}
        for name in free:
            spec = _resolve_parameter(rig, name, "--free", str(name))
            _check_friction_use(rig, config.friction, name, "--free", name)
            free_bounds[name] = config.free.get(name, _default_bounds(spec))
        free_bounds = {name: free_bounds[name] for name in rig.parameter_names
                       if name in free_bounds}

    for name, bounds in free_bounds.items():
        where = origin[name]
        source = where.removeprefix("set by ") if where.startswith("set by") else config.source
        key = name if where.startswith("set by") else f"parameters.{name}"
        _check_initial_value(rig.parameter(name), parameters[name], bounds, source, key,
                             f"{where}; bounds of free parameter {name}")

    method = config.method
    if dt is not None:
        step = _positive(dt, "--dt", None)
        method = dataclasses.replace(method, dt=step, refinement_dt=step)
    if estimator is not None:
        method = dataclasses.replace(
            method, estimator=_choice(estimator, ESTIMATORS, "--estimator", None, "estimator"))
    if simulation_refinement is not None:
        method = dataclasses.replace(method, simulation_refinement=_refinement_mode(
            simulation_refinement, "--simulation-refinement", None))
    if kappa is not None:
        method = dataclasses.replace(method, kappa=_positive(kappa, "--kappa", None))
    if max_iterations is not None:
        method = dataclasses.replace(
            method, max_iterations=_integer(max_iterations, "--max-iterations", None, minimum=0))
    return dataclasses.replace(config, parameters=parameters, free=free_bounds, method=method)
