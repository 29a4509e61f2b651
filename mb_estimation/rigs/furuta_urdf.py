"""A Furuta pendulum described in URDF: its parameters in the model's frames, and back.

Pure NumPy over a neutral description of the URDF's tree (:class:`UrdfLink`,
:class:`UrdfJoint`: what :mod:`mb_estimation.config.urdf` reads from the file). The rig's
model (:mod:`mb_estimation.rigs.furuta`) is set in its own frames; a URDF may use any frames,
so everything is taken at zero joint angles in the URDF's root frame (z up, as ROS has it,
gravity along -z) and projected onto the model's:

* the arm joint's axis must be vertical; the model's θ1 turns about world up, so the arm's
  recorded angle is ``sign1 θ1`` with ``sign1 = ±1`` the axis' direction;
* the pendulum joint's axis must be horizontal and pass through the arm's axis (radial); the
  model's ``x_A`` is the horizontal direction from the arm's axis along it towards the
  pendulum's centre of mass, ``lA`` that centre of mass' distance from the arm's axis along it,
  ``sign2`` the axis' direction along ``x_A``;
* the pendulum's centre of mass lies ``l2`` from its joint's axis in the direction ``u`` at
  the URDF's zero; the model's θ2 is 0 where it hangs, so the recorded angle is ``sign2 (θ2 -
  φ)`` with ``φ`` the angle of ``u`` from straight down about ``x_A``;
* ``l1`` is the arm's centre of mass along ``x_A``; a part of it to the side (along ``up ×
  x_A``) only adds ``m_A d²`` to the inertia about the arm's axis, the one inertia of the arm
  its motion shows, and is added to ``J_Azz``; heights along the arm's axis change nothing;
* each body's inertia tensor about its centre of mass, in the model's body frame (arm:
  ``x_A``, ``up × x_A``, up; pendulum: ``u``, ``x_A``, ``u × x_A``), gives ``J_*xx/yy/zz``.
  The arm turns about up alone, so its products of inertia only load its bearing; the
  pendulum's couple its swing and are refused beyond :data:`PRODUCT_TOLERANCE`;
* a joint's ``<dynamics damping>`` is its viscous ``b`` [N m s/rad], ``friction`` its Coulomb
  torque [N m]. Links fixed to a moving link are part of its body (their inertials merged).

:func:`calibrated_inertials` goes back: the body's inertial that makes it carry fitted values,
as the child link of each joint holds it, the rest of the body as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.errors import UserError

#: Directions [rad-free, unit vectors] closer than this to the required one count as it.
AXIS_TOLERANCE = 1e-6
#: [m] the pendulum joint's axis may pass the arm's axis this far to the side.
OFFSET_TOLERANCE_M = 1e-6
#: The pendulum's products of inertia in its frame, relative to its largest moment, up to
#: which they are dropped (with a note); above it the URDF is refused.
PRODUCT_TOLERANCE = 1e-3
MOVING = ("revolute", "continuous")
UP = np.array([0.0, 0.0, 1.0])


class UrdfError(UserError):
    """A URDF that is not a Furuta pendulum the model can hold; the message says why."""


@dataclass(frozen=True)
class UrdfInertial:
    """A link's inertial.

    ``mass`` [kg], ``origin`` (4×4: its frame in the link's), ``inertia`` (3×3 [kg m²] about
    the centre of mass, in that frame).
    """

    mass: float
    origin: np.ndarray
    inertia: np.ndarray


@dataclass(frozen=True)
class UrdfLink:
    """A link: its name and its inertial (None where it has none)."""

    name: str
    inertial: UrdfInertial | None


@dataclass(frozen=True)
class UrdfJoint:
    """A joint of ``kind`` revolute, continuous, fixed….

    ``origin`` (4×4: its frame in the parent link's), ``axis`` (unit, in it), ``damping``
    [N m s/rad] and ``friction`` [N m] where ``<dynamics>`` gives them.
    """

    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray
    axis: np.ndarray
    damping: float | None = None
    friction: float | None = None


@dataclass(frozen=True)
class Body:
    """A moving body of the rig: the links it is made of, merged, in the root frame at zero.

    ``mass`` [kg], ``centre`` [m], ``inertia`` (3×3 about the centre), ``frame`` (3×3: the
    model's body axes as columns); ``links`` its links' names, the first the joint's child.
    """

    links: tuple[str, ...]
    mass: float
    centre: np.ndarray
    inertia: np.ndarray
    frame: np.ndarray


@dataclass(frozen=True)
class FurutaUrdf:
    """What a URDF says of the rig.

    ``parameters`` (by the model's names), per joint the recorded angle's ``sign`` and
    ``offset`` [rad] (``recorded = sign model + offset``), the two bodies as read
    (:class:`Body`), the joints' names and ``notes`` for the user.
    """

    parameters: dict[str, float]
    arm_joint: str
    pendulum_joint: str
    signs: tuple[int, int]
    offsets: tuple[float, float]
    arm: Body
    pendulum: Body
    notes: tuple[str, ...]


def rpy_matrix(rpy: Sequence[float]) -> np.ndarray:
    """URDF's roll, pitch, yaw [rad] as a rotation matrix: ``Rz(yaw) Ry(pitch) Rx(roll)``."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def transform(xyz: Sequence[float] = (0.0, 0.0, 0.0), rpy: Sequence[float] = (0.0, 0.0, 0.0)
              ) -> np.ndarray:
    """The 4×4 transform of a URDF ``<origin xyz rpy>``."""
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3] = rpy_matrix(rpy), np.asarray(xyz, dtype=float)
    return matrix


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def _text(vector: np.ndarray) -> str:
    return "(" + ", ".join(f"{value:.4g}" for value in vector) + ")"


def _poses(links: Mapping[str, UrdfLink], joints: Sequence[UrdfJoint]) -> dict[str, np.ndarray]:
    """Every link's pose (4×4) in the root link's frame at zero joint angles."""
    children = {joint.child for joint in joints}
    roots = [name for name in links if name not in children]
    if len(roots) != 1:
        raise UrdfError(f"the URDF must be one tree with one root link, it has {len(roots)} "
                        f"({', '.join(roots) or 'none'})")
    poses, todo = {roots[0]: np.eye(4)}, list(joints)
    while todo:
        ready = [joint for joint in todo if joint.parent in poses]
        if not ready:
            raise UrdfError(f"joint {todo[0].name}'s parent link {todo[0].parent} is not in "
                            f"the tree")
        for joint in ready:
            poses[joint.child] = poses[joint.parent] @ joint.origin
            todo.remove(joint)
    return poses


def _rigid_group(first: str, joints: Sequence[UrdfJoint]) -> list[str]:
    """``first`` (a moving joint's child) and the links fixed below it."""
    group = [first]
    for link in group:  # grows as it goes
        group += [joint.child for joint in joints if joint.parent == link
                  and joint.kind == "fixed"]
    return group


def _parallel_axis(mass: float, offset: np.ndarray) -> np.ndarray:
    """``m (|d|² I - d dᵀ)``: a point mass' inertia about a point ``offset`` [m] away."""
    return mass * (np.dot(offset, offset) * np.eye(3) - np.outer(offset, offset))


def _merged(names: Sequence[str], links: Mapping[str, UrdfLink], poses) -> tuple:
    """Mass, centre of mass and inertia about it (root frame) of the named links together."""
    parts = []
    for name in names:
        inertial = links[name].inertial
        if inertial is None or inertial.mass <= 0.0:
            continue
        pose = poses[name] @ inertial.origin
        rotation = pose[:3, :3]
        parts.append((inertial.mass, pose[:3, 3], rotation @ inertial.inertia @ rotation.T))
    mass = sum(part[0] for part in parts)
    if mass <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    centre = sum(part[0] * part[1] for part in parts) / mass
    inertia = sum(part[2] + _parallel_axis(part[0], part[1] - centre) for part in parts)
    return mass, centre, inertia


def _joint_named(joints: Sequence[UrdfJoint], name: str, role: str) -> UrdfJoint:
    for joint in joints:
        if joint.name == name:
            if joint.kind not in MOVING:
                raise UrdfError(f"the {role} joint {name} is {joint.kind}: it must be revolute "
                                f"or continuous")
            return joint
    moving = [joint.name for joint in joints if joint.kind in MOVING]
    raise UrdfError(f"the URDF has no joint {name} for the {role} (its moving joints: "
                    f"{', '.join(moving) or 'none'})")


def furuta_from_urdf(links: Sequence[UrdfLink], joints: Sequence[UrdfJoint],
                     arm_joint: str | None = None, pendulum_joint: str | None = None
                     ) -> FurutaUrdf:
    """The Furuta rig a URDF describes (module docstring); :class:`UrdfError` where it is not.

    ``arm_joint``, ``pendulum_joint``: the joints' names (None: the URDF's two moving joints,
    the one nearer the root the arm's).
    """
    by_name = {link.name: link for link in links}
    moving = [joint for joint in joints if joint.kind in MOVING]
    others = [joint for joint in joints if joint.kind not in MOVING + ("fixed",)]
    if others:
        raise UrdfError(f"joint {others[0].name} is {others[0].kind}: a Furuta pendulum has two "
                        f"revolute or continuous joints and fixed ones")
    poses = _poses(by_name, joints)
    if arm_joint is None or pendulum_joint is None:
        if len(moving) != 2:
            raise UrdfError(f"a Furuta pendulum has two moving joints, the URDF has "
                            f"{len(moving)} ({', '.join(j.name for j in moving) or 'none'})")
        chained = moving[1].parent in _rigid_group(moving[0].child, joints)
        first, second = moving if chained else moving[::-1]
        arm_joint = arm_joint or first.name
        pendulum_joint = pendulum_joint or second.name
    arm, pendulum = (_joint_named(joints, arm_joint, "arm"),
                     _joint_named(joints, pendulum_joint, "pendulum"))
    extra = [joint.name for joint in moving if joint.name not in (arm_joint, pendulum_joint)]
    if extra:
        raise UrdfError(f"joint {extra[0]} moves too: the Furuta rig has the arm joint "
                        f"{arm_joint} and the pendulum joint {pendulum_joint} alone")
    arm_links = _rigid_group(arm.child, joints)
    if pendulum.parent not in arm_links:
        raise UrdfError(f"the pendulum joint {pendulum_joint} must be carried by the arm "
                        f"(its parent {pendulum.parent} is not fixed to {arm.child})")
    pendulum_links = _rigid_group(pendulum.child, joints)
    for name, group in ((arm_joint, arm_links), (pendulum_joint, pendulum_links)):
        if not any(by_name[link].inertial is not None and by_name[link].inertial.mass > 0.0
                   for link in group):
            raise UrdfError(f"link {group[0]} (moved by {name}) has no <inertial> with a mass: "
                            f"the model needs the body's mass and inertia")

    def axis_and_point(joint):
        frame = poses[joint.parent] @ joint.origin
        return _unit(frame[:3, :3] @ joint.axis), frame[:3, 3]

    (arm_axis, arm_point), (pendulum_axis, pendulum_point) = (axis_and_point(arm),
                                                              axis_and_point(pendulum))
    if np.linalg.norm(np.cross(arm_axis, UP)) > AXIS_TOLERANCE:
        raise UrdfError(f"the arm joint {arm_joint} turns about {_text(arm_axis)} in the root "
                        f"link's frame: the model's arm turns about the vertical (z up)")
    if abs(np.dot(arm_axis, pendulum_axis)) > AXIS_TOLERANCE:
        raise UrdfError(f"the joints' axes {_text(arm_axis)} and {_text(pendulum_axis)} are not "
                        f"perpendicular: a Furuta pendulum's are")
    side = float(np.dot(pendulum_point - arm_point, np.cross(UP, pendulum_axis)))
    if abs(side) > OFFSET_TOLERANCE_M:
        raise UrdfError(f"the pendulum joint's axis passes the arm's {abs(side) * 1e3:.3g} mm "
                        f"to the side: the model's pendulum axis is radial")
    arm_mass, arm_centre, arm_inertia = _merged(arm_links, by_name, poses)
    mass_b, centre_b, inertia_b = _merged(pendulum_links, by_name, poses)
    radial = float(np.dot(centre_b - arm_point, pendulum_axis))
    x_a = pendulum_axis if radial >= 0.0 else -pendulum_axis
    lever = centre_b - pendulum_point
    lever = lever - np.dot(lever, pendulum_axis) * pendulum_axis
    l2 = float(np.linalg.norm(lever))
    if l2 < OFFSET_TOLERANCE_M:
        raise UrdfError("the pendulum's centre of mass lies on its joint's axis: the model's "
                        "pendulum hangs from it (l2 > 0)")
    u = lever / l2
    side_a = np.cross(UP, x_a)
    arm_frame = np.stack([x_a, side_a, UP], axis=1)
    pendulum_frame = np.stack([u, x_a, np.cross(u, x_a)], axis=1)
    in_arm = arm_frame.T @ arm_inertia @ arm_frame
    in_pendulum = pendulum_frame.T @ inertia_b @ pendulum_frame
    notes = []
    arm_side = float(np.dot(arm_centre - arm_point, side_a))
    if abs(arm_side) > OFFSET_TOLERANCE_M:
        notes.append(f"the arm's centre of mass is {arm_side * 1e3:.3g} mm to the side of its "
                     f"line to the pendulum joint: m_A d² added to J_Azz (all the arm's motion "
                     f"shows of it)")
    products = np.abs(in_pendulum[np.triu_indices(3, 1)])
    largest = float(np.max(np.diag(in_pendulum)))
    if products.max() > PRODUCT_TOLERANCE * largest:
        raise UrdfError(f"the pendulum's inertia has products of inertia up to "
                        f"{products.max():.3g} kg m² in its frame (rod, swing axis): the model "
                        f"takes the rod and the swing axis as principal axes")
    if products.max() > 1e-9 * largest:
        notes.append(f"the pendulum's products of inertia (at most {products.max():.3g} kg m², "
                     f"{products.max() / largest:.2g} of its largest moment) left out")
    phi = float(np.arctan2(np.dot(u, np.cross(UP, x_a)), -np.dot(u, UP)))
    phi = 0.0 if abs(phi) < 1e-12 else phi  # round-off of a hanging zero
    signs = (int(np.sign(np.dot(arm_axis, UP))), int(np.sign(np.dot(pendulum_axis, x_a))))
    parameters = {
        "l1": float(np.dot(arm_centre - arm_point, x_a)),
        "lA": float(np.dot(centre_b - arm_point, x_a)),
        "l2": l2,
        "m_A": float(arm_mass),
        "m_B": float(mass_b),
        "J_Axx": float(in_arm[0, 0]),
        "J_Ayy": float(in_arm[1, 1]),
        "J_Azz": float(in_arm[2, 2] + arm_mass * arm_side ** 2),
        "J_Bxx": float(in_pendulum[0, 0]),
        "J_Byy": float(in_pendulum[1, 1]),
        "J_Bzz": float(in_pendulum[2, 2]),
    }
    for joint, index in ((arm, 1), (pendulum, 2)):
        if joint.damping is not None:
            parameters[f"b{index}"] = float(joint.damping)
        if joint.friction is not None:
            parameters[f"coulomb{index}"] = float(joint.friction)
    return FurutaUrdf(
        parameters=parameters, arm_joint=arm_joint, pendulum_joint=pendulum_joint,
        signs=signs, offsets=(0.0, float(-signs[1] * phi)),
        arm=Body(tuple(arm_links), float(arm_mass), arm_centre, arm_inertia, arm_frame),
        pendulum=Body(tuple(pendulum_links), float(mass_b), centre_b, inertia_b,
                      pendulum_frame),
        notes=tuple(notes))


def calibrated_inertials(read: FurutaUrdf, links: Sequence[UrdfLink],
                         joints: Sequence[UrdfJoint], values: Mapping[str, float]
                         ) -> dict[str, UrdfInertial]:
    """Per body's first link, the inertial that makes the body carry ``values``.

    ``read``: :func:`furuta_from_urdf` of ``links`` and ``joints``. The change of each model
    value from ``read.parameters`` is applied to the body as read (masses, centres along the
    model's axes, the moments in its frame); the body's other links keep theirs, and the first
    link's inertial keeps its orientation. What the model does not hold (products of inertia,
    heights, an arm's centre off its line) stays as it was.
    """
    by_name = {link.name: link for link in links}
    poses = _poses(by_name, joints)
    nominal = read.parameters

    def change(name):
        return float(values[name]) - float(nominal[name])

    x_a, u = read.arm.frame[:, 0], read.pendulum.frame[:, 0]
    inertials = {}
    for body, moments, mass, shift in (
            (read.arm, "J_A", "m_A", change("l1") * x_a),
            (read.pendulum, "J_B", "m_B", change("lA") * x_a + change("l2") * u)):
        moved = np.diag([change(f"{moments}{axes}") for axes in ("xx", "yy", "zz")])
        inertia = body.inertia + body.frame @ moved @ body.frame.T
        total, centre = body.mass + change(mass), body.centre + shift
        rest_mass, rest_centre, rest_inertia = _merged(body.links[1:], by_name, poses)
        own_mass = total - rest_mass
        if own_mass <= 0.0:
            raise UrdfError(f"link {body.links[0]} would need a mass of {own_mass:.3g} kg for "
                            f"the body to weigh {total:.3g} kg")
        own_centre = (total * centre - rest_mass * rest_centre) / own_mass
        own_inertia = (inertia - rest_inertia - _parallel_axis(rest_mass, rest_centre - centre)
                       - _parallel_axis(own_mass, own_centre - centre))
        first = body.links[0]
        old = by_name[first].inertial
        turn = np.eye(3) if old is None else old.origin[:3, :3]
        pose = poses[first]
        rotation = pose[:3, :3] @ turn
        origin = np.eye(4)
        origin[:3, :3] = turn
        origin[:3, 3] = pose[:3, :3].T @ (own_centre - pose[:3, 3])
        inertials[first] = UrdfInertial(float(own_mass), origin,
                                        rotation.T @ own_inertia @ rotation)
    return inertials


def with_physical_arm(values: Mapping[str, float]) -> tuple[dict[str, float], list[str]]:
    """``values`` with the arm's moments a rigid body can have, and notes of what is not.

    A calibrated ``J_Azz`` holds all the inertia the arm turns with (a motor's rotor too), and
    may exceed ``J_Axx + J_Ayy``, or fall below ``J_Ayy - J_Axx`` (a URDF that states
    ``iyy = izz`` and a fit that lowers ``J_Azz``), which no rigid body does (simulators refuse
    such a tensor). The arm only turns about its z axis, so its other two moments show in no
    motion: ``J_Ayy`` is moved into ``|J_Azz - J_Axx| .. J_Azz + J_Axx`` there, which leaves
    the rig's dynamics as they are. The pendulum's three moments all show in its motion: where
    they break the triangle inequality they are kept, and a note says which to free or set.
    """
    values, notes = dict(values), []
    axx, ayy, azz = (float(values[f"J_A{axes}"]) for axes in ("xx", "yy", "zz"))
    rigid = min(max(ayy, abs(azz - axx)), azz + axx)
    if rigid != ayy:
        values["J_Ayy"] = rigid
        notes.append(f"J_Ayy {'raised' if rigid > ayy else 'lowered'} from {ayy:.6g} to "
                     f"{rigid:.6g} kg m^2 so that the arm's inertia is a rigid body's (each "
                     f"moment at most the sum of the other two): the arm never turns about "
                     f"that axis, so the rig's motion is the calibrated one")
    moments = {axes: float(values[f"J_B{axes}"]) for axes in ("xx", "yy", "zz")}
    for axes, moment in moments.items():
        others = sum(value for name, value in moments.items() if name != axes)
        if moment > others:
            notes.append(f"the pendulum's J_B{axes} {moment:.6g} exceeds the sum of its other "
                         f"two moments ({others:.6g} kg m^2): no rigid body has that, and some "
                         f"simulators refuse it; free or set the fixed ones")
    return values, notes


def furuta_urdf_tree(values: Mapping[str, float],
                     joints: Sequence[tuple[str, int]] = (("arm_joint", 1), ("pendulum_joint", 1))
                     ) -> tuple[list[UrdfLink], list[UrdfJoint]]:
    """A URDF tree of the rig with ``values`` in the model's frames (z up, as ROS has it).

    ``base_link`` (no inertial), ``arm`` turned by its joint (axis z) and ``pendulum`` by its
    (axis x, ``lA`` along the arm), hanging at zero; the joints' dynamics the viscous ``b`` and
    Coulomb torques. ``joints``: the arm's and the pendulum's joint ``(name, sign)`` as the
    recordings have them (the sign turns the axis: the recorded angle is ``sign`` times the
    model's). :func:`furuta_from_urdf` reads ``values``, names and signs back.
    """
    (arm_name, arm_sign), (pendulum_name, pendulum_sign) = joints
    arm = UrdfInertial(float(values["m_A"]), transform((float(values["l1"]), 0.0, 0.0)),
                       np.diag([float(values[f"J_A{a}"]) for a in ("xx", "yy", "zz")]))
    # the pendulum's frame is the arm's at zero: rod along -z, swing axis x, z_B = -y
    pendulum = UrdfInertial(float(values["m_B"]), transform((0.0, 0.0, -float(values["l2"]))),
                            np.diag([float(values["J_Byy"]), float(values["J_Bzz"]),
                                     float(values["J_Bxx"])]))
    links = [UrdfLink("base_link", None), UrdfLink("arm", arm), UrdfLink("pendulum", pendulum)]
    joints = [
        UrdfJoint(arm_name, "continuous", "base_link", "arm", transform(),
                  np.array([0.0, 0.0, float(arm_sign)]), float(values["b1"]),
                  float(values.get("coulomb1", 0.0))),
        UrdfJoint(pendulum_name, "continuous", "arm", "pendulum",
                  transform((float(values["lA"]), 0.0, 0.0)),
                  np.array([float(pendulum_sign), 0.0, 0.0]), float(values["b2"]),
                  float(values.get("coulomb2", 0.0))),
    ]
    return links, joints
