"""calibrated.urdf: the rig's URDF with a calibration's values in place.

Where the config read the rig from a URDF (:mod:`mb_estimation.config.urdf`), that URDF (as
xacro expanded it) with each body's inertial and each joint's ``<dynamics>`` set to carry the
fitted values (:func:`~mb_estimation.rigs.furuta_urdf.calibrated_inertials`) and every other
element and attribute as it was; else a URDF generated from the values, in the model's frames
with z up (:func:`~mb_estimation.rigs.furuta_urdf.furuta_urdf_tree`). An arm's moments no
rigid body has are made physical where no motion shows them, said in a comment as a
pendulum's are where they cannot be
(:func:`~mb_estimation.rigs.furuta_urdf.with_physical_arm`). The XML is edited and
written with lxml; what a URDF does not hold (the input gain, a shaft's inertia, gravity)
stays in parameters.yaml.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from lxml import etree

from mb_estimation.config import Config
from mb_estimation.io.files import write_text_atomically
from mb_estimation.rigs.furuta_urdf import (
    UrdfInertial,
    UrdfJoint,
    UrdfLink,
    calibrated_inertials,
    furuta_urdf_tree,
    with_physical_arm,
)

FILE_NAME = "calibrated.urdf"


def _numbers(values) -> str:
    return " ".join(repr(float(value)) for value in values)


def _rpy(rotation: np.ndarray) -> tuple[float, float, float]:
    """URDF's roll, pitch, yaw [rad] of a rotation matrix (``Rz(yaw) Ry(pitch) Rx(roll)``)."""
    return (float(np.arctan2(rotation[2, 1], rotation[2, 2])),
            float(-np.arcsin(np.clip(rotation[2, 0], -1.0, 1.0))),
            float(np.arctan2(rotation[1, 0], rotation[0, 0])))


def _set_origin(parent, pose: np.ndarray, keep_rpy: bool = False) -> None:
    origin = parent.find("origin")
    if origin is None:
        origin = etree.SubElement(parent, "origin")
    origin.set("xyz", _numbers(pose[:3, 3]))
    if not keep_rpy or origin.get("rpy") is None:
        origin.set("rpy", _numbers(_rpy(pose[:3, :3])))


def _set_inertial(link, inertial: UrdfInertial) -> None:
    """``link``'s ``<inertial>`` made ``inertial`` (its origin's rpy kept where it has one)."""
    element = link.find("inertial")
    if element is None:
        element = etree.SubElement(link, "inertial")
    mass = element.find("mass")
    if mass is None:
        mass = etree.SubElement(element, "mass")
    mass.set("value", repr(float(inertial.mass)))
    _set_origin(element, inertial.origin, keep_rpy=True)
    inertia = element.find("inertia")
    if inertia is None:
        inertia = etree.SubElement(element, "inertia")
    tensor = inertial.inertia
    for name, (row, column) in (("ixx", (0, 0)), ("ixy", (0, 1)), ("ixz", (0, 2)),
                                ("iyy", (1, 1)), ("iyz", (1, 2)), ("izz", (2, 2))):
        inertia.set(name, repr(float(tensor[row, column])))


def _set_dynamics(joint, damping: float, friction: float | None) -> None:
    dynamics = joint.find("dynamics")
    if dynamics is None:
        dynamics = etree.SubElement(joint, "dynamics")
    dynamics.set("damping", repr(float(damping)))
    if friction is not None and (friction != 0.0 or dynamics.get("friction") is not None):
        dynamics.set("friction", repr(float(friction)))


def _robot_element(links: Sequence[UrdfLink], joints: Sequence[UrdfJoint],
                 name: str = "furuta"):
    """A URDF ``<robot>`` element of the tree ``links``, ``joints`` (the inertials given)."""
    robot = etree.Element("robot", name=name)
    for link in links:
        element = etree.SubElement(robot, "link", name=link.name)
        if link.inertial is not None:
            _set_inertial(element, link.inertial)
    for joint in joints:
        element = etree.SubElement(robot, "joint", name=joint.name, type=joint.kind)
        etree.SubElement(element, "parent", link=joint.parent)
        etree.SubElement(element, "child", link=joint.child)
        _set_origin(element, joint.origin)
        etree.SubElement(element, "axis", xyz=_numbers(joint.axis))
        if joint.damping is not None:
            _set_dynamics(element, joint.damping, joint.friction)
    return robot


