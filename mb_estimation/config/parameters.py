"""The ``parameters`` and ``free`` sections: values and bounds against the rig's specs.

Every value is checked against its :class:`~mb_estimation.rigs.parameters.ParameterSpec` (kind,
admissible range), a free parameter's bounds against the spec and its initial value, and a
pendulum's free parameters against its friction model. :mod:`mb_estimation.config.overrides`
checks overridden values with the same functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mb_estimation.config.checks import (
    check_keys,
    describe,
    fail,
    fmt,
    mapping,
    number,
    quaternion,
    suggest,
)
from mb_estimation.config.schema import Bounds
from mb_estimation.rigs.parameters import (
    RIPPLE_PARAMETERS,
    ParameterSpec,
    RigSpec,
    parameters_in_use,
)

# Pendulum parameters that only a particular friction model uses (paper §4.2, (4.1)).
PENDULUM_FRICTION_PARAMETERS = {
    "viscous": (),
    "dry": ("r_mu",),
    "stribeck": ("r_mu_k", "r_mu_delta", "zeta"),
}
DEFAULT_PENDULUM_FRICTION = "dry"
_TINY_LOWER = 1e-9  # spec lower bounds at or below this (but > 0) read as "must be positive"


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
            need = f"must be at least {fmt(spec.lower)}"
        fail(source, key, f"{need} ({spec.name}: {_range_text(spec)}), got {fmt(value)}")
    if value > spec.upper:
        fail(source, key, f"must be at most {fmt(spec.upper)} ({spec.name}: "
                          f"{_range_text(spec)}), got {fmt(value)}")


def parameter_value(spec: ParameterSpec, value: Any, source: str, key: str):
    """A parameter's value: a unit quaternion tuple, or a float in the spec's range."""
    if spec.kind == "quaternion":
        return quaternion(value, source, key)
    result = number(value, source, key)
    _check_range(spec, result, source, key)
    return result


def resolve_parameter(rig: RigSpec, name: Any, source: str, key: str) -> ParameterSpec:
    """The spec of the rig's parameter ``name`` (else the message suggests the closest)."""
    if isinstance(name, str) and name in rig.parameter_names:
        return rig.parameter(name)
    hint = suggest(str(name), rig.parameter_names)
    fail(source, key, f"not a parameter of rig {rig.name}{hint} "
                      f"(parameters: {', '.join(rig.parameter_names)})")


def parse_parameters(raw: Any, rig: RigSpec, source: str) -> dict[str, Any]:
    """The ``parameters`` section: every parameter of ``rig``, in the rig's order.

    A parameter with a default (gravity, the tilt, the hinges' compliance and damping, the
    Furuta's shaft inertia and dry friction) may be left out; every other one must be given.
    """
    if raw is None:
        fail(source, "parameters", f"missing; every parameter of rig {rig.name} must be given: "
                                   f"{', '.join(rig.parameter_names)}")
    raw = mapping(raw, source, "parameters", "a mapping of parameter names to values")
    for name in raw:
        if name not in rig.parameter_names:
            fail(source, f"parameters.{name}",
                 f"unknown parameter of rig {rig.name}{suggest(str(name), rig.parameter_names)}"
                 f" (parameters: {', '.join(rig.parameter_names)})")
    missing = [spec for spec in rig.parameters
               if raw.get(spec.name) is None and spec.default is None]
    if missing:
        listed = "; ".join(f"{spec.name} ({_range_text(spec)})" for spec in missing)
        plural = "s" if len(missing) > 1 else ""
        fail(source, "parameters", f"missing value{plural} for {listed}; every parameter of rig "
                                   f"{rig.name} must be given")
    return {spec.name: parameter_value(spec, spec.default if raw.get(spec.name) is None
                                       else raw[spec.name], source, f"parameters.{spec.name}")
            for spec in rig.parameters}


def default_bounds(spec: ParameterSpec) -> Bounds:
    """A free parameter's bounds when none are given: the spec's range (quaternions: none)."""
    if spec.kind == "quaternion":
        return Bounds(-math.inf, math.inf)
    return Bounds(spec.lower, spec.upper)


