"""The simulation refinement: multiple shooting through the config's own simulator.

Data from the package's SPOOK simulator with compliant, damped hinges (the model the refinement
fits), so the truth is what it must find: from a start 30 % off, within its reported standard
deviations, and the path's output records the extra level.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mb_estimation.assess import assess
from mb_estimation.calibration import Calibration
from mb_estimation.config import apply_overrides, load_config
from mb_estimation.estimation.levenberg_marquardt import (
    INITIAL_DAMPING,
    MAX_DAMPING,
    Termination,
    solve,
)
from mb_estimation.estimation.result import FitStatus
from mb_estimation.estimation.shooting import (
    _Shooting,
    amplification,
    segments_of,
)
from mb_estimation.estimation.shooting_normal import NormalEquations, step_bias_of
from mb_estimation.fitting import fit
from mb_estimation.results import parameters_document
from mb_estimation.setup import rig_of, set_up
from mb_estimation.signals import Recording, prepare_recording
from mb_estimation.simulation import simulate_recording
from mb_estimation.verdict import verdict


def _linear_problem(seed=3, segments=3, samples=20, states=4, values=2):
    """A linear residual ``r0 + A_s x_s + B_s v`` over segments with shared values."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(segments, samples, states)),
            rng.normal(size=(segments, samples, values)),
            rng.normal(size=(segments, samples)))


def test_the_step_bias_is_the_fit_minus_its_extrapolation_to_step_zero():
    """Richardson extrapolation recovers the bias a simulator's step gives the values.

    A linear simulator whose output errs by ``e h²``: fitted at h, the values carry the bias
    ``-(JᵀJ)⁻¹Jᵀe h²``; its residuals at h and h/2 give that bias back.
    """
    jac_state, jac_values, measured = _linear_problem()
    error = np.random.default_rng(7).normal(size=measured.shape)  # e h² at the fit's step h
    stacked = _stacked(jac_state, jac_values)

    def fitted(simulator_error):  # the least-squares fit of sim(x) = J x + error to measured
        return np.linalg.lstsq(stacked, (measured - simulator_error).reshape(-1), rcond=None)[0]

    point, truth = fitted(error), fitted(np.zeros_like(error))
    starts, values = point[:12].reshape(3, 4), point[12:]

    def residual(simulator_error):
        return (np.einsum("sri,si->sr", jac_state, starts) + jac_values @ values
                + simulator_error - measured)

    normal = NormalEquations.of(jac_state, jac_values)
    bias = step_bias_of(normal, residual(error), residual(error / 4.0), starts, values,
                        np.ones(2), np.full(2, -np.inf), np.full(2, np.inf), ("a", "b"))
    np.testing.assert_allclose([bias["a"], bias["b"]], values - truth[12:], atol=1e-12)
    assert np.max(np.abs(values - truth[12:])) > 1e-3  # a bias there is to find


def test_the_bounded_step_is_the_box_qp_optimum():
    """A value whose unbounded step leaves the box stops at the bound.

    The step is then the exact minimiser of the linear model with that value held there.
    """
    jac_state, jac_values, residual = _linear_problem()
    starts, values, scale = np.zeros((3, 4)), np.zeros(2), np.array([2.0, 0.5])
    normal = NormalEquations.of(jac_state, jac_values * scale)
    (_, free_values), _, _ = normal.step(0.0, residual, starts, values, scale,
                                         np.full(2, -np.inf), np.full(2, np.inf))
    lower, upper = np.full(2, -np.inf), np.full(2, np.inf)
    crossing = int(np.argmax(np.abs(free_values)))
    bound = 0.5 * free_values[crossing]  # halfway: the unbounded step crosses it
    (lower if bound < 0 else upper)[crossing] = bound
    (new_starts, new_values), _, _ = normal.step(0.0, residual, starts, values, scale, lower,
                                                 upper)
    assert new_values[crossing] == pytest.approx(bound)
    # the least-squares optimum with that value held at the bound
    stacked, target = _stacked(jac_state, jac_values), -residual.reshape(-1)
    kept = [i for i in range(14) if i != 12 + crossing]
    solution = np.linalg.lstsq(stacked[:, kept], target - stacked[:, 12 + crossing] * bound,
                               rcond=None)[0]
    np.testing.assert_allclose(np.concatenate([new_starts.reshape(-1), new_values])[kept],
                               solution, atol=1e-10)


