"""A config's ``urdf`` section: the rig read from a URDF or xacro file.

The file is expanded by ``xacro`` (PyPI's, ROS's own) with the section's arguments and parsed
by ``urdf_parser_py`` (urdfdom-py, ROS's URDF parser); the Furuta rig is then read from its
tree (:func:`~mb_estimation.rigs.furuta_urdf.furuta_from_urdf`). Section keys:

* ``file``: the ``.urdf`` or ``.xacro`` file, a path relative to the config, or
  ``robot_description``: the URDF robot_state_publisher serves, which the node reads
  (:data:`ROBOT_DESCRIPTION`; the text is then given to :func:`read_urdf_section`);
* ``args``: xacro arguments ``{name: value}``; ``args_file``: a file of them, a ROS parameters
  file (``/**: {ros__parameters: {...}}``) or a plain mapping, relative to the config
  (``args`` win);
* ``arm_joint``, ``pendulum_joint``: the joints' names (default: the URDF's two moving joints,
  the arm's nearer the root).
"""

from __future__ import annotations

import io
import math
from contextlib import redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mb_estimation.config.checks import check_keys, fail, mapping
from mb_estimation.rigs.furuta_urdf import (
    FurutaUrdf,
    UrdfError,
    UrdfInertial,
    UrdfJoint,
    UrdfLink,
    furuta_from_urdf,
    transform,
)
from mb_estimation.rigs.parameters import FURUTA

KEYS = ("file", "args", "args_file", "arm_joint", "pendulum_joint")
#: ``urdf.file`` that names the URDF robot_state_publisher serves (the node's parameter or topic)
ROBOT_DESCRIPTION = "robot_description"
#: A value read this little (relative) below its parameter's positive lower bound is that bound:
#: a fitted value at its bound comes back from the URDF's frames with round-off (1e-12 as
#: 9.99999996e-13).
ROUND_OFF = 1e-6


@dataclass(frozen=True)
class UrdfRig:
    """The rig as a URDF gave it: the file, its expanded text, its tree and what it says."""

    file: Path
    text: str = field(repr=False)
    links: tuple[UrdfLink, ...] = field(repr=False)
    joints: tuple[UrdfJoint, ...] = field(repr=False)
    rig: FurutaUrdf = field(repr=False)


def _one_line(error: BaseException) -> str:
    """An error's message on one line (parsers spread theirs over several)."""
    return " ".join(str(error).split()) or type(error).__name__


def _relative(value: Any, base: Path, source: str, key: str) -> Path:
    if not isinstance(value, str) or not value:
        fail(source, key, "must be a file name (a path relative to the config)")
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _arguments(raw: dict, base: Path, source: str) -> dict[str, str]:
    """The xacro arguments: ``args_file``'s, then ``args`` over them, as strings."""
    arguments: dict[str, Any] = {}
    if raw.get("args_file") is not None:
        path = _relative(raw["args_file"], base, source, "urdf.args_file")
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as error:
            fail(source, "urdf.args_file", f"{path} cannot be read: {error.strerror or error}")
        except yaml.YAMLError as error:
            fail(source, "urdf.args_file", f"{path} is not YAML: {_one_line(error)}")
        if isinstance(data, dict) and len(data) == 1:  # a ROS parameters file
            (only,) = data.values()
            if isinstance(only, dict) and isinstance(only.get("ros__parameters"), dict):
                data = only["ros__parameters"]
        if not isinstance(data, dict):
            fail(source, "urdf.args_file", f"{path} must hold a mapping of xacro arguments")
        arguments.update(data)
    if raw.get("args") is not None:
        arguments.update(mapping(raw["args"], source, "urdf.args", "a mapping of xacro "
                                 "arguments to values"))
    return {str(name): _argument_text(value) for name, value in arguments.items()}


def _argument_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def expanded_urdf(path: Path, arguments: dict[str, str], source: str,
                  named: frozenset[str] = frozenset()) -> str:
    """The URDF text of ``path``: as it is, or a ``.xacro`` expanded with ``arguments``.

    Each of ``named`` (the config's ``args``; an ``args_file`` may be a ROS parameters file
    shared with other nodes) must be an argument the xacro declares or uses.
    """
    if not path.is_file():
        fail(source, "urdf.file", f"{path} does not exist")
    if path.suffix != ".xacro":
        if arguments:
            fail(source, "urdf.args", f"{path} is not a .xacro file: it takes no arguments")
        return path.read_text(encoding="utf-8")
    import xacro  # only where a config names a xacro file

    asked = _AskedArguments(arguments)
    try:
        with redirect_stderr(io.StringIO()):  # xacro also prints what it raises
            text = xacro.process_file(str(path), mappings=asked).toxml()
    except Exception as error:  # xacro raises its own and XML errors
        fail(source, "urdf.file", f"xacro cannot expand {path.name}: {_one_line(error)}")
    unknown = sorted(set(named) - asked.asked)
    if unknown:  # xacro itself takes any name: a misspelt one would keep its default
        fail(source, "urdf.args", f"{', '.join(unknown)}: not an argument of {path.name} "
             f"(it declares or uses {', '.join(sorted(asked.asked)) or 'none'})")
    return text


