"""The model a rig's hinges declare, chosen once: it simulates, predicts, replays and bounds.

A config declares its hinges ``rigid`` (ball bearings, stiff shafts: the rigid tree stepped in
joint coordinates, :class:`Rigid`) or ``compliant`` (the hinges' compliance and damping are the
rig's physics: SPOOK through them, :class:`Compliant`). Everything that runs the fitted rig as a
simulator goes through that one object — the simulated recordings, the short-horizon
predictions and the open-loop replays that validate a fit, the Cramér–Rao bound, the
simulation-error stage's simulator — so nothing downstream asks which kind of hinges it has.
What to advise when the model misses is the model's too (``*_action``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mb_estimation.cramer_rao import CramerRao, cramer_rao_bound
from mb_estimation.estimation import RecordingEstimate
from mb_estimation.estimation.shooting import ShootingSettings
from mb_estimation.multibody import BodyStates
from mb_estimation.rigs import Rig
from mb_estimation.scenarios import Scenario
from mb_estimation.signals import GridData
from mb_estimation.simulation import SimulatedRecording, simulate_recording
from mb_estimation.validation import (
    RIGID_VALIDATION_DT,
    OpenLoopCheck,
    PredictionCheck,
    compile_validation,
    open_loop_check,
    prediction_check,
    rigid_open_loop_check,
    rigid_prediction_check,
)

#: The rigid simulation-error stage's step [s] (halved for the kept fit) and longest segment
#: [s]: its second-order error over 8 s of the 0.92 m release is 1.4e-4 rad at 1 ms, a
#: seventh of 1e-3 rad noise; segments are lengthened up to whole recordings unless the
#: motion amplifies its start (unstable).
RIGID_SHOOTING_DT = 1e-3
#: ... and the kept fit's finest: 1/8 of it, where the fit's values still move by more than
#: half their std from the step (fast motions, e.g. a whirling pendulum).
RIGID_FINEST_KEPT_DIVISOR = 8
RIGID_LONGEST_SEGMENT_S = 16.0

#: How long the predictions look ahead [s] and over how much of its start a replay is fitted.
PREDICTION_HORIZON_S = 0.5
REPLAY_FIRST_S = 1.0


@dataclass(frozen=True)
class Rigid:
    """Rigid hinges: the rigid tree, stepped by the second-order variational step.

    Converged steps (:data:`~mb_estimation.validation.RIGID_VALIDATION_DT`) for the replays
    and predictions; the simulation-error stage shoots at :data:`RIGID_SHOOTING_DT`.
    """

    rig: Rig
    simulation_dt: float  # the simulate command's step [s] (the config's simulation.dt)

    name: ClassVar[str] = "rigid"
    #: The simulation-error fit is kept only where it follows the recordings or predicts them
    #: no worse than the joint fit: where the rigid model misses the rig, the joint fit's force
    #: noise keeps it robust.
    refit_always_kept: ClassVar[bool] = False
    still_moves_action: ClassVar[str] = (
        "the rigid model misses something this rig does at the step's time scale (the input's "
        "delay or gain, friction): see the other findings; or refine the step (--step)")
    short_recordings_note: ClassVar[str] = ""

    @property
    def description(self) -> str:
        """What the validation runs, in words (for the outputs)."""
        return (f"the rigid model in joint coordinates, second-order steps of at most "
                f"{RIGID_VALIDATION_DT:g} s")

    def mispredicts_action(self, refitted: bool, *, forced: bool = True,
                           dry_friction: Sequence[str] = (), zeros: Sequence[str] = (),
                           level: bool = False) -> str:
        """What to do when the fitted model does not predict the recordings.

        ``forced``: a recording has an input (else its model is not in question);
        ``dry_friction``: the dry friction parameters of the joints the recordings move;
        ``zeros``: the encoder offsets held fixed that the data could tell; ``level``: the rig
        taken to stand level (its lean, ``tilt``, could be freed).
        """
        checks = ["each joint's sign and offset in recording.joints (the model's directions: "
                  "user guide, Model conventions; a flipped sign can pass for a delay) and "
                  "that the angles are in radians"] \
            + ([f"the encoders' zero ({', '.join(zeros)} free)"] if zeros else []) \
            + (["the input model (its gain free, recording.input_delay_s)"] if forced else []) \
            + ([f"dry friction ({', '.join(dry_friction)})"] if dry_friction else []) \
            + (["whether the rig stands level (tilt free)"] if level else []) \
            + ["the fixed geometry"]
        return (f"the recordings are read wrongly or the model lacks something this rig does: "
                f"check {', '.join(checks)}; compliant-hinge refinement does not apply to "
                "declared rigid hinges")

    def shooting(self, segment_s: float) -> tuple[float, ShootingSettings]:
        """The simulation-error stage's step [s] and shooting settings."""
        return RIGID_SHOOTING_DT, ShootingSettings(
            segment_s=segment_s, lead_s=0.0, rigid=True,
            longest_segment_s=RIGID_LONGEST_SEGMENT_S, kept_step_divisor=2,
            max_kept_step_divisor=RIGID_FINEST_KEPT_DIVISOR)

    def simulate(self, values: Mapping[str, object], scenario: str | Scenario, **settings
                 ) -> SimulatedRecording:
        """:func:`~mb_estimation.simulation.simulate_recording` through rigid hinges."""
        return simulate_recording(self.rig, values, scenario, rigid=True, **settings)

    def predictions(self, values: Mapping[str, object], grids: Sequence[GridData],
                    estimates: Sequence[RecordingEstimate],
                    horizon_s: float = PREDICTION_HORIZON_S) -> tuple[PredictionCheck, ...]:
        """Each recording predicted ``horizon_s`` ahead from the estimated joint states."""
        return tuple(rigid_prediction_check(self.rig, values, grid, estimate,
                                            horizon_s=horizon_s)
                     for grid, estimate in zip(grids, estimates, strict=True))

    def replays(self, values: Mapping[str, object], grids: Sequence[GridData],
                estimates: Sequence[RecordingEstimate], first_s: float = REPLAY_FIRST_S,
                free: Sequence[str] = ()) -> tuple[OpenLoopCheck, ...]:
        """Each recording replayed open loop from its estimated start (refined on ``first_s``).

        ``free``: the fit's free parameters (the refinement then shares the stage's program).
        """
        return tuple(rigid_open_loop_check(self.rig, values, grid, estimate.joint_angles[0],
                                           estimate.joint_rates[0], first_s, free=free)
                     for grid, estimate in zip(grids, estimates, strict=True))

    def compile_checks(self, values: Mapping[str, object], grid: GridData) -> None:
        """Compile what :meth:`predictions` and :meth:`replays` run on ``grid``; run nothing."""
        compile_validation(self.rig, values, grid, horizon_s=PREDICTION_HORIZON_S, rigid=True)

    def cramer_rao(self, values: Mapping[str, object], free: Sequence[str],
                   grids: Sequence[GridData], estimates: Sequence[RecordingEstimate],
                   noise_rad: np.ndarray) -> CramerRao | None:
        """The Cramér–Rao bound of the scalar ``free`` parameters on these recordings.

        From each recording's estimated start, with its angle noise ``noise_rad [recordings,
        joints]`` (:mod:`mb_estimation.cramer_rao`).
        """
        starts = [np.concatenate([states.joint_angles[0], states.joint_rates[0]])
                  for states in estimates]
        return cramer_rao_bound(self.rig, values, free, grids, starts, list(noise_rad))