def _stacked(jac_state, jac_values):
    segments, samples, states = jac_state.shape
    stacked = np.zeros((segments * samples, segments * states + jac_values.shape[-1]))
    for segment in range(segments):
        rows = slice(samples * segment, samples * segment + samples)
        stacked[rows, states * segment:states * segment + states] = jac_state[segment]
        stacked[rows, segments * states:] = jac_values[segment]
    return stacked


def test_a_shooting_fit_without_descent_reports_no_progress():
    """The shooting fit runs on the package's one loop, and says when it cannot descend.

    A problem whose every trial costs more than its start (a model the Jacobian does not
    describe) stops with no progress, not converged.
    """
    jac_state, jac_values, residual = _linear_problem()
    scale = np.ones(2)
    box = np.full(2, -np.inf), np.full(2, np.inf)
    problem = _Shooting(lambda starts, values: (residual, jac_state, jac_values),
                        lambda starts, values: 2.0 * residual, scale, *box,
                        Termination(60, cost_tolerance=1e-6), statistics=True)
    start = problem.state_at(np.zeros((3, 4)), np.zeros(2),
                             (residual, jac_state, jac_values), INITIAL_DAMPING, 0,
                             float("nan"), 1)
    state, status = solve(problem, start)
    assert status == FitStatus.NO_PROGRESS and not status.converged
    assert state.iteration == 0 and state.damping >= MAX_DAMPING
    # the same problem whose model holds converges by its cost
    linear = _Shooting(lambda starts, values: (residual, jac_state, jac_values),
                       lambda starts, values: _model_residual(jac_state, jac_values, residual,
                                                              starts, values),
                       scale, *box, Termination(60, cost_tolerance=1e-6), statistics=True)
    state, status = solve(linear, dataclasses.replace(start))
    assert status == FitStatus.COST and status.converged and state.iteration >= 1


def _model_residual(jac_state, jac_values, residual, starts, values):
    return (residual + np.einsum("sri,si->sr", jac_state, starts)
            + np.einsum("sri,i->sr", jac_values, values))


def test_segment_eliminated_step_is_the_least_squares_step_and_predicts_its_cost():
    # A linear residual r(x, v) = r0 + A_s x_s + B_s v over 3 segments (4 states each) and 2
    # shared values: the undamped step reaches the least-squares solution of the whole stacked
    # system, and the cost it predicts is the cost there.
    jac_state, jac_values, residual = _linear_problem()
    starts, values, scale = np.zeros((3, 4)), np.zeros(2), np.array([2.0, 0.5])
    normal = NormalEquations.of(jac_state, jac_values * scale)
    (new_starts, new_values), _, predicted = normal.step(
        0.0, residual, starts, values, scale, np.full(2, -np.inf), np.full(2, np.inf))
    stacked = _stacked(jac_state, jac_values)
    solution = np.linalg.lstsq(stacked, -residual.reshape(-1), rcond=None)[0]
    np.testing.assert_allclose(new_starts.reshape(-1), solution[:12], atol=1e-10)
    np.testing.assert_allclose(new_values, solution[12:], atol=1e-10)
    actual = residual.reshape(-1) + stacked @ np.concatenate([new_starts.reshape(-1),
                                                              new_values])
    assert predicted == pytest.approx(float(actual @ actual), rel=1e-10)
    # damped: a shorter step that still descends, and the values' information matrix is the
    # Schur complement of the states
    (_, damped_values), _, damped_cost = normal.step(
        1.0, residual, starts, values, scale, np.full(2, -np.inf), np.full(2, np.inf))
    assert np.linalg.norm(damped_values) < np.linalg.norm(new_values)
    assert predicted < damped_cost < float(np.sum(residual ** 2))
    covariance = np.linalg.inv(stacked.T @ stacked)[12:, 12:]
    np.testing.assert_allclose(np.linalg.inv(normal.parameter_information),
                               covariance / np.outer(scale, scale), rtol=1e-9)


def test_amplification_grows_linearly_when_neutral_and_exponentially_when_unstable():
    """∂θ(t)/∂(θ0, θ̇0) of a free rotation [[1, t]] against an inverted pendulum's e^(λt)."""
    time_s = np.arange(0.0, 2.0001, 0.01)
    weights = (time_s >= 0.06).astype(float)  # the lead is not scored

    def segment(blocks):  # [samples, 1 joint, 2] -> [1 segment, samples, 2]
        return (blocks * weights[:, None, None]).reshape(1, -1, 2)

    neutral = segment(np.stack([np.ones_like(time_s), time_s], axis=1)[:, None, :])
    assert amplification(neutral, 1) == pytest.approx(np.hypot(1, 2) / np.hypot(1, 0.06))
    rate = 4.0  # 1/s, about an upright 0.6 m pendulum
    unstable = segment(np.stack([np.cosh(rate * time_s), np.sinh(rate * time_s) / rate],
                                axis=1)[:, None, :])
    assert amplification(unstable, 1) > 1e3 > 20 * amplification(neutral, 1)


