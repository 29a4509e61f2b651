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

The sensitivities are the rigid model's forward sensitivities from the fit's initial state,
the whole recording simulated as one segment through the simulation-error stage's own
linearisation (:func:`~mb_estimation.validation.recording_sensitivities`: no
program of its own where the stage ran; exact derivatives, where forward differences of the
replays needed a simulation per parameter and state component). Scalar parameters only; a
quaternion (``tilt``) is left out (its bound is not computed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.estimation.shooting import ShootingSettings
from mb_estimation.estimation.shooting_segments import amplification, frictionless_while_fitting
from mb_estimation.pseudo_inverse import informed, mark_undetermined, scaled_pseudo_inverse
from mb_estimation.rigs import Rig
from mb_estimation.validation import SENSITIVITY_DT, recording_sensitivities

#: The largest start-state amplification a calibration follows in one piece: beyond it the
#: simulation-error stage keeps shorter segments, and the bound of the whole motion (which
#: rewards near-chaotic motions without limit, and whose sensitivities outgrow float64 on a
#: long one) is not what a calibration reaches.
FOLLOWED_AMPLIFICATION = ShootingSettings().max_amplification


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

    @property
    def followed(self) -> bool:
        """Whether a calibration follows every recording in one piece, as the bound counts on.

        Not where a recording's motion amplifies a change of its start more than
        :data:`FOLLOWED_AMPLIFICATION`: there the bound neither says what a calibration could
        reach nor what the data leave open.
        """
        return bool(self.amplification <= FOLLOWED_AMPLIFICATION)


def cramer_rao_bound(rig: Rig, values: Mapping[str, object], names: Sequence[str], grids,
                     starts: Sequence[np.ndarray], noise_rad: Sequence[np.ndarray], *,
                     simulation_dt: float = SENSITIVITY_DT) -> CramerRao | None:
    """The bound on the scalar ``names`` of ``values`` from recordings on ``grids``.

    ``starts[i]``: recording i's estimated joint state (angles, rates) at its first grid
    point; ``noise_rad[i]``: its angle noise per joint [rad] (the fit's observation residuals).
    ``simulation_dt``: the sensitivities' longest step [s]. None without a scalar among
    ``names``.
    """
    names = tuple(name for name in names if np.size(values[name]) == 1)
    if not names:
        return None
    flags = frictionless_while_fitting(rig, dict(values), names)
    information, amplified = np.zeros((len(names), len(names))), 0.0
    for grid, start, noise in zip(grids, starts, noise_rad, strict=True):
        recording, amplified_here = _parameter_information(
            rig, values, names, flags, grid, np.asarray(start, dtype=np.float64),
            simulation_dt, np.asarray(noise, dtype=np.float64))
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


def _parameter_information(rig: Rig, values: Mapping[str, object], names: tuple[str, ...],
                           frictionless: tuple[bool, ...], grid, start: np.ndarray,
                           simulation_dt: float, noise: np.ndarray) -> tuple[np.ndarray, float]:
    """One recording's information on the parameters and its motion's amplification.

    The information with the initial state eliminated; the amplification of a change of that
    state as :class:`CramerRao` gives it.
    """
    joints = start.shape[0] // 2
    sensitivity = recording_sensitivities(rig, values, names, grid, start, simulation_dt,
                                          frictionless)
    # a joint the recording holds still is held in the simulation too: its angle tells nothing
    scale = np.where(np.asarray(grid.locked_mask) > 0, np.inf, noise)
    weighted = (sensitivity / scale[None, :, None]).reshape(-1, sensitivity.shape[-1])
    in_start = sensitivity[..., len(names):].reshape(1, -1, 2 * joints)
    return eliminated_information(weighted, len(names)), amplification(in_start, joints)


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