@dataclass(frozen=True)
class Compliant:
    """Compliant, damped hinges: SPOOK through the hinges' compliance and damping parameters.

    Steps of ``simulation_dt`` [s] (the config's ``simulation.dt``); each shooting segment of
    the simulation-error stage starts ``lead_s`` (three of the hinges' slowest relaxation time
    τ) before its scored part.
    """

    rig: Rig
    simulation_dt: float
    lead_s: float = 0.0

    name: ClassVar[str] = "compliant"
    #: The refit through the declared hinges is the rig's physics, which the rigid limit lacks.
    refit_always_kept: ClassVar[bool] = True
    still_moves_action: ClassVar[str] = (
        "the compliant hinges are declared but the fit stopped at their rigid limit: fit "
        "through them (--simulation-refinement on)")
    short_recordings_note: ClassVar[str] = (
        ", and its values may be shadows of the declared compliant hinges")

    @property
    def description(self) -> str:
        return f"the config's compliant hinges (SPOOK, steps of {self.simulation_dt:g} s)"

    def mispredicts_action(self, refitted: bool, **_context) -> str:
        if refitted:
            return ("neither the rigid limit nor the declared compliant hinges follow these "
                    "recordings: check the input model and friction")
        return ("the values are the rigid limit's and the prediction runs the declared "
                "compliant hinges: fit through them (--simulation-refinement on, on "
                "recordings longer than one of its segments)")

    def shooting(self, segment_s: float) -> tuple[float, ShootingSettings]:
        return self.simulation_dt, ShootingSettings(segment_s=segment_s, lead_s=self.lead_s)

    def simulate(self, values: Mapping[str, object], scenario: str | Scenario, **settings
                 ) -> SimulatedRecording:
        return simulate_recording(self.rig, values, scenario, rigid=False, **settings)

    def predictions(self, values, grids, estimates, horizon_s: float = PREDICTION_HORIZON_S
                    ) -> tuple[PredictionCheck, ...]:
        return tuple(prediction_check(self.rig, values, grid, estimate, horizon_s=horizon_s,
                                      simulation_dt=self.simulation_dt)
                     for grid, estimate in zip(grids, estimates, strict=True))

    def replays(self, values, grids, estimates, first_s: float = REPLAY_FIRST_S,
                free: Sequence[str] = ()) -> tuple[OpenLoopCheck, ...]:
        """Each recording replayed from its estimated start, refined by finite differences."""
        return tuple(open_loop_check(self.rig, values, grid, BodyStates(
            estimate.position[0], estimate.orientation[0], estimate.linear_velocity[0],
            estimate.angular_velocity[0]), first_s, simulation_dt=self.simulation_dt)
            for grid, estimate in zip(grids, estimates, strict=True))

    def compile_checks(self, values, grid: GridData) -> None:
        compile_validation(self.rig, values, grid, horizon_s=PREDICTION_HORIZON_S,
                           simulation_dt=self.simulation_dt)

    def cramer_rao(self, values, free, grids, estimates, noise_rad) -> None:
        """None: the refinement through compliant hinges is itself a simulation-error fit."""
        return None


Model = Rigid | Compliant