def test_segments_skip_the_lead_and_cover_the_recording():
    time_s = np.arange(0, 2.001, 0.01)
    recording = Recording("r", time_s, np.zeros((time_s.size, 2)), time_s,
                          np.zeros((time_s.size, 1)))
    grid = prepare_recording(recording, 0.01, 10.0)
    assert segments_of([grid], 0.5, 0.1).begin.tolist() == [0, 50, 100]  # a fit that leads on
    segments = segments_of([grid], 0.5, 0.1, remainder=True)
    # 3 × (0.1 s lead + 0.5 s) fit in 2 s; the 0.4 s left are a fourth, shorter segment
    assert segments.begin.tolist() == [0, 50, 100, 150]
    assert segments.measured.shape == (4, 61, 2) and segments.inputs.shape == (4, 60, 1)
    assert np.all(segments.weights[:, :10] == 0) and np.all(segments.weights[:3, 10:] == 1)
    assert np.all(segments.weights[3, 10:51] == 1) and np.all(segments.weights[3, 51:] == 0)
    assert np.all(segments.inputs[3, 50:] == 0)  # past the recording's end
    # a remainder under a quarter of a segment is left out
    assert segments_of([grid], 0.6, 0.1, remainder=True).begin.tolist() == [0, 60, 120]
    with pytest.raises(ValueError, match="shorter than one shooting segment"):
        segments_of([grid], 5.0, 0.1)


def test_simulation_refinement_recovers_the_simulators_parameters():
    """2 s multisine of compliant, damped hinges (ε = 1e-6, τ = 0.02 s), 1 kHz, noise 1e-3 rad.

    The rigid-limit fit cannot follow such hinges exactly; the refinement through the same
    simulator lands on its parameters within 3 reported standard deviations (and 2 %).
    """
    truth = apply_overrides(load_config("furuta_synthetic"), set_values={"l2": 0.092})
    truth = dataclasses.replace(truth, simulation=dataclasses.replace(truth.simulation,
                                                                      dt=1e-3))
    run = simulate_recording(rig_of(truth), truth.parameters, "multisine", duration_s=2.0,
                             dt=1e-3, rate_hz=1000.0, noise_rad=1e-3, seed=3)
    recording = Recording("multisine", run.time_s, run.measured_angles, run.time_s, run.inputs)
    config = apply_overrides(truth, free=["J_Azz", "J_Byy"],
                             set_values={"J_Azz": 0.0039, "J_Byy": 0.0052},
                             simulation_refinement=True)
    config = dataclasses.replace(config, advanced=dataclasses.replace(
        config.advanced, simulation_segment_s=0.5))
    setup = set_up(config, [recording])
    fitted = fit(setup)
    assessment = assess(setup, fitted)
    calibration = Calibration(setup, fitted, assessment, verdict(setup, assessment))
    result = calibration.result
    assert [str(stage.kind) for stage in calibration.stages] == ["joint", "joint", "simulation"]
    final = fitted.simulation.refit
    assert final.step_s == 1e-3 and final.status == "cost" and assessment.refit_kept
    for name in ("J_Azz", "J_Byy"):
        value, target = float(result.parameters[name]), float(truth.parameters[name])
        std = float(result.std[name][0])
        assert value == float(final.values[name])
        assert abs(value - target) <= 3 * std and abs(value / target - 1) < 0.02, (
            name, value, target, std)
    document = parameters_document(calibration)
    assert document["refinement"]["formulation"] == ["joint", "joint", "simulation"]
    # 0.5 s segments, then 1 s (2 s and its lead do not fit into the 2 s recording)
    assert document["refinement"]["shooting_segments_tried_s"] == [0.5, 1.0]
    assert document["refinement"]["shooting_segment_s"] == final.segment_s in (0.5, 1.0)
    assert document["parameters"]["J_Azz"]["value"] == float(result.parameters["J_Azz"])