def _parse_bounds(raw: Any, spec: ParameterSpec, source: str, key: str) -> Bounds:
    raw = mapping(raw, source, key, "a mapping {lower: ..., upper: ...} (or {})")
    check_keys(raw, ("lower", "upper"), source, key)
    if spec.kind == "quaternion":
        if raw:
            fail(source, key, f"bounds do not apply to the quaternion parameter {spec.name} "
                              f"(it is estimated in its 3-dimensional tangent space); use {{}}")
        return default_bounds(spec)
    lower = spec.lower
    upper = spec.upper
    if raw.get("lower") is not None:
        lower = number(raw["lower"], source, f"{key}.lower", allow_infinite=True)
        if lower < spec.lower:
            _check_range(spec, lower, source, f"{key}.lower")
    if raw.get("upper") is not None:
        upper = number(raw["upper"], source, f"{key}.upper", allow_infinite=True)
        if upper > spec.upper:
            _check_range(spec, upper, source, f"{key}.upper")
    if lower > upper:
        fail(source, key, f"lower bound {fmt(lower)} is greater than upper bound {fmt(upper)}")
    if lower == upper:
        fail(source, key, f"lower and upper bound are both {fmt(lower)}; a free parameter needs "
                          f"lower < upper (to hold it fixed, remove it from free)")
    return Bounds(lower, upper)


def check_friction_use(rig: RigSpec, friction: str | None, name: str, source: str,
                       key: str) -> None:
    """A pendulum parameter of another friction model than ``friction`` cannot be free."""
    if rig.name != "pendulum" or friction is None:
        return
    for model, names in PENDULUM_FRICTION_PARAMETERS.items():
        if name in names and model != friction:
            fail(source, key, f"{name} is not used by the {friction!r} friction model (it "
                              f"belongs to friction: {model}); it cannot be estimated")


def check_initial_value(spec: ParameterSpec, value: Any, bounds: Bounds, source: str, key: str,
                        origin: str) -> None:
    """A free parameter's value lies in its bounds (``origin`` says where the value is from)."""
    if spec.kind == "quaternion" or bounds.contains(value):
        return
    fail(source, key, f"initial value {fmt(value)} ({origin}) is outside the bounds "
                      f"[{fmt(bounds.lower)}, {fmt(bounds.upper)}]")


def parse_free(raw: Any, rig: RigSpec, friction: str | None, parameters: Mapping[str, Any],
               source: str) -> dict[str, Bounds]:
    """The ``free`` section (a list of names or ``{name: bounds}``), in the rig's order."""
    if raw is None:
        return {}
    entries: dict[str, Any] = {}
    if isinstance(raw, Mapping):
        entries = dict(raw)
    elif isinstance(raw, Sequence) and not isinstance(raw, str):
        for index, name in enumerate(raw):
            if not isinstance(name, str):
                fail(source, f"free[{index}]", f"expected a parameter name, got {describe(name)}")
            if name in entries:
                fail(source, "free", f"{name} is listed twice")
            entries[name] = None
    else:
        fail(source, "free", f"expected a list of parameter names or a mapping "
                             f"name: {{lower: ..., upper: ...}}, got {describe(raw)}")
    free: dict[str, Bounds] = {}
    for name, raw_bounds in entries.items():
        key = f"free.{name}"
        spec = resolve_parameter(rig, name, source, key)
        check_friction_use(rig, friction, spec.name, source, key)
        bounds = _parse_bounds(raw_bounds, spec, source, key)
        check_initial_value(spec, parameters[name], bounds, source, key, f"parameters.{name}")
        free[name] = bounds
    return {name: free[name] for name in rig.parameter_names if name in free}


def check_ripple(rig: RigSpec, per_revolution: int, parameters: Mapping[str, Any],
                 free: Mapping[str, Any], source: str) -> None:
    """A torque ripple with an amplitude (free or non-zero) needs its period per revolution.

    A period without an amplitude is allowed: the ripple stays off (a ``--set`` or ``--free``
    may give it one).
    """
    used = parameters_in_use(RIPPLE_PARAMETERS[rig.name], parameters, free)
    if used and not per_revolution:
        fail(source, "ripple_per_revolution", f"missing: the arm's torque ripple is on "
                                              f"({', '.join(used)}); say how many periods it "
                                              "has per revolution (the motor's pole pairs or "
                                              "slots)")
