"""Reading configurations: the YAML dialect, :func:`parse_config` and :func:`load_config`.

The dialect is PyYAML's safe loader with two changes: ``1e-4`` (no dot) is a number, and a key
given twice in a mapping is an error. :func:`parse_config` checks plain data section by section
(:mod:`mb_estimation.config.parameters`, :mod:`mb_estimation.config.sections`);
:func:`load_config` finds the file (a path or a built-in name,
:func:`mb_estimation.config.builtin.resolve_config`), reads and parses it.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import yaml

from mb_estimation.config.builtin import resolve_config
from mb_estimation.config.checks import check_keys, choice, describe, fail, integer, mapping
from mb_estimation.config.parameters import (
    DEFAULT_PENDULUM_FRICTION,
    check_ripple,
    parse_free,
    parse_parameters,
)
from mb_estimation.config.schema import (
    HINGE_DECLARATIONS,
    TOP_LEVEL_KEYS,
    Config,
    ConfigError,
    JointMapping,
)
from mb_estimation.config.sections import (
    parse_advanced,
    parse_method,
    parse_node,
    parse_recording,
    parse_simulation,
)
from mb_estimation.config.urdf import read_urdf_section, reads_robot_description
from mb_estimation.rigs.parameters import PENDULUM_FRICTION_MODELS, RIGS


class Loader(yaml.SafeLoader):
    """SafeLoader that reads ``1e-4`` as a float and rejects duplicate keys."""


# PyYAML follows YAML 1.1, where a float needs a dot: ``1e-4`` would be the string "1e-4".
Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _construct_mapping(loader: Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    result: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                "found an unhashable key", key_node.start_mark)
        if key in result:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r}", key_node.start_mark)
        result[key] = loader.construct_object(value_node, deep=deep)
    return result


Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def yaml_load(text: str, source: str) -> Any:
    """Plain data of YAML ``text`` in the dialect; a syntax error is a :class:`ConfigError`."""
    try:
        return yaml.load(text, Loader=Loader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = error.problem or error.context or "syntax error"
        raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: invalid YAML: {error}") from None


def parse_config(data: Any, source: str = "<config>", robot_description: str | None = None
                 ) -> Config:
    """Validate plain data (as loaded from YAML) into a :class:`Config`.

    ``source`` names the origin in error messages; ``robot_description``: the URDF text of a
    ``urdf.file: robot_description`` (:mod:`mb_estimation.config.urdf`). Raises
    :class:`ConfigError`.
    """
    if data is None:
        fail(source, None, "the configuration is empty; expected a mapping with at least "
                           "'rig' and 'parameters'")
    if not isinstance(data, Mapping):
        fail(source, None, f"expected a mapping with keys {', '.join(TOP_LEVEL_KEYS)} at the "
                           f"top level, got {describe(data)}")
    check_keys(data, TOP_LEVEL_KEYS, source, None)

    if data.get("rig") is None:
        fail(source, "rig", f"missing; choose one of {', '.join(RIGS)}")
    rig = RIGS[choice(data["rig"], tuple(RIGS), source, "rig", "rig")]

    friction = None
    if rig.name == "pendulum":
        friction = DEFAULT_PENDULUM_FRICTION
        if data.get("friction") is not None:
            friction = choice(data["friction"], PENDULUM_FRICTION_MODELS, source, "friction",
                              "friction model")
    elif data.get("friction") is not None:
        fail(source, "friction", f"only the pendulum rig has a choice of friction model; remove "
                                 f"this key for rig {rig.name}")

    hinges = choice(data.get("hinges") or "rigid", HINGE_DECLARATIONS, source, "hinges",
                    "hinge declaration")
    ripple = 0
    if data.get("ripple_per_revolution") is not None:
        if rig.name != "furuta":
            fail(source, "ripple_per_revolution", f"only the furuta rig has a torque ripple; "
                                                  f"remove this key for rig {rig.name}")
        ripple = integer(data["ripple_per_revolution"], source, "ripple_per_revolution",
                         minimum=1)
    urdf, raw_parameters, joints = None, data.get("parameters"), None
    if data.get("urdf") is not None:
        if rig.name != "furuta":
            fail(source, "urdf", f"only the furuta rig is read from a URDF; remove this key "
                                 f"for rig {rig.name}")
        urdf = read_urdf_section(data["urdf"], source, robot_description)
        raw_parameters = {**urdf.rig.parameters,
                          **mapping(raw_parameters, source, "parameters",
                                    "a mapping of parameter names to values")}
        joints = {joint: JointMapping(name, offset, sign) for joint, name, sign, offset in zip(
            rig.joints, (urdf.rig.arm_joint, urdf.rig.pendulum_joint), urdf.rig.signs,
            urdf.rig.offsets, strict=True)}
    parameters = parse_parameters(raw_parameters, rig, source)
    free = parse_free(data.get("free"), rig, friction, parameters, source)
    check_ripple(rig, ripple, parameters, free, source)
    return Config(
        rig=rig.name,
        friction=friction,
        parameters=parameters,
        free=free,
        method=parse_method(data.get("method"), source),
        simulation=parse_simulation(data.get("simulation"), source),
        recording=parse_recording(data.get("recording"), rig, source, joints),
        node=parse_node(data.get("node"), source),
        advanced=parse_advanced(data.get("advanced"), source),
        hinges=hinges,
        ripple_per_revolution=ripple,
        source=source,
        urdf=urdf,
    )


def load_config(path: str | Path, robot_description: str | None = None) -> Config:
    """Read and validate a YAML configuration file.

    ``path`` is a file, or the bare name of a built-in configuration (``furuta``, see
    :func:`~mb_estimation.config.builtin.resolve_config`); ``robot_description`` as
    :func:`parse_config` takes it. Raises :class:`ConfigError`.
    """
    path = resolve_config(path)
    source = str(path)
    if path.is_dir():
        fail(source, None, "is a directory, expected a YAML configuration file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        fail(source, None, "is not a UTF-8 text file, expected a YAML configuration file")
    except OSError as error:
        fail(source, None, f"cannot be read: {error.strerror or error}")
    return parse_config(yaml_load(text, source), source, robot_description)


def needs_robot_description(path: str | Path) -> bool:
    """Whether the configuration at ``path`` takes its rig from ``robot_description``.

    (``urdf.file: robot_description``: the node reads it from ROS first.) False where the file
    cannot be read: :func:`load_config` then says why.
    """
    try:
        data = yaml_load(resolve_config(path).read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, ConfigError):
        return False
    return reads_robot_description(data)