def _reference_multisine():
    """§4.7's rig on rigid hinges and 3 s of the independent rigid reference's multisine.

    ``(config, run, recording)``: the reference's run (RK4 at 1e-4 s, 1 kHz) and the recording
    of its angles with 1e-3 rad of noise (seed 5).
    """
    from reference_furuta import simulate_reference

    from mb_estimation.scenarios import multisine_torque

    config = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    values = {name: (list(v) if name == "tilt" else float(v))
              for name, v in config.parameters.items()}
    time_s = np.arange(3001) / 1000.0
    voltage = np.asarray(multisine_torque(time_s)) / values["K"]
    run = simulate_reference(values, (0.0, 0.0), (0.0, 0.0), time_s, voltage=(time_s, voltage),
                             method="rk4", step=1e-4)
    angles = run["theta"] + 1e-3 * np.random.default_rng(5).standard_normal(run["theta"].shape)
    return config, run, Recording("multisine", time_s, angles, time_s, voltage[:, None])


def test_a_rigid_rig_refined_by_simulation_error_reaches_the_cramer_rao_bound():
    """Rigid hinges declared, no method setting: the default path ends in the rigid model's.

    A simulation-error fit of the rigid model ends the default path on rigid hinges.

    3 s of the independent rigid reference's multisine (1 kHz, noise 1e-3 rad): the joint fit's
    std are several times the Cramér–Rao bound, the refit's (the recording in one segment) at
    it, within 10 %, and its values within 3 of its std of the truth. A refit that predicts the
    recording worse than the joint fit, its simulations far from the data (here: its J_Byy
    doubled, its cost 100-fold), is not kept, and the note says why.
    """
    from mb_estimation.assess import fit_noise_rad, kept_fit

    truth, _, recording = _reference_multisine()
    free = ["J_Azz", "J_Byy", "b1", "b2"]
    start = {"J_Azz": 0.0035, "J_Byy": 0.0045, "b1": 1.2e-3, "b2": 1.2e-4}
    joint = fit(set_up(apply_overrides(truth, free=free, set_values=start,
                                       simulation_refinement="off"), [recording])).joint
    config = apply_overrides(truth, free=free, set_values=start)
    assert config.method.simulation_refinement == "on"
    setup = set_up(config, [recording])
    fitted = fit(setup)
    kept = kept_fit(setup, fitted)
    result, grids = kept.result, setup.grids
    assert kept.refit_kept and kept.note is None and kept.following.follows
    assert fitted.simulation.refit.segment_s == 3.0  # the recording in one piece
    bound = setup.model.cramer_rao(result.parameters, result.free, grids, result.recordings,
                                   fit_noise_rad(grids, result))
    for name in ("J_Azz", "J_Byy", "b1"):
        value, target = float(result.parameters[name]), float(truth.parameters[name])
        std = float(result.std[name][0])
        assert abs(value - target) <= 3 * std, (name, value, target, std)
        assert std <= 1.1 * bound.std[name], (name, std, bound.std[name])
    assert float(joint.std["J_Azz"][0]) > 3 * bound.std["J_Azz"]

    # a stage whose simulations miss by 10× the noise, and predict worse: not kept
    simulation = fitted.simulation
    worse = dataclasses.replace(fitted, simulation=dataclasses.replace(
        simulation, refit=dataclasses.replace(simulation.refit, cost=100 * simulation.refit.cost),
        result=dataclasses.replace(simulation.result, parameters={
            **simulation.result.parameters,
            "J_Byy": 2.0 * np.asarray(simulation.result.parameters["J_Byy"])})))
    kept = kept_fit(setup, worse)
    assert not kept.refit_kept and kept.result.parameters is fitted.joint.parameters
    assert "predicts them worse" in kept.note


