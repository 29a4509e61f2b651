"""Names, units and admissible ranges of every rig's model parameters.

Pure Python: the config loader (``mb_estimation.config``) validates user input against these
specs, the rigs build their multibody systems from values keyed by these names, and the estimator
uses the bounds as the default box B of paper §3.1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ParameterSpec:
    """One model parameter.

    ``kind`` is ``"scalar"`` (a float) or ``"quaternion"`` (a unit quaternion ``[w, x, y, z]``
    with three degrees of freedom, estimated in its tangent space). ``lower``/``upper`` bound the
    value of a scalar parameter (the default box when it is free); they are ignored for
    quaternions. ``default``: the value taken when a config leaves the parameter out.
    """

    name: str
    unit: str
    description: str
    lower: float = 0.0
    upper: float = math.inf
    kind: str = "scalar"
    # the value taken where a config leaves the parameter out (None: it must give one)
    default: float | tuple[float, float, float, float] | None = None
    # the joint whose own motion alone shows it (a recording holding that joint still says
    # nothing of it); None: shown by both, or by neither
    joint: str | None = None

    @property
    def size(self) -> int:
        """Number of stored numbers (1 or 4)."""
        return 4 if self.kind == "quaternion" else 1

    @property
    def tangent_size(self) -> int:
        """Number of degrees of freedom (1 or 3)."""
        return tangent_size(self.kind)


def tangent_size(kind: str) -> int:
    """Degrees of freedom of a parameter of ``kind``: 1 for a scalar, 3 for a quaternion.

    A quaternion's tangent is the world-frame rotation vector ψ [rad] of ``e ⊞ ψ = exp(ψ) ⋆ e``
    (:mod:`mb_estimation.lie`).
    """
    return 3 if kind == "quaternion" else 1


def tangent_labels(names, kinds) -> tuple[str, ...]:
    """One label per tangent entry, as :func:`tangent_slices` lays them out.

    The name for a scalar, ``name_rx/ry/rz`` (its rotation vector's components) for a
    quaternion.
    """
    labels = []
    for name, kind in zip(names, kinds, strict=True):
        labels += [f"{name}_r{axis}" for axis in "xyz"] if kind == "quaternion" else [name]
    return tuple(labels)


def tangent_slices(names, kinds) -> dict[str, slice]:
    """Each parameter's slice of a tangent vector ``δχ`` stacked in the order of ``names``.

    One entry per ``"scalar"``, three per ``"quaternion"`` (its rotation vector ψ [rad]); the
    layout of the estimator's ``δχ`` and of the covariances of the estimates built from it.
    """
    out, start = {}, 0
    for name, kind in zip(names, kinds, strict=True):
        size = tangent_size(kind)
        out[name] = slice(start, start + size)
        start += size
    return out


@dataclass(frozen=True)
class RigSpec:
    """What a rig is made of, as far as configuration and recordings are concerned."""

    name: str
    parameters: tuple[ParameterSpec, ...]
    joints: tuple[str, ...]  # observed joint angles, in the order the rig reports them
    inputs: tuple[str, ...]  # control inputs, in order (empty: the rig is not actuated)
    driven: tuple[str, ...] = ()  # the joint each input turns, in the inputs' order

    def parameter(self, name: str) -> ParameterSpec:
        for spec in self.parameters:
            if spec.name == name:
                return spec
        raise KeyError(name)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.parameters)


_INERTIA = "kg m^2"
_TINY = 1e-12  # strictly positive lower bound for quantities the model divides by


#: A hinge's compliance [m/N, rad/(N m)] and relaxation time [s] where a config gives none: the
#: paper's stiff, damped hinges (§4.7). Rigid hinges (the default declaration) use them only in
#: the paper's own fit.
DEFAULT_COMPLIANCE = 1e-6
DEFAULT_RELAXATION_TIME_S = 0.02


def _hinge_specs(suffix: str, hinge: str) -> tuple[ParameterSpec, ...]:
    """Compliances and damping of one hinge: names end in ``suffix``, descriptions say ``hinge``."""
    return (
        ParameterSpec(f"eps_lin{suffix}", "m/N", f"translational compliance of {hinge}",
                      lower=_TINY, default=DEFAULT_COMPLIANCE),
        ParameterSpec(f"eps_rot{suffix}", "rad/(N m)", f"rotational compliance of {hinge}",
                      lower=_TINY, default=DEFAULT_COMPLIANCE),
        ParameterSpec(f"tau{suffix}", "s", f"constraint damping (relaxation time) of {hinge}",
                      default=DEFAULT_RELAXATION_TIME_S),
    )


#: Harmonics of the arm's torque ripple the Furuta rig has parameters for.
RIPPLE_HARMONICS = 2


def _ripple_specs(harmonics: int) -> tuple[ParameterSpec, ...]:
    """The cosine and sine amplitudes of each harmonic of the arm's torque ripple."""
    return tuple(
        ParameterSpec(f"ripple_{part}{k}", "N m", f"arm torque ripple (cogging): {part} "
                      f"amplitude of its harmonic {k}", lower=-math.inf, default=0.0,
                      joint="arm")
        for k in range(1, harmonics + 1) for part in ("cos", "sin"))


#: [m/s^2] gravity's magnitude where a config does not give one: the paper's (§4.3, Sweden).
DEFAULT_GRAVITY = 9.82

# Both rigs' gravity: a magnitude (the lab's own: 9.78 at the equator ... 9.83 at the poles) and a
# direction, (0, -1, 0) rotated by the tilt (paper §4.3).
_GRAVITY_SPECS = (
    ParameterSpec("gravity", "m/s^2", "magnitude of gravity at the rig (local g)", lower=_TINY,
                  default=DEFAULT_GRAVITY),
    ParameterSpec("tilt", "quaternion", "rotation applied to nominal gravity (0, -gravity, 0)",
                  kind="quaternion", default=(1.0, 0.0, 0.0, 0.0)),
)


FURUTA = RigSpec(
    name="furuta",
    parameters=(
        ParameterSpec("l1", "m", "hinge 1 to the centre of mass of arm A, along x_A"),
        ParameterSpec("lA", "m", "hinge 1 to hinge 2, along x_A"),
        ParameterSpec("l2", "m", "hinge 2 to the centre of mass of pendulum B, along x_B"),
        ParameterSpec("m_A", "kg", "mass of arm A", lower=_TINY),
        ParameterSpec("m_B", "kg", "mass of pendulum B", lower=_TINY),
        ParameterSpec("J_Axx", _INERTIA, "inertia of A about x_A (along the arm)", lower=_TINY,
                      joint="arm"),
        ParameterSpec("J_Ayy", _INERTIA, "inertia of A about y_A", lower=_TINY, joint="arm"),
        ParameterSpec("J_Azz", _INERTIA, "inertia of A about z_A (the motor axis)", lower=_TINY,
                      joint="arm"),
        ParameterSpec("J_Bxx", _INERTIA, "inertia of B about x_B (along the rod)", lower=_TINY),
        ParameterSpec("J_Byy", _INERTIA, "inertia of B about y_B (the swing axis)", lower=_TINY,
                      joint="pendulum"),
        ParameterSpec("J_Bzz", _INERTIA, "inertia of B about z_B", lower=_TINY),
        ParameterSpec("J_shaft", _INERTIA, "motor shaft inertia on hinge 1 (paper F.3)",
                      default=0.0, joint="arm"),
        ParameterSpec("K", "N m/V", "motor gain: torque per volt about θ1's positive "
                      "direction (up), whatever the arm's recorded sign", lower=-math.inf,
                      joint="arm"),
        ParameterSpec("b1", "N m s/rad", "viscous friction of hinge 1 (paper F.2)", joint="arm"),
        ParameterSpec("b2", "N m s/rad", "viscous friction of hinge 2 (paper F.2)",
                      joint="pendulum"),
        ParameterSpec("mu1", "1", "dry friction coefficient of hinge 1", default=0.0, joint="arm"),
        ParameterSpec("mu2", "1", "dry friction coefficient of hinge 2", default=0.0,
                      joint="pendulum"),
        # the paper's (Table 1: "not physical", §4.3); they scale mu1, mu2
        ParameterSpec("r1", "m", "internal friction distance of hinge 1", default=1.0, joint="arm"),
        ParameterSpec("r2", "m", "internal friction distance of hinge 2", default=1.0,
                      joint="pendulum"),
        # Driver and sensor terms (off at their defaults): see the user guide, "Driver and
        # sensor terms".
        ParameterSpec("coulomb1", "N m", "dry friction torque of hinge 1 that does not grow "
                      "with its load", default=0.0, joint="arm"),
        ParameterSpec("coulomb2", "N m", "dry friction torque of hinge 2 that does not grow "
                      "with its load", default=0.0, joint="pendulum"),
        ParameterSpec("encoder_offset1", "rad", "arm encoder zero offset: the angle (after "
                      "recording.joints' sign and offset) where the arm is at the model's "
                      "zero", lower=-math.pi, upper=math.pi,
                      default=0.0, joint="arm"),
        ParameterSpec("encoder_offset2", "rad", "pendulum encoder zero offset: the angle "
                      "(after recording.joints' sign and offset) where the pendulum hangs "
                      "straight down", lower=-math.pi, upper=math.pi,
                      default=0.0, joint="pendulum"),
        *_ripple_specs(RIPPLE_HARMONICS),
        *_GRAVITY_SPECS,
        *_hinge_specs("1", "hinge 1"),
        *_hinge_specs("2", "hinge 2"),
    ),
    joints=("arm", "pendulum"),
    inputs=("voltage",),
    driven=("arm",),
)

# The parameter set the paper estimates for the real rig (§4.6): 13 degrees of freedom.
FURUTA_PAPER_FREE = ("K", "J_Axx", "J_Ayy", "J_Azz", "J_Byy", "J_Bzz", "b1", "b2", "mu1", "mu2",
                     "tilt")

PENDULUM = RigSpec(
    name="pendulum",
    parameters=(
        ParameterSpec("m_P", "kg", "mass of the pendulum", lower=_TINY),
        ParameterSpec("l", "m", "hinge to the centre of mass"),
        ParameterSpec("J_P", _INERTIA, "inertia about the centre of mass in the plane of swing",
                      lower=_TINY),
        ParameterSpec("b", "N m s/rad", "viscous friction of the hinge"),
        ParameterSpec("r_mu", "m", "dry friction (friction: dry): coefficient times distance"),
        ParameterSpec("r_mu_k", "m", "Stribeck kinetic part (friction: stribeck), paper (4.1)"),
        ParameterSpec("r_mu_delta", "m", "Stribeck static minus kinetic part, paper (4.1)"),
        ParameterSpec("zeta", "s^2/rad^2", "Stribeck transition rate, paper (4.1)"),
        *_GRAVITY_SPECS,
        *_hinge_specs("", "the hinge"),
    ),
    joints=("pendulum",),
    inputs=(),
)

# Friction models of the single pendulum (paper §4.2 / §4.5).
PENDULUM_FRICTION_MODELS = ("viscous", "dry", "stribeck")

RIGS = {spec.name: spec for spec in (FURUTA, PENDULUM)}

# Per hinge, the parameters that give it dry friction: a hinge whose parameters are all fixed
# at zero has none, and its rows can be left out of the model (the same dynamics, less work).
DRY_FRICTION_PARAMETERS = {
    "furuta": (("mu1", "coulomb1"), ("mu2", "coulomb2")),
    "pendulum": (("r_mu", "r_mu_k", "r_mu_delta"),),
}

# The parameters that act through the recorded input alone (its gain): with every recording
# unforced (input 0) the data say nothing of them.
INPUT_GAIN_PARAMETERS = {"furuta": ("K",), "pendulum": ()}

# The parameters of the arm's torque ripple: the ripple is on where one of them is free or
# non-zero, with its period from the config's ``ripple_per_revolution``.
RIPPLE_PARAMETERS = {"furuta": tuple(spec.name for spec in _ripple_specs(RIPPLE_HARMONICS)),
                     "pendulum": ()}

# The encoders' zero offsets (the Furuta rig's; the pendulum has none).
ENCODER_OFFSET_PARAMETERS = {"furuta": ("encoder_offset1", "encoder_offset2"), "pendulum": ()}


def parameters_in_use(names, parameters, free) -> tuple[str, ...]:
    """Those of ``names`` that are free or non-zero: the model terms they make are on.

    ``parameters``: values by name (a name it lacks is off); ``free``: the free names.
    """
    def non_zero(value) -> bool:
        return any(part != 0 for part in value) if isinstance(value, tuple) else value != 0

    return tuple(name for name in names
                 if name in free or name in parameters and non_zero(parameters[name]))


# Compliance parameters that `--compliance EPS` sets at once, per rig.
COMPLIANCE_PARAMETERS = {
    "furuta": ("eps_lin1", "eps_rot1", "eps_lin2", "eps_rot2"),
    "pendulum": ("eps_lin", "eps_rot"),
}
