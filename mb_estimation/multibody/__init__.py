"""Rigid multibody dynamics in maximal coordinates: SPOOK forward steps and inverse dynamics.

Pure JAX, float64, no I/O. See :mod:`.system` (bodies, hinges), :mod:`.constraints` (rows),
:mod:`.stepper` (forward step, rollouts) and :mod:`.inverse` (impulse residuals).
"""

from mb_estimation.multibody.constraints import ConstraintRows, constraint_rows, energy
from mb_estimation.multibody.inverse import impulse_residuals, initial_state_residual
from mb_estimation.multibody.state import (
    BodyStates,
    configuration_boxminus,
    configuration_boxplus,
    state_boxminus,
    state_boxplus,
)
from mb_estimation.multibody.stepper import rollout, simulate, spook_step
from mb_estimation.multibody.system import (
    WORLD,
    Bodies,
    Hinge,
    Multibody,
    frictionless_hinges,
    joint_angles,
    joint_rates,
    states_from_joints,
    without_dry_friction,
)

__all__ = [
    "WORLD", "Bodies", "BodyStates", "ConstraintRows", "Hinge", "Multibody",
    "configuration_boxminus", "configuration_boxplus", "constraint_rows", "energy",
    "frictionless_hinges", "impulse_residuals", "initial_state_residual", "joint_angles",
    "joint_rates", "rollout", "simulate", "spook_step", "state_boxminus", "state_boxplus",
    "states_from_joints", "without_dry_friction",
]
