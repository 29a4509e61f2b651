"""Overrides of a loaded configuration, and the text grammar they are written in.

The command line (``--free``, ``--set``, ``--step``, ``--kappa``, ``--compliance``, ...), the node's
``free``/``set``/``compliance`` and settings ROS parameters, the sweep and
the node core all change a :class:`~mb_estimation.config.schema.Config` through
:func:`apply_overrides` and :func:`with_node_values`, which validate exactly like the file
and name the config key in their messages (``parameters.J_Azz``, ``method.step_s``). The caller
names where the values came from (``sources``, ``source``): ``override`` unless told, the
command line its flags, the node ``ROS parameter ...``. The text forms ``J_Azz,J_Byy`` and
``J_Azz=0.01,tilt=[1,0,0,0]`` are parsed by :func:`parse_free_list` and
:func:`parse_assignments`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from mb_estimation.config.checks import choice, fail, is_number, positive
from mb_estimation.config.load import Loader
from mb_estimation.config.parameters import (
    check_friction_use,
    check_initial_value,
    check_ripple,
    default_bounds,
    parameter_value,
    resolve_parameter,
)
from mb_estimation.config.schema import HINGE_DECLARATIONS, Config
from mb_estimation.config.sections import (
    ADVANCED_FIELDS,
    METHOD_FIELDS,
    parse_node,
)
from mb_estimation.rigs.parameters import COMPLIANCE_PARAMETERS

__all__ = ["apply_overrides", "parse_assignments", "parse_free_list", "with_node_values"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: What a value of :func:`apply_overrides` is called in messages unless its caller says.
DEFAULT_SOURCE = "override"


# --------------------------------------------------------------------------------------------
# The text grammar


def parse_free_list(text: str, source: str = "--free") -> list[str]:
    """Split a ``--free`` argument ``"J_Azz,J_Byy"`` into names (``""`` gives ``[]``).

    Only the syntax is checked here; :func:`apply_overrides` checks the names against the rig.
    ``source`` names the text's origin in messages.
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if not _NAME.match(name):
            fail(source, None, f"{name!r} is not a parameter name (expected NAME,NAME,...)")
    return names


