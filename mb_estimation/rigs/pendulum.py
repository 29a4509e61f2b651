"""The single pendulum of paper §4.2 on a frictional hinge (viscous, dry or Stribeck (4.1)).

World: y up, gravity ``(0, -gravity, 0)`` rotated by ``tilt``. The hinge sits at the origin with
axis world +z; the pendulum's frame at θ = 0 has ``x_P`` = -world y (from the hinge towards the
centre of mass, which sits at ``l x_P``), ``y_P`` = world x, ``z_P`` = world z. θ = 0 hangs down.
The inertia ``J_P`` about the centre of mass is taken isotropic: only its component about the
hinge axis matters for the planar motion.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mb_estimation.multibody import WORLD, Bodies, Hinge, Multibody
from mb_estimation.numerics import jax
from mb_estimation.rigs.furuta import _frame, gravity_vector

jnp = jax.numpy

HINGE_WORLD_FRAME = _frame([0, 0, 1], [0, -1, 0])
HINGE_PENDULUM_FRAME = _frame([0, 0, 1], [1, 0, 0])


def rest_inertia(params: Mapping[str, object]) -> float:
    """The inertia the pendulum turns with about its hinge [kg m²]: ``J_P + m_P l²``."""
    p = {name: float(np.asarray(params[name])) for name in ("J_P", "m_P", "l")}
    return p["J_P"] + p["m_P"] * p["l"] ** 2


def build_system(params: Mapping[str, jax.Array], friction: str = "dry") -> Multibody:
    """The pendulum as a :class:`Multibody`; ``friction`` is ``viscous``, ``dry`` or ``stribeck``.

    Dry friction bounds the hinge-axis impulse by ``r_mu Σ|λ|``; Stribeck (4.1) by
    ``(r_mu_k + r_mu_delta exp(-ζ ω_k²)) Σ|λ|``. Viscous friction ``b`` acts in every model.
    """
    p = params
    zero = jnp.zeros(())
    if friction == "stribeck":
        coefficient, delta, zeta = p["r_mu_k"], p["r_mu_delta"], p["zeta"]
    else:
        coefficient, delta, zeta = p["r_mu"], zero, zero
    hinge = Hinge(
        parent=WORLD,
        child=0,
        has_motor=False,
        has_dry_friction=friction != "viscous",
        parent_anchor=jnp.zeros(3),
        child_anchor=jnp.stack([-p["l"], zero, zero]),
        parent_frame=HINGE_WORLD_FRAME,
        child_frame=HINGE_PENDULUM_FRAME,
        compliance_linear=p["eps_lin"],
        compliance_rotational=p["eps_rot"],
        damping=p["tau"],
        viscous=p["b"],
        motor_gain=zero,
        shaft_inertia=zero,
        friction_coefficient=coefficient,
        stribeck_delta=delta,
        stribeck_zeta=zeta,
    )
    bodies = Bodies(mass=jnp.stack([p["m_P"]]), inertia=jnp.stack([jnp.full(3, p["J_P"])]))
    return Multibody(bodies=bodies, hinges=(hinge,),
                     gravity=gravity_vector(p["tilt"], p["gravity"]))
