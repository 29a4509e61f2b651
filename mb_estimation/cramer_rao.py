"""The Cramér–Rao bound of a calibration: the precision a simulation-error fit could reach.

For white angle noise of standard deviation σ_j on joint j at every observed sample, a pure
output-error model — the rigid model simulated from a fitted initial state, what MuJoCo's
sysid and most lab notebooks fit — has the Fisher information

    F = Jᵀ W J,   W = diag(1/σ_j²),

with ``J`` the sensitivity of the simulated angles to the free parameters and to the initial
state of each recording. The initial states are nuisance parameters: eliminated by the Schur
complement, they leave the parameters' information ``F_χχ - F_χx F_xx⁻¹ F_xχ``, whose inverse
bounds the covariance of any unbiased estimate from these data. Two uses:

* beside the fit's own standard deviations, it shows how much precision the method leaves;
* its relative standard deviations say what the *data* determine, whatever the method: a
  joint state-and-parameter fit weighs a force noise whose size scales with the parameters,
  and that weight alone can pin a scale the data leave open (K, J_Azz and b1 together on a
  rig whose only torque scale is its input gain).

The sensitivities are forward differences of :func:`~mb_estimation.validation.rigid_replay`
(its compiled chunks: no program of its own), from the fit's initial state. Scalar parameters
only; a quaternion (``tilt``) is left out (its bound is not computed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.estimation.shooting_segments import amplification
from mb_estimation.pseudo_inverse import informed, mark_undetermined, scaled_pseudo_inverse
from mb_estimation.rigs import Rig
from mb_estimation.validation import rigid_replay, rigid_replays, rigid_systems

#: The sensitivities' longest simulation step [s]: derivatives need less accuracy than a replay.
SENSITIVITY_DT = 2e-3
#: Relative step of the parameters' forward differences; absolute ones of the initial state.
PARAMETER_STEP = 1e-6
ANGLE_STEP_RAD = 1e-7
RATE_STEP_RAD_S = 1e-6


@dataclass(frozen=True)
class CramerRao:
    """The bound on the scalar free parameters ``names``.

    Their ``covariance [p, p]`` and ``std`` by name (``inf`` where the data determine nothing
    of it), and the ``information [p, p]`` it inverts (the initial states eliminated).
    ``amplification``: how much the simulated motion amplifies a change of its initial state,
    the largest over the recordings, as the simulation-error stage measures its segments
    (:func:`~mb_estimation.estimation.shooting_segments.amplification`): the bound counts on
    each recording followed in one piece, which that stage does only up to its
    ``max_amplification``.
    """

    names: tuple[str, ...]
    covariance: np.ndarray
    std: dict[str, float]
    information: np.ndarray
    amplification: float


def cramer_rao_bound(rig: Rig, values: Mapping[str, object], names: Sequence[str], grids,
                     starts: Sequence[np.ndarray], noise_rad: Sequence[np.ndarray], *,
                     simulation_dt: float = SENSITIVITY_DT, together: bool = False
                     ) -> CramerRao | None:
    """The bound on the scalar ``names`` of ``values`` from recordings on ``grids``.

    ``starts[i]``: recording i's estimated joint state (angles, rates) at its first grid
    point; ``noise_rad[i]``: its angle noise per joint [rad] (the fit's observation residuals).
    ``simulation_dt``: the replays' longest step [s]; ``together``: a recording's replays in one
    batched program (faster where it is evaluated often; one more program to compile). None
    without a scalar among ``names``.
    """
    names = tuple(name for name in names if np.size(values[name]) == 1)
    if not names:
        return None
    steps, moved = [], []
    for name in names:
        value = float(np.ravel(values[name])[0])
        steps.append(PARAMETER_STEP * max(abs(value), 1e-6))  # a value at 0 (a friction) too
        moved.append({**values, name: value + steps[-1]})
    system, *others = rigid_systems(rig, values, *moved)
    perturbed = list(zip(steps, others, strict=True))
    information, amplified = np.zeros((len(names), len(names))), 0.0
    for grid, start, noise in zip(grids, starts, noise_rad, strict=True):
        recording, amplified_here = _parameter_information(
            system, perturbed, grid, np.asarray(start), simulation_dt,
            np.asarray(noise, dtype=np.float64), together)
        information, amplified = information + recording, max(amplified, amplified_here)
    covariance = covariance_of(information)
    std = {name: float(np.sqrt(covariance[i, i])) for i, name in enumerate(names)}
    return CramerRao(names, covariance, std, information, amplified)


def covariance_of(information: np.ndarray) -> np.ndarray:
    """The (pseudo-)inverse of an information matrix, ``inf`` where it holds nothing."""
    determined = informed(np.diag(information))
    information = np.where(np.outer(determined, determined), information, 0.0)
    scale = np.where(determined, np.sqrt(np.abs(np.diag(information))), 1.0)
    inverse, _, loading = scaled_pseudo_inverse(information, scale)
    return mark_undetermined(inverse, ~determined | (loading > 1e-6))


def _parameter_information(system, perturbed, grid, start, simulation_dt: float, noise,
                           together: bool) -> tuple[np.ndarray, float]:
    """One recording's information on the parameters and its motion's amplification.

    The information with the initial state eliminated; the amplification of a change of that
    state as :class:`CramerRao` gives it.

    The runs whose forward differences are the sensitivities: the values at ``start``, each
    parameter moved, each component of the initial state moved; ``together``: all of them in
    one batched program (:func:`~mb_estimation.validation.rigid_replays`), else one by one.
    """
    observed = np.asarray(grid.observed) > 0
    joints = start.shape[0] // 2
    state_steps = np.concatenate([np.full(joints, ANGLE_STEP_RAD),
                                  np.full(joints, RATE_STEP_RAD_S)])
    runs = [(system, start), *((other, start) for _, other in perturbed),
            *((system, start + step * np.eye(len(start))[index])
              for index, step in enumerate(state_steps))]
    if together:
        angles = list(rigid_replays([run[0] for run in runs], grid,
                                    np.stack([run[1] for run in runs]), simulation_dt))
    else:
        angles = [rigid_replay(run_system, grid, run_start, simulation_dt)
                  for run_system, run_start in runs]
    base = angles[0][observed]
    steps = [step for step, _ in perturbed] + list(state_steps)
    columns = [(run[observed] - base) / step for run, step in zip(angles[1:], steps, strict=True)]
    # a joint the recording holds still is held in the replay too: its angle tells nothing
    scale = np.where(np.asarray(grid.locked_mask) > 0, np.inf, noise)
    weighted = np.stack([(c / scale).ravel() for c in columns], axis=1)
    in_start = np.stack(columns[len(perturbed):], axis=-1).reshape(1, -1, len(start))
    return (eliminated_information(weighted, len(perturbed)),
            amplification(in_start, joints))


def eliminated_information(weighted: np.ndarray, count: int) -> np.ndarray:
    """The information on the first ``count`` columns' parameters, the others eliminated.

    ``weighted [m, count + s]``: the sensitivities of ``m`` observations to the parameters,
    then to ``s`` nuisance parameters (the initial state), each row divided by its noise's std.
    With ``F = weightedᵀ weighted`` that is the Schur complement ``F_χχ - F_χx F_xx⁺ F_xχ``
    (module docstring).
    """
    full = weighted.T @ weighted
    parameters, coupling, states = full[:count, :count], full[:count, count:], \
        full[count:, count:]
    return parameters - coupling @ np.linalg.pinv(states) @ coupling.T
