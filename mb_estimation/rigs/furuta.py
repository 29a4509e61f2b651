"""The Furuta pendulum (paper §4.3) in the geometry below (docs/user-guide.md, Model conventions).

World: y up, gravity ``(0, -gravity, 0)`` rotated by ``tilt``. Hinge 1 at the origin, axis
world +y, carries arm A (body 0); θ1 rotates A about +y. A's frame at θ1 = 0: ``x_A`` = world x
(along the arm), ``y_A`` = -world z, ``z_A`` = world y. A's centre of mass at ``l1 x_A``, hinge 2
at ``lA x_A`` with axis ``x_A``; θ2 rotates pendulum B (body 1) relative to A about ``x_A``,
0 hanging down, π upright. B's frame at θ1 = θ2 = 0: ``x_B`` = -world y (along the rod towards
B's centre of mass, which sits at hinge 2 + ``l2 x_B``), ``y_B`` = world x (swing axis),
``z_B`` = world z. Inertias are principal in the body frames. The motor applies ``K u`` about
+y on A with shaft inertia ``J_shaft`` (F.3), plus an optional torque ripple (cogging) periodic in
θ1; both hinges have viscous (F.2) and dry friction (load-proportional ``mu r`` and a constant
Coulomb torque). The joint angles are the encoders' readings: ``encoder_offset1`` and
``encoder_offset2`` are where the arm's zero and the hanging pendulum are in them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.spatial.transform import Rotation

from mb_estimation import lie
from mb_estimation.multibody import WORLD, Bodies, Hinge, Multibody
from mb_estimation.numerics import jax
from mb_estimation.rigs.parameters import RIPPLE_HARMONICS

jnp = jax.numpy


def _frame(x_axis, y_axis):
    """Quaternion ``[w, x, y, z]`` of the right-handed frame with the given x and y axes.

    ``z = x × y``; SciPy's rotation (canonical: ``w ≥ 0``), the same numbers as
    :func:`lie.quat_from_matrix` without compiling a program at every import.
    """
    x, y = np.asarray(x_axis, float), np.asarray(y_axis, float)
    rotation = Rotation.from_matrix(np.stack([x, y, np.cross(x, y)], axis=1))
    return rotation.as_quat(canonical=True, scalar_first=True)


# Hinge 1: frame a in the world and frame b in A coincide at θ1 = 0; x = world +y = z_A.
HINGE1_WORLD_FRAME = _frame([0, 1, 0], [1, 0, 0])
HINGE1_ARM_FRAME = _frame([0, 0, 1], [1, 0, 0])
# Hinge 2: frame a = A's own axes (x = x_A); frame b in B coincides with it at θ2 = 0 (x = y_B).
HINGE2_ARM_FRAME = _frame([1, 0, 0], [0, 1, 0])
HINGE2_PENDULUM_FRAME = _frame([0, 1, 0], [0, 0, -1])


def gravity_vector(tilt, magnitude):
    """Gravity [m/s^2]: ``(0, -magnitude, 0)`` rotated by the unit quaternion ``tilt`` (§4.3)."""
    down = jnp.array([0.0, -1.0, 0.0])
    return magnitude * lie.quat_rotate(lie.quat_normalize(tilt), down)


def rest_inertia(params: Mapping[str, object]) -> float:
    """The inertia the motor turns with the pendulum hanging at rest [kg m²].

    ``M₁₁(θ₂ = 0) = J_shaft + J_Azz + m_A l1² + m_B lA² + J_Bxx`` (B's rod along gravity, so
    B turns about its own x axis).
    """
    p = {name: float(np.asarray(params[name])) for name in
         ("J_shaft", "J_Azz", "m_A", "l1", "m_B", "lA", "J_Bxx")}
    return (p["J_shaft"] + p["J_Azz"] + p["m_A"] * p["l1"] ** 2 + p["m_B"] * p["lA"] ** 2
            + p["J_Bxx"])


def build_system(params: Mapping[str, jax.Array], ripple_per_revolution: int = 0) -> Multibody:
    """The Furuta pendulum as a :class:`Multibody` from its named parameters (module docstring).

    The encoder offsets ``encoder_offset1``, ``encoder_offset2`` [rad] turn each hinge's child
    frame about the hinge axis, so the model's joint angles are the encoders' readings: the arm
    is at its zero at θ1 = encoder_offset1 and the pendulum hangs at θ2 = encoder_offset2.
    ``ripple_per_revolution``: the arm torque ripple's periods per revolution (0: no ripple;
    its amplitudes are the ``ripple_cos*``/``ripple_sin*`` parameters).
    """
    p = params
    zero = jnp.zeros(())
    ripple = {}
    if ripple_per_revolution:
        ripple = dict(
            ripple_cos=jnp.stack([p[f"ripple_cos{k}"] for k in range(1, RIPPLE_HARMONICS + 1)]),
            ripple_sin=jnp.stack([p[f"ripple_sin{k}"] for k in range(1, RIPPLE_HARMONICS + 1)]),
            ripple_per_revolution=int(ripple_per_revolution))
    bodies = Bodies(
        mass=jnp.stack([p["m_A"], p["m_B"]]),
        inertia=jnp.stack(
            [
                jnp.stack([p["J_Axx"], p["J_Ayy"], p["J_Azz"]]),
                jnp.stack([p["J_Bxx"], p["J_Byy"], p["J_Bzz"]]),
            ]
        ),
    )
    hinge1 = Hinge(
        parent=WORLD,
        child=0,
        has_motor=True,
        has_dry_friction=True,
        parent_anchor=jnp.zeros(3),
        child_anchor=jnp.stack([-p["l1"], zero, zero]),
        parent_frame=HINGE1_WORLD_FRAME,
        child_frame=lie.quat_turned_about_x(HINGE1_ARM_FRAME, p["encoder_offset1"]),
        compliance_linear=p["eps_lin1"],
        compliance_rotational=p["eps_rot1"],
        damping=p["tau1"],
        viscous=p["b1"],
        motor_gain=p["K"],
        shaft_inertia=p["J_shaft"],
        friction_coefficient=p["mu1"] * p["r1"],
        stribeck_delta=zero,
        stribeck_zeta=zero,
        coulomb_torque=p["coulomb1"],
        **ripple,
    )
    hinge2 = Hinge(
        parent=0,
        child=1,
        has_motor=False,
        has_dry_friction=True,
        parent_anchor=jnp.stack([p["lA"] - p["l1"], zero, zero]),
        child_anchor=jnp.stack([-p["l2"], zero, zero]),
        parent_frame=HINGE2_ARM_FRAME,
        child_frame=lie.quat_turned_about_x(HINGE2_PENDULUM_FRAME, p["encoder_offset2"]),
        compliance_linear=p["eps_lin2"],
        compliance_rotational=p["eps_rot2"],
        damping=p["tau2"],
        viscous=p["b2"],
        motor_gain=zero,
        shaft_inertia=zero,
        friction_coefficient=p["mu2"] * p["r2"],
        stribeck_delta=zero,
        stribeck_zeta=zero,
        coulomb_torque=p["coulomb2"],
    )
    return Multibody(bodies=bodies, hinges=(hinge1, hinge2),
                     gravity=gravity_vector(p["tilt"], p["gravity"]))
