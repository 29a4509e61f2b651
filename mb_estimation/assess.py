"""Assess once: which fit is kept, and every check of it, computed once from (setup, fit).

:func:`assess` first settles which of the fit's results is the calibration's (the joint fit, or
the simulation-error fit as its stage's :class:`~mb_estimation.fitting.Keep` rule says: a rule
that reads the candidates' predictions and how closely the shooting's simulations follow the
recordings), then checks the kept one: its short-horizon predictions and open-loop replays
through the model the hinges declare, the fit's angle noise, how far the predictions miss it,
how far each value still moved with the step, the Cramér–Rao bound, what the data determine,
and how late the input acts. One :class:`Assessment` holds them all; the verdict and the
writers read it and compute none of it again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation import lie
from mb_estimation.cramer_rao import CramerRao
from mb_estimation.estimation import EstimationResult
from mb_estimation.estimation.agreement import Agreement, agreements, ratio_agreements
from mb_estimation.estimation.identifiability import (
    AT_LOWER_BOUND,
    AT_UPPER_BOUND,
    Identifiability,
    identifiability,
)
from mb_estimation.estimation.input_delay import InputDelay, apparent_input_delay
from mb_estimation.estimation.solver import excited_by_data
from mb_estimation.fitting import Fit, Keep, LevelFit, SimulationFit
from mb_estimation.rigs import built_system, parameter_arrays
from mb_estimation.setup import Setup, delayed_input
from mb_estimation.signals import GridData
from mb_estimation.validation import OpenLoopCheck, PredictionCheck

#: The least angle noise [rad] a validation is scored against: below it a run is as close as
#: the simulator that scores it (the rigid validation step's own error over 8 s of the 0.92 m
#: release is 9e-6 rad RMS), so noise-free data do not turn round-off into findings.
NOISE_FLOOR_RAD = 1e-5
#: A prediction error above this many times the fit's angle noise says the model does not
#: follow the data over the horizon (the rigid limit against §4.7's damped hinges: 7×; the
#: simulation refinement on the same data: 1.5–2×).
PREDICTION_NOISE_RATIO = 5.0
#: The rigid model follows recordings its simulation-error fit misses by at most this many
#: times the joint fit's angle noise (RMS; on the independent rigid reference: 1.0×).
FOLLOWS_NOISE_RATIO = 1.5


def fit_noise_rad(grids: Sequence[GridData], result: EstimationResult) -> np.ndarray:
    """Per recording and joint, the RMS of the measured minus the estimated angles [rad].

    Over the observed samples; shape ``[recordings, joints]``.
    """
    rows = []
    for grid, states in zip(grids, result.recordings, strict=True):
        observed = np.asarray(grid.observed) > 0
        rows.append(np.sqrt(np.mean((states.joint_angles[observed]
                                     - grid.measured_angles[observed]) ** 2, axis=0)))
    return np.array(rows)


@dataclass(frozen=True)
class PredictionMismatch:
    """How far a fit's prediction misses its own noise.

    ``ratio``: the prediction error at the longest lead over the fit's angle noise, for the
    worst joint of the worst recording (``name``).
    """

    ratio: float
    name: str
    horizon_s: float
    noise_rad: tuple[float, ...]  # per joint: RMS of measured minus estimated angles [rad]

    def __str__(self) -> str:
        return (f"the rigid-hinge fit, run {self.horizon_s:.3g} s ahead, misses the angles of "
                f"{self.name} by {self.ratio:.0f}× the fit's noise "
                f"({', '.join(f'{v:.2g}' for v in self.noise_rad)} rad)")


def prediction_mismatch(noise_rad: np.ndarray, checks: Sequence[PredictionCheck]
                        ) -> PredictionMismatch | None:
    """The worst prediction error over the fit's noise (None without a prediction).

    ``noise_rad [recordings, joints]``: the fit's :func:`fit_noise_rad`, per joint taken at
    least :data:`NOISE_FLOOR_RAD`; the prediction error is the RMS at the longest lead of
    ``checks``. Above :data:`PREDICTION_NOISE_RATIO` the model does not follow the data over
    the horizon.
    """
    worst = None
    for noise, check in zip(noise_rad, checks, strict=True):
        if not check.starts:
            continue
        ratio = float(np.max(np.asarray(check.rms[-1]) / np.maximum(noise, NOISE_FLOOR_RAD)))
        if worst is None or ratio > worst.ratio:
            worst = PredictionMismatch(ratio, check.name, float(check.horizons_s[-1]),
                                       tuple(float(v) for v in noise))
    return worst


def predicts_within_the_noise(mismatch: PredictionMismatch | None) -> bool:
    """Whether a :func:`prediction_mismatch` is at most :data:`PREDICTION_NOISE_RATIO`."""
    return mismatch is None or mismatch.ratio <= PREDICTION_NOISE_RATIO


@dataclass(frozen=True)
class StageFollowing:
    """How closely the simulation-error stage's simulations follow the recordings.

    ``rms_rad``: their angle error over the scored samples (RMS) [rad], each simulated from its
    fitted start over ``segment_s`` [s]; ``ratio``: that over the joint fit's angle noise (RMS
    over recordings and joints, at least :data:`NOISE_FLOOR_RAD`).
    """

    rms_rad: float
    ratio: float
    segment_s: float

    @property
    def follows(self) -> bool:
        return self.ratio <= FOLLOWS_NOISE_RATIO


def stage_following(noise_rad: np.ndarray, simulation: SimulationFit,
                    grids: Sequence[GridData]) -> StageFollowing:
    """The simulation-error stage's :class:`StageFollowing`, against the joint fit's noise.

    ``noise_rad [recordings, joints]``: the joint fit's :func:`fit_noise_rad`, over the joints
    the ``grids`` do not hold still (a held joint has no noise: both fits hold it at its median,
    and the stage's RMS is over the other joints' samples).
    """
    observed = np.array([np.asarray(grid.locked_mask) == 0 for grid in grids])
    noise = float(np.sqrt(np.mean(np.square(np.asarray(noise_rad)[observed]))))
    rms = float(np.sqrt(simulation.refit.cost))
    return StageFollowing(rms, rms / max(noise, NOISE_FLOOR_RAD),
                          float(simulation.refit.segment_s))


@dataclass(frozen=True)
class StepDependence:
    """How far one free parameter moved between the last two joint levels.

    ``change`` is finest minus the level before, in the parameter's tangent space (a rotation
    vector [rad] for a quaternion); ``settled`` is True when every component moved by at most
    the finest level's standard deviation (a larger move means the value still depends on the
    step: a shadow of the method rather than of the rig), None for a value at a bound (not an
    estimate the step could move).
    """

    name: str
    coarse: np.ndarray
    fine: np.ndarray
    change: np.ndarray
    std: np.ndarray
    settled: bool | None


def step_dependence(levels: Sequence[LevelFit], at_bound: Sequence[str] = ()
                    ) -> tuple[StepDependence, ...]:
    """Per free parameter, its change over the last two of ``levels`` (none with fewer).

    ``at_bound``: the parameters whose value ended at a bound (``settled`` None).
    """
    if len(levels) < 2:
        return ()
    coarse, fine = levels[-2].result, levels[-1].result
    rows = []
    for name in fine.free:
        before, after = np.asarray(coarse.parameters[name]), np.asarray(fine.parameters[name])
        if before.size == 4:  # a unit quaternion: the rotation from one to the other
            change = lie.quat_boxminus(after, before)
        else:
            change = np.atleast_1d(after - before)
        std = np.atleast_1d(np.asarray(fine.std[name], dtype=float))
        settled = None if name in at_bound else bool(np.all(np.abs(change) <= std))
        rows.append(StepDependence(name, before, after, change, std, settled))
    return tuple(rows)


def input_delay(setup: Setup, result: EstimationResult) -> InputDelay | None:
    """The input's apparent delay beyond ``recording.input_delay_s``, over all recordings.

    Measured on the fit's states through the rigid model
    (:func:`~mb_estimation.estimation.input_delay.apparent_input_delay`); the recordings'
    delays are averaged by their information. None for a rig without input or an input that
    never changes. A recording that holds a joint still is left out (the torque that holds it
    is in that joint's momentum balance).
    """
    if not setup.config.rig_spec.inputs:
        return None
    system = built_system(setup.rig, parameter_arrays(result.parameters))
    found = []
    for recording, grid, states in zip(setup.recordings, setup.grids, result.recordings,
                                       strict=True):
        if any(grid.locked):
            continue
        recording = delayed_input(setup.config, recording)
        delay = apparent_input_delay(system, states.time_s, states.joint_angles, states.joint_rates,
                                     recording.input_time_s, recording.inputs)
        if delay is not None and np.isfinite(delay.std_s) and delay.std_s > 0:
            found.append(delay)
    if not found:
        return None
    weights = np.array([1.0 / d.std_s**2 for d in found])
    mean = float(np.sum(weights * [d.delay_s for d in found]) / np.sum(weights))
    return InputDelay(mean, float(1.0 / np.sqrt(np.sum(weights))),
                      at_edge=any(d.at_edge for d in found))


def rest_inertia_offsets(setup: Setup, result: EstimationResult) -> dict[str, float]:
    """Per free parameter that adds to the rig's rest inertia, the rest of it [kg m²].

    The inertia the first joint turns with at rest (``Rig.rest_inertia``: J_shaft + J_Azz +
    m_A l1² + m_B lA² + J_Bxx for the Furuta rig); what the arm's motion sees of J_Azz.
    """
    rest_inertia = setup.rig.rest_inertia
    values = result.parameters
    total = rest_inertia(values)
    offsets = {}
    for name in result.free:
        if np.size(values[name]) == 1:
            added = rest_inertia({**values, name: np.asarray(values[name]) + 1.0}) - total
            if abs(added - 1.0) < 1e-9:
                offsets[name] = total - float(np.asarray(values[name]))
    return offsets


def identifiability_of(setup: Setup, result: EstimationResult,
                       bound: CramerRao | None = None) -> Identifiability:
    """What the data determine of the free parameters in ``result`` (within the setup's box).

    With the Cramér–Rao ``bound`` where there is one; an inertia that adds to the rig's rest
    inertia (J_Azz, J_shaft; J_P) is read in that sum (:func:`rest_inertia_offsets`).
    """
    free = tuple(result.free)
    return identifiability(free, result.parameters, result.std, result.covariance,
                           {name: setup.lower[name] for name in free},
                           {name: setup.upper[name] for name in free},
                           None if bound is None else (bound.names, bound.covariance,
                                                       bound.information),
                           rest_inertia_offsets(setup, result))


@dataclass(frozen=True)
class Kept:
    """Which fit is the calibration's, the checks the choice computed, and why (``note``)."""

    result: EstimationResult
    refit_kept: bool
    predictions: tuple[PredictionCheck, ...] | None = None
    following: StageFollowing | None = None
    note: str | None = None


def _with_the_time_of(joint: EstimationResult, refined: EstimationResult) -> EstimationResult:
    """The joint fit ``joint`` with the times of the whole fit (the refit's included)."""
    return dataclasses.replace(joint, compile_time_s=refined.compile_time_s,
                               solve_time_s=refined.solve_time_s)


def kept_fit(setup: Setup, fit: Fit, noise_rad: np.ndarray | None = None) -> Kept:
    """The fit the calibration keeps, by its simulation stage's :class:`Keep` rule.

    ``noise_rad``: the joint fit's :func:`fit_noise_rad` (computed here when not given), the
    simulation-error fit's too: it keeps the joint fit's states.

    ``always``: the simulation-error fit. ``if_it_follows``: it, where its simulations follow
    the recordings (within :data:`FOLLOWS_NOISE_RATIO` times the joint fit's noise), else only
    where it predicts 0.5 s ahead from the joint fit's states no worse than the joint fit:
    where the rigid model does not follow the rig, the joint fit's force noise is what keeps it
    robust (the predictions alone cannot decide: on a fast, chaotic motion both miss by many
    times the noise from the joint fit's states alone). ``if_it_predicts_better``: it, where the
    joint fit mispredicts (above :data:`PREDICTION_NOISE_RATIO`) and it predicts better.
    """
    joint, simulation, grids = fit.joint, fit.simulation, setup.grids
    if simulation is None:
        return Kept(joint, False, note=fit.note)
    refined = simulation.result
    noise = fit_noise_rad(grids, joint) if noise_rad is None else noise_rad

    def predicted(result):
        return setup.model.predictions(result.parameters, grids, result.recordings)

    keep = simulation.stage.keep
    if keep is Keep.ALWAYS:
        return Kept(refined, True, following=stage_following(noise, simulation, grids))
    if keep is Keep.IF_IT_FOLLOWS:
        following = stage_following(noise, simulation, grids)
        if following.follows:
            return Kept(refined, True, following=following)
        before_checks = predicted(joint)
        before = prediction_mismatch(noise, before_checks)
        after_checks = predicted(refined)
        after = prediction_mismatch(noise, after_checks)
        if before is None or after is None or after.ratio <= before.ratio:
            return Kept(refined, True, after_checks, following)
        return Kept(_with_the_time_of(joint, refined), False, before_checks, note=(
            f"the simulation-error fit through the rigid model misses the angles by "
            f"{following.rms_rad:.2g} rad RMS ({following.ratio:.1f}× the joint fit's noise) "
            f"and predicts them worse ({after.ratio:.1f}× the noise at {after.horizon_s:.3g} s, "
            f"against {before.ratio:.1f}× for the joint fit), so the joint fit is kept"))
    before_checks = predicted(joint)
    mismatch = prediction_mismatch(noise, before_checks)
    if predicts_within_the_noise(mismatch):
        return Kept(_with_the_time_of(joint, refined), False, before_checks)
    after_checks = predicted(refined)
    after = prediction_mismatch(noise, after_checks)
    if after is not None and after.ratio < mismatch.ratio:
        return Kept(refined, True, after_checks, stage_following(noise, simulation, grids), (
            f"{mismatch}: refitted through the config's simulator "
            f"(method.simulation_refinement: auto), which misses by {after.ratio:.1f}×"))
    shown = "no prediction" if after is None else f"{after.ratio:.1f}×"
    return Kept(_with_the_time_of(joint, refined), False, before_checks, note=(
        f"{mismatch}; refitting through the config's simulator predicted no better ({shown}), "
        "so the rigid-hinge fit is kept: look for what neither model has (friction, the input "
        "model) — or a motion too sensitive to predict that far"))


@dataclass(frozen=True)
class Assessment:
    """Every check of a calibration's kept fit, each computed once.

    ``result``: the kept fit (:func:`kept_fit`); ``refit_kept``: whether it is the
    simulation-error fit; ``note``: why a stage was left out or a fit not kept (else None);
    ``predictions``, ``replays``: per recording, through the model the hinges declare;
    ``noise_rad [recordings, joints]``: the fit's angle noise; ``mismatch``: the worst
    prediction against it; ``following``: how closely the kept simulation-error stage's own
    simulations follow the recordings (None without one kept); ``step_dependence``: each
    value's change over the last two joint levels (none when the simulation-error fit is kept:
    its values do not come from the step); ``bound``: the Cramér–Rao bound (rigid hinges;
    None where a recording's motion amplifies its start more than a calibration follows in
    one piece, :attr:`~mb_estimation.cramer_rao.CramerRao.followed`);
    ``identified``: what the data determine; ``delay``: the input's apparent delay;
    ``model_error_correlation_s``: where the kept fit's model does not follow the data (its
    simulations, or the joint fit's predictions, miss by more than the noise allows), the
    result's std include the model's error (:func:`with_model_error`), and this is how long
    its residuals stayed correlated [s]; None where the std are the model-is-right ones;
    ``agreement``: per parameter two recordings or more determine, how their own fits agree
    (where they do not, the result's std of it is scaled by their spread:
    :func:`with_disagreement`), then per combination the pooled fit determines
    (:func:`ratios_agreement`); ``joint``: the joint fit the kept simulation-error fit started
    from (None where the joint fit is kept), to tell what the refit moved.
    """

    result: EstimationResult
    refit_kept: bool
    predictions: tuple[PredictionCheck, ...]
    replays: tuple[OpenLoopCheck, ...]
    noise_rad: np.ndarray
    mismatch: PredictionMismatch | None
    identified: Identifiability
    following: StageFollowing | None = None
    step_dependence: tuple[StepDependence, ...] = ()
    bound: CramerRao | None = None
    delay: InputDelay | None = None
    note: str | None = None
    model_error_correlation_s: float | None = None
    agreement: tuple[Agreement, ...] = ()
    joint: EstimationResult | None = None


def with_model_error(result: EstimationResult) -> EstimationResult:
    """``result`` with the std and covariance that include its model's error.

    Those of ``result.correlated`` (the residuals' correlation in time), each std at least the
    model-is-right one (a model's error adds to what the noise leaves open: a sandwich below
    it is its own sampling error; the covariance is scaled with it, its correlations kept).
    """
    correlated, std = result.correlated, {}
    factor = np.ones(len(correlated.covariance))
    for name in result.free:
        plain = np.atleast_1d(np.asarray(result.std[name], dtype=float))
        own = np.atleast_1d(np.asarray(correlated.std[name], dtype=float))
        std[name] = np.maximum(plain, own)
        finite = np.isfinite(std[name]) & (own > 0)
        factor[result.tangent_rows[name][finite]] = std[name][finite] / own[finite]
    widened = _with_std(result, std, correlated.covariance * np.outer(factor, factor))
    return dataclasses.replace(widened, std_include_model_error=True)


def _with_std(result: EstimationResult, std: dict, covariance: np.ndarray) -> EstimationResult:
    """``result`` with other std and covariance, and what the data determine by them."""
    excited = {name: excited_by_data("quaternion" if np.size(result.parameters[name]) == 4
                                     else "scalar", std[name], result.parameters[name])
               for name in result.free}
    return dataclasses.replace(result, std=std, covariance=covariance, excited=excited)


def held_joints_parameters(setup: Setup) -> list[frozenset[str]]:
    """Per recording, the parameters of the joints it holds still (the rig's ``joint`` of each).

    Its own fit says nothing of those: the held joint's residuals carry the holding hand's
    torque, down-weighted, and the joint's few milliradians within the noise.
    """
    spec = setup.config.rig_spec
    return [frozenset(parameter.name for parameter in spec.parameters
                      for joint, held in zip(spec.joints, grid.locked, strict=False)
                      if held and parameter.joint == joint) for grid in setup.grids]


def recordings_agreement(setup: Setup, result: EstimationResult, correlated: bool
                         ) -> tuple[Agreement, ...]:
    """Per scalar free parameter that two recordings or more determine, their agreement.

    Each recording's own fit one step from the pooled values
    (:func:`~mb_estimation.estimation.agreement.agreements`), none for the parameters of a
    joint it holds still (:func:`held_joints_parameters`) nor one outside the parameter's
    bounds; ``correlated``: with the std that
    include the model's error, as the result's.
    """
    if len(result.shares) < 2:
        return ()
    values, rows = _scalar_values(result)
    bounds = {name: (float(np.ravel(setup.lower[name])[0]), float(np.ravel(setup.upper[name])[0]))
              for name in values}
    return agreements(values, rows, [recording.name for recording in result.recordings],
                      result.shares, correlated, held_joints_parameters(setup), bounds)


def _scalar_values(result: EstimationResult, offsets: Mapping[str, float] | None = None
                   ) -> tuple[dict[str, float], dict[str, int]]:
    """The scalar free parameters' values (plus ``offsets``) and their covariance rows."""
    rows = result.tangent_rows
    values = {name: float(np.ravel(result.parameters[name])[0]) + (offsets or {}).get(name, 0.0)
              for name in result.free if len(rows[name]) == 1}
    return values, {name: int(rows[name][0]) for name in values}


def ratios_agreement(setup: Setup, result: EstimationResult, identified: Identifiability,
                     correlated: bool) -> tuple[Agreement, ...]:
    """Per combination the pooled fit determines (``identified``), the recordings' agreement.

    E.g. ``b1/K`` and the arm's whole inertia over K where each step determines those but not
    K itself (:func:`~mb_estimation.estimation.agreement.ratio_agreements`).
    """
    if len(result.shares) < 2 or not identified.determined_ratios:
        return ()
    values, rows = _scalar_values(result, rest_inertia_offsets(setup, result))
    return ratio_agreements(
        [(ratio.expression, ratio.numerator, ratio.denominator, ratio.power)
         for ratio in identified.determined_ratios],
        values, rows, [recording.name for recording in result.recordings], result.shares,
        correlated, held_joints_parameters(setup))


def with_disagreement(result: EstimationResult, agreement: Sequence[Agreement]
                      ) -> EstimationResult:
    """``result`` with the std of each parameter the recordings disagree on scaled up.

    By its :attr:`~mb_estimation.estimation.agreement.Agreement.scale` (the spread between
    the recordings' own fits); its rows and columns of the covariance with it.
    """
    scales = {row.name: row.scale for row in agreement if not row.agree}
    if not scales:
        return result
    factor = np.ones(len(result.covariance))
    rows = result.tangent_rows
    for name, scale in scales.items():
        factor[rows[name]] = scale
    return _with_std(result, {name: np.asarray(result.std[name]) * scales.get(name, 1.0)
                              for name in result.free},
                     result.covariance * np.outer(factor, factor))


def assess(setup: Setup, fit: Fit) -> Assessment:
    """The :class:`Assessment` of ``fit`` (module docstring)."""
    grids, model = setup.grids, setup.model
    noise = fit_noise_rad(grids, fit.joint)  # the kept fit's too: the joint fit's states
    kept = kept_fit(setup, fit, noise)
    result, predictions = kept.result, kept.predictions
    if predictions is None:
        predictions = model.predictions(result.parameters, grids, result.recordings)
    mismatch = prediction_mismatch(noise, predictions)
    # Where the model does not follow the data, its error is in the residuals: the std say so.
    follows = (kept.following.follows if kept.refit_kept else
               predicts_within_the_noise(mismatch))
    model_error_s = None
    if not follows and result.correlated is not None:
        result, model_error_s = with_model_error(result), result.correlated.correlation_s
    agreement = recordings_agreement(setup, result, model_error_s is not None)
    result = with_disagreement(result, agreement)
    bound = model.cramer_rao(result.parameters, result.free, grids, result.recordings, noise)
    if bound is not None and not bound.followed:
        bound = None  # the whole motion's bound: no calibration reaches it, nor says what is open
    identified = identifiability_of(setup, result, bound)
    agreement += ratios_agreement(setup, result, identified, model_error_s is not None)
    return Assessment(
        result=result, refit_kept=kept.refit_kept, predictions=predictions,
        replays=model.replays(result.parameters, grids, result.recordings, free=result.free),
        noise_rad=noise,
        mismatch=mismatch, identified=identified,
        model_error_correlation_s=model_error_s, agreement=agreement,
        following=kept.following if kept.refit_kept else None,
        step_dependence=() if kept.refit_kept else step_dependence(
            fit.levels, identified.with_status(AT_LOWER_BOUND, AT_UPPER_BOUND)),
        bound=bound, delay=input_delay(setup, result), note=kept.note,
        joint=fit.joint if kept.refit_kept else None)