def test_a_refit_at_half_the_step_starts_from_the_coarser_steps_jacobians():
    """The kept fit refined to half its step starts from the coarser step's linearisation.

    3 s of the independent rigid reference's multisine on an 8 ms grid in one segment, fitted
    at 8 ms (its step's bias moves a value by more than half its std); refitted at 4 ms from
    there, once linearised afresh and once from the 8 ms Jacobians with the 4 ms residuals (one
    chord step, then a linearisation at 4 ms): both within a tenth of a std of the 4 ms
    optimum (converged tightly), the std equal, the warm start with a linearisation fewer.
    """
    from mb_estimation.estimation.shooting import ShootingSettings, _shoot

    config, run, recording = _reference_multisine()
    grid = prepare_recording(recording, 8e-3, 50.0)
    names = ("J_Azz", "J_Byy", "b1", "b2")
    start = {**config.parameters, "J_Azz": 0.0031, "J_Byy": 0.0041, "b1": 1.02e-3}
    lower, upper = dict.fromkeys(names, 0.0), dict.fromkeys(names, 1.0)
    settings = ShootingSettings(segment_s=2.9, rigid=True, max_kept_step_divisor=2)

    def shoot(parameters, kept_step_divisor, starts=None, linearized=None, tolerance=0.01):
        return _shoot(rig_of(config), parameters, names, lower, upper, [grid],
                      [(run["theta"][::8], run["dtheta"][::8])], 8e-3,
                      dataclasses.replace(settings, kept_step_divisor=kept_step_divisor,
                                          chi_square_tolerance=tolerance), None,
                      starts, linearized=linearized)

    coarse, starts, finer_start = shoot(start, 1)
    assert coarse.converged and finer_start is not None
    at_coarse = {**start, **coarse.values}
    afresh, _, _ = shoot(at_coarse, 2, starts)
    warm, warm_starts, _ = shoot(at_coarse, 2, starts, finer_start)
    optimum, _, _ = shoot({**start, **warm.values}, 2, warm_starts, tolerance=1e-9)
    assert afresh.converged and warm.converged and afresh.step_s == warm.step_s == 4e-3
    assert max(abs(coarse.values[name] - optimum.values[name]) / optimum.std[name]
               for name in names) > 0.5  # the step's bias: a refit has a way to go
    assert warm.linearizations < afresh.linearizations
    for name in names:
        for refit in (afresh, warm):
            assert abs(refit.values[name] - optimum.values[name]) <= 0.1 * optimum.std[name]
        assert warm.std[name] == pytest.approx(afresh.std[name], rel=1e-3), name


def test_chained_lanes_are_one_simulation_and_their_jacobians_match_finite_differences():
    """A rigid segment of 300 steps, laid out in lanes of 40, is one continuous simulation.

    Run two steps a sample in runs of 128 steps that do not line up with the lanes: its
    simulated angles (the measured ones plus the residuals) are the rigid replay's over the
    whole segment; its Jacobians in the start and in the free values, carried from run to run
    along the stored states (the variational step's implicit derivatives), match central
    differences.
    """
    from mb_estimation.compiled import Compiler
    from mb_estimation.estimation.shooting_segments import lanes_of, rigid_linearized
    from mb_estimation.rigs import built_system, parameter_arrays
    from mb_estimation.validation import rigid_replay

    config = load_config("furuta")
    run = simulate_recording(rig_of(config), config.parameters, "multisine",
                             duration_s=0.4, dt=1e-3, rate_hz=1000.0, noise_rad=1e-3, seed=1,
                             rigid=True)
    grid = prepare_recording(
        Recording("m", run.time_s, run.measured_angles, run.time_s, run.inputs), 1e-3, 100.0)
    segments = segments_of([grid], 0.3, 0.0)
    names = ("J_Azz", "b1")
    values = np.array([0.011, 1.2e-4])
    fixed = {name: np.asarray(value, dtype=float) for name, value in config.parameters.items()
             if name not in names}
    rig = rig_of(config)
    compiler = Compiler()

    def linearized(at_starts, at_values):
        return rigid_linearized(compiler, (rig, names, (False, False)),
                                (np.asarray(5e-4), np.asarray(2)), fixed, lanes, at_starts,
                                at_values)

    starts = np.concatenate([run.joint_angles[:1], run.joint_rates[:1]], axis=1) + 1e-3
    lanes = lanes_of(segments, 40)
    assert segments.inputs.shape == (1, 300, 1) and lanes.count == 8
    residual, jac_start, jac_values = linearized(starts, values)

    scored = (lanes.weights[0] > 0).reshape(-1)
    simulated = segments.measured[0] + residual[0].reshape(-1, 2)[scored]
    system = built_system(rig, parameter_arrays({**config.parameters,
                                                 **dict(zip(names, values, strict=True))}))
    replay = rigid_replay(system, grid, starts[0], simulation_dt=5e-4)[:301]
    np.testing.assert_allclose(simulated, replay, rtol=0, atol=1e-11)

    def residuals(at_starts, at_values):
        return linearized(at_starts, at_values)[0]

    for column, size in ((0, 1e-6), (3, 1e-5)):  # an angle, a rate
        moved = np.zeros_like(starts)
        moved[:, column] = size
        central = (residuals(starts + moved, values) - residuals(starts - moved, values)) / (
            2 * size)
        np.testing.assert_allclose(jac_start[:, :, column], central, rtol=1e-5,
                                   atol=1e-6 * np.abs(central).max())
    for index, size in ((0, 1e-7), (1, 1e-8)):
        moved = np.zeros_like(values)
        moved[index] = size
        central = (residuals(starts, values + moved) - residuals(starts, values - moved)) / (
            2 * size)
        np.testing.assert_allclose(jac_values[:, :, index], central, rtol=1e-5,
                                   atol=1e-6 * np.abs(central).max())