def _noted(root, notes: list[str]):
    """``root`` with ``notes`` as its first comments, each on a line at the root's indentation.

    The rest of the file keeps its lines (a comment without that whitespace around it would
    leave the file to the serialiser, which then writes it on one line).
    """
    if not notes:
        return root
    indent = root.text if root.text is not None and not root.text.strip() else "\n  "
    for note in reversed(notes):
        comment = etree.Comment(f" mb-estimation: {note} ")
        comment.tail = indent
        root.insert(0, comment)
    root.text = indent
    return root


def _text(root) -> str:
    return etree.tostring(root, pretty_print=True, xml_declaration=True,
                          encoding="utf-8").decode("utf-8")


def _scalars(values: Mapping[str, object]) -> dict[str, float]:
    return {name: float(np.ravel(value)[0]) for name, value in values.items()
            if np.size(value) == 1}


def urdf_notes(config: Config, values: Mapping[str, object]) -> list[str]:
    """What calibrated.urdf says at its top of ``values`` (:func:`calibrated_urdf`)."""
    return _with_notes(config, values)[1] if config.rig == "furuta" else []


def _with_notes(config: Config, values: Mapping[str, object]
                ) -> tuple[dict[str, float], list[str]]:
    """The scalar ``values`` calibrated.urdf holds, and the notes at its top.

    Those of :func:`~mb_estimation.rigs.furuta_urdf.with_physical_arm`, the tilt's (which a
    URDF has no place for), and the input gain's
    direction where the URDF's arm joint turns the other way than θ1 (its axis pointing
    down): ``K`` is the torque about the upward axis, so a simulator that applies the input
    along that joint needs ``-K``.
    """
    tilt = np.asarray(values.get("tilt", (1.0, 0.0, 0.0, 0.0)), dtype=np.float64)
    values, notes = with_physical_arm(_scalars(values))
    if tilt.size == 4 and not np.allclose(tilt, (1.0, 0.0, 0.0, 0.0), rtol=0, atol=1e-12):
        notes.append("the rig's tilt (gravity's lean, parameters.yaml) is not in this file: "
                     "a URDF has no place for it; tilt the rig's base (or gravity) in the "
                     "simulator by it")
    arm_sign = (config.urdf.rig.signs[0] if config.urdf is not None
                else config.recording.joints["arm"].sign)
    if arm_sign < 0 and values.get("K"):
        notes.append(f"the input gain K = {values['K']:.6g} N m per input unit (parameters.yaml) "
                     f"turns the arm about the upward axis; this URDF's arm joint turns about "
                     f"the downward one, so along it the gain is {-values['K']:.6g}")
    return values, notes


def calibrated_urdf(config: Config, values: Mapping[str, object]) -> str | None:
    """calibrated.urdf's text for ``values`` (module docstring); None for a rig without one.

    Only the Furuta rig has a URDF form.
    """
    if config.rig != "furuta":
        return None
    values, notes = _with_notes(config, values)
    if config.urdf is None:  # laid out first, so that the notes go in between its lines
        recorded = tuple((config.recording.joints[joint].name, config.recording.joints[joint].sign)
                         for joint in ("arm", "pendulum"))
        laid_out = etree.fromstring(_text(_robot_element(*furuta_urdf_tree(
            values, recorded))).encode("utf-8"))
        return _text(_noted(laid_out, notes))
    urdf = config.urdf
    root = _noted(etree.fromstring(urdf.text.encode("utf-8")), notes)
    links = {element.get("name"): element for element in root.findall("link")}
    joints = {element.get("name"): element for element in root.findall("joint")}
    for name, inertial in calibrated_inertials(urdf.rig, urdf.links, urdf.joints,
                                               values).items():
        _set_inertial(links[name], inertial)
    for joint, index in ((urdf.rig.arm_joint, 1), (urdf.rig.pendulum_joint, 2)):
        _set_dynamics(joints[joint], values[f"b{index}"], values.get(f"coulomb{index}"))
    return _text(root)


def write_calibrated_urdf(directory: Path, config: Config, values: Mapping[str, object]
                          ) -> None:
    """``directory/calibrated.urdf`` of ``values``, atomically.

    Nothing for a rig without a URDF form (:func:`calibrated_urdf`).
    """
    text = calibrated_urdf(config, values)
    if text is not None:
        write_text_atomically(Path(directory) / FILE_NAME, text)