class _AskedArguments(dict):
    """xacro's arguments, remembering the names xacro looked up (declared or used)."""

    def __init__(self, arguments: dict[str, str]) -> None:
        super().__init__(arguments)
        self.asked: set[str] = set()

    def __contains__(self, name) -> bool:
        self.asked.add(name)
        return super().__contains__(name)

    def __getitem__(self, name):
        self.asked.add(name)
        return super().__getitem__(name)

    def get(self, name, default=None):
        self.asked.add(name)
        return super().get(name, default)


def _origin(element) -> np.ndarray:
    if element is None:
        return transform()
    return transform(element.xyz or (0.0, 0.0, 0.0), element.rpy or (0.0, 0.0, 0.0))


def _number(value) -> float | None:
    return None if value is None else float(value)


def urdf_tree(text: str, source: str) -> tuple[tuple[UrdfLink, ...], tuple[UrdfJoint, ...]]:
    """The links and joints of a URDF text (urdf_parser_py), as the rig reader takes them."""
    from urdf_parser_py import urdf as parser

    try:
        with redirect_stderr(io.StringIO()):  # it warns of every tag it does not know
            robot = parser.URDF.from_xml_string(text.encode("utf-8"))
    except Exception as error:
        fail(source, "urdf.file", f"not a valid URDF: {_one_line(error)}")
    links = []
    for link in robot.links:
        inertial = link.inertial
        if inertial is not None:
            i = inertial.inertia
            tensor = np.zeros((3, 3)) if i is None else np.array(
                [[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]],
                dtype=float)
            inertial = UrdfInertial(float(inertial.mass or 0.0), _origin(inertial.origin),
                                    tensor)
        links.append(UrdfLink(link.name, inertial))
    joints = []
    for joint in robot.joints:
        dynamics = joint.dynamics
        joints.append(UrdfJoint(
            joint.name, joint.type, joint.parent, joint.child, _origin(joint.origin),
            np.asarray(joint.axis if joint.axis is not None else (1.0, 0.0, 0.0), dtype=float),
            None if dynamics is None else _number(dynamics.damping),
            None if dynamics is None else _number(dynamics.friction)))
    return tuple(links), tuple(joints)


def reads_robot_description(data: Any) -> bool:
    """Whether plain config data (as loaded from YAML) take the rig from robot_description."""
    urdf = data.get("urdf") if isinstance(data, dict) else None
    return isinstance(urdf, dict) and urdf.get("file") == ROBOT_DESCRIPTION


def read_urdf_section(raw: Any, source: str, robot_description: str | None = None) -> UrdfRig:
    """The ``urdf`` section: the file read, expanded and parsed, the rig read from it.

    ``robot_description``: the URDF text where ``file`` is :data:`ROBOT_DESCRIPTION` (the node
    reads it from ROS); without it such a section is refused.
    """
    raw = mapping(raw, source, "urdf", "a mapping with at least 'file'")
    check_keys(raw, KEYS, source, "urdf")
    if raw.get("file") is None:
        fail(source, "urdf.file", "missing: the .urdf or .xacro file of the rig")
    base = Path(source).parent if Path(source).is_file() else Path.cwd()
    if raw["file"] == ROBOT_DESCRIPTION:
        if robot_description is None:
            fail(source, "urdf.file", f"{ROBOT_DESCRIPTION} is read by the node (its "
                                      f"{ROBOT_DESCRIPTION} parameter or topic); give the "
                                      f"commands a .urdf or .xacro file")
        if raw.get("args") is not None or raw.get("args_file") is not None:
            fail(source, "urdf.args", f"{ROBOT_DESCRIPTION} is a URDF already expanded: it "
                                      f"takes no xacro arguments")
        path, text = Path(ROBOT_DESCRIPTION), robot_description
    else:
        path = _relative(raw["file"], base, source, "urdf.file")
        text = expanded_urdf(path, _arguments(raw, base, source), source,
                             frozenset(map(str, raw.get("args") or {})))
    links, joints = urdf_tree(text, source)
    names = {}
    for key in ("arm_joint", "pendulum_joint"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            fail(source, f"urdf.{key}", "must be a joint's name")
        names[key] = raw.get(key)
    try:
        rig = furuta_from_urdf(links, joints, **names)
    except UrdfError as error:
        fail(source, "urdf", f"{path.name}: {error}")
    for name, value in rig.parameters.items():
        if not math.isfinite(value):
            fail(source, "urdf", f"{path.name}: {name} is {value}")
        lower = FURUTA.parameter(name).lower
        if 0.0 < lower and lower * (1.0 - ROUND_OFF) <= value < lower:
            rig.parameters[name] = lower  # a value at its bound, turned into the URDF's frames
    return UrdfRig(path, text, links, joints, rig)