def _split_top_level(text: str, source: str) -> list[str]:
    """``text`` split at the commas outside brackets, the parts stripped (empty ones dropped)."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                fail(source, None, f"unbalanced ']' in {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        fail(source, None, f"unbalanced '[' in {text!r}")
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def parse_assignments(text: str, source: str = "--set") -> dict[str, float | tuple[float, ...]]:
    """Parse a ``--set`` argument: ``"J_Azz=0.01,b1=1e-4,tilt=[1,0,0,0]"``.

    Values are numbers or bracketed lists of numbers (quaternions), returned as floats and tuples
    of floats. Names are checked against the rig by :func:`apply_overrides`. ``source`` names
    the text's origin in messages.
    """
    values: dict[str, float | tuple[float, ...]] = {}
    for item in _split_top_level(text, source):
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not _NAME.match(name) or not raw:
            fail(source, None, f"{item!r} is not an assignment NAME=VALUE "
                               f"(e.g. J_Azz=0.01,tilt=[1,0,0,0])")
        if name in values:
            fail(source, name, "given twice")
        try:
            value = yaml.load(raw, Loader=Loader)  # a SafeLoader subclass
        except yaml.YAMLError:
            value = raw
        if is_number(value):
            values[name] = float(value)
        elif isinstance(value, list) and value and all(is_number(x) for x in value):
            values[name] = tuple(float(x) for x in value)
        else:
            fail(source, name, f"expected a number or a list like [1, 0, 0, 0], got {raw!r}")
    return values


# --------------------------------------------------------------------------------------------
# Overrides


def with_node_values(config: Config, changes: Mapping[str, Any],
                     source: str = DEFAULT_SOURCE) -> Config:
    """``config`` with ``changes`` to its ``node`` section.

    Checked as the YAML is (the same messages, naming ``node.key``); for the node's own
    settings (ROS parameters that default to the config's values).
    """
    raw = {**dataclasses.asdict(config.node), **changes}
    return dataclasses.replace(config, node=parse_node(raw, source))


def apply_overrides(
    config: Config,
    *,
    free: Iterable[str] | None = None,
    set_values: Mapping[str, Any] | None = None,
    step_s: float | None = None,
    kappa: float | None = None,
    compliance: float | None = None,
    max_iterations: int | None = None,
    estimator: str | None = None,
    simulation_refinement: bool | str | None = None,
    hinges: str | None = None,
    sources: Mapping[str, str] | None = None,
) -> Config:
    """Apply overrides (the command line's) and validate the result.

    ``free`` replaces the set of free parameters; a name that was already free keeps the bounds
    the config gave it, a new one gets its default range. ``compliance`` sets every compliance
    parameter of the rig (``COMPLIANCE_PARAMETERS``); ``set_values`` then overrides single values
    (for free parameters: initial values). ``step_s``, ``kappa``, ``max_iterations`` and
    ``simulation_refinement`` override the method settings, ``estimator`` the advanced one.
    ``hinges`` replaces the config's hinge declaration. Messages name the config key
    (``parameters.m_A``, ``free.J_Q``, ``method.step_s``) and, before it, where the value came
    from: ``sources[argument]`` (e.g. the CLI's ``{"step_s": "--step"}``), else ``"override"``.
    Returns a new :class:`Config`; raises :class:`ConfigError`.
    """
    def origin_of(argument: str) -> str:
        return (sources or {}).get(argument, DEFAULT_SOURCE)

    rig = config.rig_spec
    parameters = dict(config.parameters)
    set_by: dict[str, str] = {}  # parameter -> where its overriding value came from

    if compliance is not None:
        origin = origin_of("compliance")
        names = COMPLIANCE_PARAMETERS[rig.name]
        eps = positive(compliance, origin, f"parameters.{names[0]}")
        for name in names:
            parameters[name] = parameter_value(rig.parameter(name), eps, origin,
                                               f"parameters.{name}")
            set_by[name] = origin

    origin = origin_of("set_values")
    for name, value in (set_values or {}).items():
        spec = resolve_parameter(rig, name, origin, f"parameters.{name}")
        parameters[name] = parameter_value(spec, value, origin, f"parameters.{name}")
        set_by[name] = origin

    if free is None:
        free_bounds = dict(config.free)
    else:
        origin = origin_of("free")
        if isinstance(free, str):
            free = parse_free_list(free, origin)
        free_bounds = {}
        free = list(free)
        for name in free:
            if free.count(name) > 1:
                fail(origin, None, f"{name} is named twice")
            spec = resolve_parameter(rig, name, origin, f"free.{name}")
            check_friction_use(rig, config.friction, name, origin, f"free.{name}")
            free_bounds[name] = config.free.get(name, default_bounds(spec))
        free_bounds = {name: free_bounds[name] for name in rig.parameter_names
                       if name in free_bounds}

    for name, bounds in free_bounds.items():
        origin = set_by.get(name, config.source)
        where = f"set by {origin}" if name in set_by else f"from {config.source}"
        check_initial_value(rig.parameter(name), parameters[name], bounds, origin,
                            f"parameters.{name}", f"{where}; bounds of free parameter {name}")

    check_ripple(rig, config.ripple_per_revolution, parameters, free_bounds,
                 origin_of("free") if free is not None else config.source)

    changes = {"step_s": step_s, "simulation_refinement": simulation_refinement,
               "kappa": kappa, "max_iterations": max_iterations}
    method = {key: METHOD_FIELDS[key](value, origin_of(key), f"method.{key}")  # as in the file
              for key, value in changes.items() if value is not None}
    advanced = {} if estimator is None else {"estimator": ADVANCED_FIELDS["estimator"](
        estimator, origin_of("estimator"), "advanced.estimator")}
    declared = config.hinges if hinges is None else choice(
        hinges, HINGE_DECLARATIONS, origin_of("hinges"), "hinges", "hinge declaration")
    return dataclasses.replace(config, parameters=parameters, free=free_bounds, hinges=declared,
                               method=dataclasses.replace(config.method, **method),
                               advanced=dataclasses.replace(config.advanced, **advanced))

