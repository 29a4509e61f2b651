"""Independent continuous-time model of the Furuta pendulum with compliant, damped hinges.

A *test oracle* like :mod:`reference_furuta` (whose rigid geometry and initial poses it uses):
it shares no code with ``mb_estimation`` and uses only numpy and scipy. It models what the
regularised hinges of the paper are in continuous time (§2.3: compliance ε as an inverse spring
coefficient, damping τ as a relaxation time): two free rigid bodies in maximal coordinates
(position, rotation matrix, world linear and angular velocity), each hinge a Kelvin–Voigt joint
whose five rows — the anchor gap (3) and ``x_a·y_b``, ``x_a·z_b`` (appendix F) — carry the force

    λ = (g + τ ġ) / ε,    generalised force = −Gᵀ λ,

plus viscous friction ``−b θ̇`` about the hinge axis and, on hinge 1, the motor shaft's inertia
about its axis (F.3; a torque ``−J_shaft x (x·ω̇)``, i.e. added to A's inertia). Gravity acts
on the centres of mass and the fictitious torque ``−ω × J ω`` on each body. Integrated by
scipy's stiff Radau method; no time step of its own.

Frames (DESIGN §3, as in :mod:`reference_furuta`): hinge 1 joins the world (anchor at the origin,
axis world +y) to A (anchor ``−l1`` along x_A from A's centre, axis z_A, rows against x_A, y_A);
hinge 2 joins A (anchor ``lA − l1`` along x_A, axis x_A) to B (anchor ``−l2`` along x_B, axis
y_B, rows against −z_B, −x_B).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from reference_furuta import body_kinematics, gravity_vector
from scipy.integrate import solve_ivp

RTOL = 1e-10
ATOL = 1e-12
_BODY_STATE = 18  # position 3, rotation matrix 9 (row-major), velocity 3, angular velocity 3


def _skew(w: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _hinges(params: dict) -> list[dict]:
    """Each hinge: parent/child (None = world), anchors and axes in body coordinates."""
    e1, e2, e3 = np.eye(3)
    # Body coordinates of A and B are their principal frames (columns of _R_A0, _R_B0 at rest).
    return [
        {"parent": None, "child": 0, "parent_anchor": np.zeros(3),
         "child_anchor": -params["l1"] * e1,
         "parent_axis": np.array([0.0, 1.0, 0.0]),  # world +y
         "child_rows": (e1, e2),                     # x_A, y_A: both ⟂ the axis z_A
         "child_axis": e3,
         "eps": (params["eps_lin1"], params["eps_rot1"]), "tau": params["tau1"],
         "viscous": params["b1"], "shaft": params["J_shaft"]},
        {"parent": 0, "child": 1, "parent_anchor": (params["lA"] - params["l1"]) * e1,
         "child_anchor": -params["l2"] * e1,
         "parent_axis": e1,                          # x_A
         "child_rows": (-e3, -e1),                   # −z_B, −x_B: both ⟂ the axis y_B
         "child_axis": e2,
         "eps": (params["eps_lin2"], params["eps_rot2"]), "tau": params["tau2"],
         "viscous": params["b2"], "shaft": 0.0},
    ]


def _unpack(y: np.ndarray):
    bodies = []
    for b in range(2):
        s = y[b * _BODY_STATE:(b + 1) * _BODY_STATE]
        bodies.append((s[0:3], s[3:12].reshape(3, 3), s[12:15], s[15:18]))
    return bodies


def _derivative(params: dict, hinges: list[dict], gravity: np.ndarray):
    masses = (params["m_A"], params["m_B"])
    inertias = (np.diag([params["J_Axx"], params["J_Ayy"], params["J_Azz"]]),
                np.diag([params["J_Bxx"], params["J_Byy"], params["J_Bzz"]]))
    world = (np.zeros(3), np.eye(3), np.zeros(3), np.zeros(3))

    def rhs(_t, y):
        bodies = _unpack(y)
        force = [m * gravity for m in masses]
        torque = []
        rotational_inertia = []
        for (_, rotation, _, omega), inertia in zip(bodies, inertias, strict=True):
            world_inertia = rotation @ inertia @ rotation.T
            rotational_inertia.append(world_inertia)
            torque.append(-np.cross(omega, world_inertia @ omega))
        for hinge in hinges:
            p = world if hinge["parent"] is None else bodies[hinge["parent"]]
            c = bodies[hinge["child"]]
            lever_p = p[1] @ hinge["parent_anchor"]
            lever_c = c[1] @ hinge["child_anchor"]
            gap = (p[0] + lever_p) - (c[0] + lever_c)
            gap_rate = (p[2] + np.cross(p[3], lever_p)) - (c[2] + np.cross(c[3], lever_c))
            eps_lin, eps_rot = hinge["eps"]
            pull = (gap + hinge["tau"] * gap_rate) / eps_lin
            axis_p = p[1] @ hinge["parent_axis"]
            twist = np.zeros(3)
            for row in hinge["child_rows"]:
                direction = c[1] @ row
                normal = np.cross(axis_p, direction)
                value = axis_p @ direction
                rate = normal @ (p[3] - c[3])
                twist += normal * (value + hinge["tau"] * rate) / eps_rot
            axis_c = c[1] @ hinge["child_axis"]
            friction = -hinge["viscous"] * (axis_c @ (c[3] - p[3])) * axis_c
            child = hinge["child"]
            force[child] = force[child] + pull
            torque[child] = torque[child] + np.cross(lever_c, pull) + twist + friction
            if hinge["parent"] is not None:
                parent = hinge["parent"]
                force[parent] = force[parent] - pull
                torque[parent] = torque[parent] - np.cross(lever_p, pull) - twist - friction
            if hinge["shaft"]:
                rotational_inertia[child] = rotational_inertia[child] + hinge["shaft"] * np.outer(
                    axis_c, axis_c)
        out = []
        for b, (_, rotation, velocity, omega) in enumerate(bodies):
            out += [velocity, (_skew(omega) @ rotation).ravel(), force[b] / masses[b],
                    np.linalg.solve(rotational_inertia[b], torque[b])]
        return np.concatenate(out)

    return rhs


def joint_angles(y: np.ndarray) -> np.ndarray:
    """θ1, θ2 [rad] (wrapped) from the body rotations.

    θ1: A's x axis about world y; θ2: B's rod about x_A (0 hanging, as the rigid reference).
    """
    (_, rot_a, _, _), (_, rot_b, _, _) = _unpack(y)
    x_a, y_a, z_a = rot_a.T  # body axes in world coordinates (rows of Rᵀ)
    rod = rot_b[:, 0]
    theta1 = np.arctan2(-x_a[2], x_a[0])
    theta2 = np.arctan2(rod @ y_a, -(rod @ z_a))
    return np.array([theta1, theta2])


def simulate_compliant(params: dict, theta0: Sequence[float], time_s: np.ndarray,
                       rtol: float = RTOL, atol: float = ATOL) -> dict:
    """Release from ``theta0`` at rest (zero deflection), unactuated; angles at ``time_s``.

    Returns ``{"theta": [n, 2] unwrapped, "nfev": evaluations}``.
    """
    pose = body_kinematics(params, theta0, (0.0, 0.0))
    # body_kinematics gives rotations of the principal frames (columns x, y, z of each body)
    y0 = np.concatenate([pose["p_A"], pose["R_A"].ravel(), np.zeros(6),
                         pose["p_B"], pose["R_B"].ravel(), np.zeros(6)])
    rhs = _derivative(params, _hinges(params), gravity_vector(params))
    solution = solve_ivp(rhs, (float(time_s[0]), float(time_s[-1])), y0, method="Radau",
                         t_eval=time_s, rtol=rtol, atol=atol)
    if not solution.success:
        raise RuntimeError(solution.message)
    angles = np.array([joint_angles(y) for y in solution.y.T])
    return {"theta": np.unwrap(angles, axis=0), "nfev": solution.nfev}

