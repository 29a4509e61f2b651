"""The estimator: block linear algebra, box QP, Jacobian blocks, covariance, LM, preprocessing."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from finite_differences import assert_parameter_columns
from scipy.signal import lfilter

from mb_estimation.compiled import Compiler
from mb_estimation.config import apply_overrides, load_config
from mb_estimation.estimation import (
    EstimationProblem,
    FitStatus,
    SolverSettings,
    estimate,
    recording_blocks,
)
from mb_estimation.estimation.covariance import (
    correlated_middle,
    correlation_lags,
    gravity_frame,
    parameter_covariance,
    parameter_std,
)
from mb_estimation.estimation.formulations import JointCoordinates, MaximalCoordinates
from mb_estimation.estimation.input_delay import delay_costs
from mb_estimation.estimation.linear_algebra import (
    eliminate_states,
    normal_equations,
    solve_box_qp,
    state_step,
)
from mb_estimation.estimation.parameters import (
    FreeParameters,
    clip_to_box,
    parameters_boxplus,
    tangent_bounds,
)
from mb_estimation.estimation.recording_blocks import bucket_length, linearization
from mb_estimation.estimation.residuals import (
    Linearization,
    ModelStructure,
    StepData,
    linearize,
    recording_residuals,
)
from mb_estimation.estimation.solver import excited_by_data, states_from_angles
from mb_estimation.multibody import state_boxplus
from mb_estimation.numerics import jax, jit
from mb_estimation.rigs import get_rig, parameter_arrays
from mb_estimation.signals import Recording, prepare_recording
from mb_estimation.signals.preprocess import held_input_means, lowpass
from mb_estimation.simulation import simulate_recording

jnp = jax.numpy


def _random_linearization(rng, n=6, m=5, s=3, p=2):
    previous = rng.standard_normal((n, m, s))
    previous[0] = 0.0
    return Linearization(jnp.asarray(rng.standard_normal((n, m))), jnp.asarray(previous),
                         jnp.asarray(rng.standard_normal((n, m, s))),
                         jnp.asarray(rng.standard_normal((n, m, p))))


def _dense_jacobian(lin):
    a, b, c = (np.asarray(x) for x in (lin.previous, lin.current, lin.parameters))
    n, m, s = b.shape
    jacobian = np.zeros((n * m, n * s + c.shape[2]))
    for k in range(n):
        jacobian[k * m:(k + 1) * m, k * s:(k + 1) * s] = b[k]
        if k:
            jacobian[k * m:(k + 1) * m, (k - 1) * s:k * s] = a[k]
        jacobian[k * m:(k + 1) * m, n * s:] = c[k]
    return jacobian


def test_block_elimination_matches_dense_damped_solve():
    rng = np.random.default_rng(0)
    lin = _random_linearization(rng)
    n, _, s = lin.current.shape
    jacobian = _dense_jacobian(lin)
    hessian = jacobian.T @ jacobian
    scale = np.maximum(np.diag(hessian), 1e-3)
    damping = 0.3
    dense = -np.linalg.solve(hessian + damping * np.diag(scale),
                             jacobian.T @ np.asarray(lin.residuals).ravel())
    normal = normal_equations(lin)
    elimination = eliminate_states(normal, damping, jnp.asarray(scale[:n * s].reshape(n, s)))
    schur = (np.asarray(normal.parameter_matrix + elimination.schur)
             + damping * np.diag(scale[n * s:]))
    rhs = np.asarray(normal.parameter_gradient + elimination.schur_gradient)
    parameter_step = -np.linalg.solve(schur, rhs)
    states = np.asarray(state_step(elimination, jnp.asarray(parameter_step)))
    np.testing.assert_allclose(parameter_step, dense[n * s:], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(states.ravel(), dense[:n * s], rtol=1e-10, atol=1e-12)


def test_box_qp_is_exact_against_enumerated_active_sets():
    rng = np.random.default_rng(1)
    for _ in range(20):
        factor = rng.standard_normal((4, 4))
        matrix = factor @ factor.T + 0.1 * np.eye(4)
        gradient = 3.0 * rng.standard_normal(4)
        lower, upper = -rng.uniform(0, 1, 4), rng.uniform(0, 1, 4)
        lower[0], upper[0] = -np.inf, np.inf
        best, best_value = None, np.inf
        # every assignment of each bounded variable to free / lower / upper
        for choice in itertools.product(range(3), repeat=4):
            fixed = {i: (lower[i] if c == 1 else upper[i]) for i, c in enumerate(choice) if c}
            if any(not np.isfinite(v) for v in fixed.values()):
                continue
            free = [i for i in range(4) if i not in fixed]
            x = np.zeros(4)
            for i, v in fixed.items():
                x[i] = v
            if free:
                fixed_idx = list(fixed)
                rhs = -gradient[free] - matrix[np.ix_(free, fixed_idx)] @ x[fixed_idx]
                x[free] = np.linalg.solve(matrix[np.ix_(free, free)], rhs)
            if np.all(x >= lower - 1e-12) and np.all(x <= upper + 1e-12):
                value = 0.5 * x @ matrix @ x + gradient @ x
                if value < best_value:
                    best, best_value = x, value
        solution = solve_box_qp(matrix, gradient, lower, upper)
        value = 0.5 * solution @ matrix @ solution + gradient @ solution
        assert value <= best_value + 1e-10 * (1 + abs(best_value))
        np.testing.assert_allclose(solution, best, atol=1e-7)


def test_a_step_to_the_lower_bound_stays_in_the_box():
    free = FreeParameters(("J_Azz", "tilt"), ("scalar", "quaternion"))
    values = {"J_Azz": jnp.asarray(0.0037), "tilt": jnp.array([1.0, 0.0, 0.0, 0.0])}
    low, _ = tangent_bounds(free, values, {"J_Azz": 1e-12}, {"J_Azz": 1.0})
    moved = parameters_boxplus(free, values, jnp.asarray([low[0], 0.0, 0.0, 0.1]))
    assert float(moved["J_Azz"]) < 1e-12  # round-off: 0.0037 + (1e-12 - 0.0037)
    clipped = clip_to_box(free, moved, {"J_Azz": 1e-12}, {"J_Azz": 1.0})
    assert float(clipped["J_Azz"]) == 1e-12
    np.testing.assert_array_equal(clipped["tilt"], moved["tilt"])


def test_covariance_reduces_to_inverse_information_and_flags_blind_directions():
    rng = np.random.default_rng(2)
    factor = rng.standard_normal((3, 3))
    information = factor @ factor.T + np.eye(3)
    covariance = parameter_covariance(information, information)
    np.testing.assert_allclose(covariance, np.linalg.inv(information), rtol=1e-10)
    blind = np.zeros((4, 4))
    blind[:3, :3] = information
    covariance = parameter_covariance(blind, blind)
    assert np.isinf(covariance[3, 3])
    np.testing.assert_allclose(covariance[:3, :3], np.linalg.inv(information), rtol=1e-8)


def test_round_off_information_does_not_hide_a_determined_parameter():
    """A Jacobian column at the round-off of a zero, nearly parallel to a determined one.

    Like an arm's inertia about an axis it never turns about (its column ~1e-30, a product of
    rotation-matrix round-off and the determined inertia's column): scaled to unit diagonal it
    would look like a copy of its neighbour and make both undetermined. It is undetermined and
    the others keep their covariance.
    """
    rng = np.random.default_rng(4)
    columns = rng.standard_normal((50, 3))
    noise = 1e-30 * (columns[:, 0] + 1e-9 * rng.standard_normal(50))
    jacobian = np.column_stack([columns, noise])
    information = jacobian.T @ jacobian
    covariance = parameter_covariance(information, information)
    assert np.isinf(covariance[3, 3])
    np.testing.assert_allclose(covariance[:3, :3], np.linalg.inv(columns.T @ columns),
                               rtol=1e-8)


def test_correlated_middle_is_the_bartlett_weighted_sum_of_lagged_products():
    scores = np.random.default_rng(5).standard_normal((300, 3))
    lags = 7
    expected = scores.T @ scores
    for lag in range(1, lags + 1):
        product = scores[lag:].T @ scores[:-lag]
        expected += (1 - lag / (lags + 1)) * (product + product.T)
    np.testing.assert_allclose(correlated_middle(scores, lags), expected, rtol=1e-12)
    np.testing.assert_allclose(correlated_middle(scores, 0), scores.T @ scores, rtol=1e-12)


def test_correlation_lags_are_short_for_white_residuals_and_a_quarter_period_for_a_sine():
    rng = np.random.default_rng(6)
    # white: the autocorrelation's sign at each lag a coin toss, the first non-positive soon
    assert correlation_lags(rng.standard_normal((5000, 2))) <= 8
    time_s = np.arange(5000) * 0.002
    swing = np.sin(2 * np.pi * time_s / 0.5) + 0.05 * rng.standard_normal(5000)
    # the sine's autocorrelation first reaches zero at a quarter period: 0.125 s, 62.5 samples
    assert abs(correlation_lags(np.column_stack([rng.standard_normal(5000), swing])) - 62) <= 2
    assert correlation_lags(np.zeros((100, 1))) == 1


def test_the_correlated_sandwich_covers_an_error_that_lasts_and_the_plain_one_does_not():
    """A model error that lasts: its std are covered, the model-is-right ones are not.

    A straight-line fit through data with AR(1) errors (ρ = 0.95): over many draws, the
    slope's actual spread against the std each covariance reports. The model-is-right one
    (independent residuals) is about √((1+ρ)/(1-ρ)) ≈ 6× too small; the one with the residuals'
    correlation in time is within a quarter of the truth.
    """
    rng = np.random.default_rng(7)
    count, rho, draws = 4000, 0.95, 300
    design = np.column_stack([np.ones(count), np.linspace(-1.0, 1.0, count)])
    information = design.T @ design
    slopes, plain, correlated = [], [], []
    for _ in range(draws):
        shocks = rng.standard_normal(count)
        errors = lfilter([1.0], [1.0, -rho], shocks, zi=[rho * shocks[0] / np.sqrt(1 - rho**2)])[0]
        fitted = np.linalg.solve(information, design.T @ errors)
        residuals = errors - design @ fitted
        slopes.append(fitted[1])
        variance = residuals @ residuals / (count - 2)
        plain.append(np.sqrt(parameter_covariance(information, variance * information)[1, 1]))
        middle = correlated_middle(design * residuals[:, None],
                                   correlation_lags(residuals[:, None]))
        correlated.append(np.sqrt(parameter_covariance(information, middle)[1, 1]))
    actual = np.std(slopes)
    assert np.median(plain) < actual / 4
    assert 0.75 * actual < np.median(correlated) < 1.25 * actual


# --- preprocessing ------------------------------------------------------------------------------

def test_tilt_std_is_reported_for_the_two_directions_gravity_can_lean():
    """A rotation of the tilt about gravity is invisible; the two leaning directions are not.

    Information from residuals that see one scalar and the tilt's rotation vector except its
    component along a gravity leaning 10° off -y: in world components every tilt entry mixes
    with the invisible direction (all three undetermined), in the gravity frame only the
    middle one is, and the other two get the std of the information projected onto them.
    """
    rng = np.random.default_rng(5)
    tilt_z, tilt_x = np.radians(10.0), np.radians(4.0)
    down = np.array([np.sin(tilt_z), -np.cos(tilt_z) * np.cos(tilt_x),
                     np.cos(tilt_z) * np.sin(tilt_x)])
    jacobian = 100.0 * rng.standard_normal((40, 4))  # std about 2e-3 rad
    jacobian[:, 1:] -= np.outer(jacobian[:, 1:] @ down, down)  # blind along gravity
    information = jacobian.T @ jacobian
    free = FreeParameters.of(get_rig("furuta").spec, ("J_Azz", "tilt"))
    assert np.all(np.isinf(np.diag(parameter_covariance(information, information))[1:]))

    frame = gravity_frame(9.82 * down)
    np.testing.assert_allclose(frame.T @ frame, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(frame[:, 1], down, atol=1e-12)
    assert frame[0, 0] > 0.9 and frame[2, 2] > 0.9  # near x and z
    std = parameter_std(information, information, free, 9.82 * down)
    observable = np.zeros((4, 3))
    observable[0, 0], observable[1:, 1], observable[1:, 2] = 1.0, frame[:, 0], frame[:, 2]
    expected = np.sqrt(np.diag(np.linalg.inv(observable.T @ information @ observable)))
    np.testing.assert_allclose(std["J_Azz"], expected[:1], rtol=1e-8)
    assert np.isinf(std["tilt"][1])
    np.testing.assert_allclose(std["tilt"][[0, 2]], expected[1:], rtol=1e-8)
    assert excited_by_data("quaternion", std["tilt"], None)


def test_held_input_means_integrate_the_zero_order_hold_exactly():
    change_times = np.array([0.0, 0.013, 0.021, 0.05])
    values = np.array([[1.0], [-2.0], [4.0], [0.5]])
    grid = np.array([0.0, 0.01, 0.02, 0.03, 0.04])
    means = held_input_means(change_times, values, grid)
    expected = [1.0, (0.003 * 1.0 + 0.007 * -2.0) / 0.01,
                (0.001 * -2.0 + 0.009 * 4.0) / 0.01, 4.0]
    np.testing.assert_allclose(means[:, 0], expected)


@pytest.mark.parametrize("step_s", [1e-3, 1.25e-3])
def test_the_delay_scan_reads_one_fine_grid_as_shifting_the_stamps_would(step_s):
    # 1 ms: every t_k - d on one grid of 0.1 ms (the fast path); 1.25 ms: the stamps shifted
    rng = np.random.default_rng(3)
    time_s = 2.5 + step_s * np.arange(900)
    stamps = np.sort(2.49 + 1e-3 * np.arange(1200) + 2e-4 * rng.standard_normal(1200))
    inputs = rng.standard_normal((1200, 1))
    held = held_input_means(stamps, inputs, time_s)
    balance, gain = 1e-3 * rng.standard_normal((899, 2)), 1e-3 * rng.standard_normal((2, 1))
    delays = np.arange(-0.02, 0.06 + 5e-5, 1e-4)
    costs = delay_costs(balance, gain, held, stamps, inputs, time_s, delays)
    shifted = [np.sum((balance + (held_input_means(stamps + delay, inputs, time_s) - held)
                       @ gain.T) ** 2) for delay in delays]
    np.testing.assert_allclose(costs, shifted, rtol=1e-9)
    assert np.ptp(costs) > 1e-3 * np.min(costs)  # the delays do change the cost


def test_the_momentum_balance_in_chunks_is_the_whole_recordings():
    """Two chunks and a padded remainder give the balance of all steps at once, to round-off."""
    from mb_estimation.estimation import input_delay
    from mb_estimation.rigs import built_system
    from mb_estimation.setup import rig_of

    config = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    system = built_system(rig_of(config), parameter_arrays(config.parameters))
    steps = 2 * input_delay.BALANCE_CHUNK + 300
    rng = np.random.default_rng(5)
    angles = np.cumsum(1e-3 * rng.standard_normal((steps + 1, 2)), axis=0)
    rates = rng.standard_normal((steps + 1, 2))
    held = rng.standard_normal((steps, 1))
    balance, gain = input_delay.momentum_balance(system, angles, rates, held, 1e-3)
    whole, whole_gain = jit(input_delay._momentum_balance)(system, angles, rates, held, 1e-3)
    assert balance.shape == (steps, 2)
    np.testing.assert_allclose(balance, whole, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(gain, whole_gain)


def test_lowpass_is_zero_phase():
    time_s = np.arange(0, 4, 0.001)
    slow = np.sin(2 * np.pi * 1.0 * time_s)
    noisy = slow + 0.2 * np.sin(2 * np.pi * 150 * time_s)
    filtered = lowpass(time_s, noisy[:, None], 10.0)[:, 0]
    inner = slice(500, -500)
    assert np.max(np.abs(filtered[inner] - slow[inner])) < 0.01  # no lag, harmonic removed


def test_prepare_recording_trims_to_the_input_and_unwraps():
    time_s = np.arange(0, 1.0, 0.001)
    wrapped = np.angle(np.exp(1j * 20.0 * time_s))  # 20 rad/s, wrapped to (-π, π]
    recording = Recording("r", time_s, np.stack([wrapped, 0 * wrapped], 1),
                          np.array([0.1055, 0.5]), np.array([[2.0], [3.0]]))
    grid = prepare_recording(recording, 0.01, 10.0)
    assert grid.time_s[0] == pytest.approx(0.1055)
    np.testing.assert_allclose(np.diff(grid.time_s), 0.01)
    np.testing.assert_allclose(grid.measured_angles[:, 0], 20.0 * grid.time_s, atol=1e-9)
    assert grid.inputs.shape == (len(grid.time_s) - 1, 1)
    with pytest.raises(ValueError, match="too short"):
        prepare_recording(recording, 0.5, 10.0, start_s=0.9)


# --- the Furuta problem -------------------------------------------------------------------------

STEP = 0.01


@pytest.fixture(scope="module")
def furuta_case():
    """A 1.5 s swing-up simulated with the estimation model itself (same step and compliance)."""
    truth = apply_overrides(load_config("furuta_synthetic"), compliance=1e-4)
    rig = get_rig("furuta")
    sim = simulate_recording(rig, truth.parameters, "swingup", duration_s=1.5, dt=STEP,
                             rate_hz=1.0 / STEP)
    recording = Recording("swingup", sim.time_s, sim.measured_angles, sim.time_s, sim.inputs)
    return truth, rig, prepare_recording(recording, STEP, 10.0)


def test_jacobian_blocks_match_finite_differences(furuta_case):
    truth, rig, grid = furuta_case
    values = parameter_arrays(truth.parameters)
    free = FreeParameters.of(rig.spec, ("J_Azz", "b1", "tilt"))
    fixed = {k: v for k, v in values.items() if k not in free.names}
    free_values = {k: values[k] for k in free.names}
    structure = ModelStructure(rig, free)
    # the whole recording and the free set of the chunked test below: one compiled linearize
    data = StepData(jnp.asarray(grid.measured_angles), jnp.asarray(grid.inputs),
                    jnp.asarray(grid.observed), jnp.asarray(STEP), jnp.asarray(10.0),
                    jnp.zeros(2))
    states = states_from_angles(structure, fixed, free_values,
                             jnp.asarray(grid.filtered_angles), jnp.asarray(STEP))
    lin = jit(linearize, static_argnums=0)(structure, fixed, free_values, states, data)
    n = states.position.shape[0]
    compiled = jit(recording_residuals, static_argnums=0)

    def residuals(x, parameter_values):
        return np.asarray(compiled(structure, fixed, parameter_values, x, data))

    np.testing.assert_allclose(residuals(states, free_values), lin.residuals, atol=1e-10)
    eps, k = 1e-6, 5
    for component in (0, 4, 8, 13, 19, 22):
        delta = np.zeros((n, 24))
        delta[k, component] = eps
        plus = residuals(state_boxplus(states, jnp.asarray(delta.reshape(n, 2, 12))), free_values)
        minus = residuals(state_boxplus(states, jnp.asarray(-delta.reshape(n, 2, 12))),
                          free_values)
        column = (plus - minus) / (2 * eps)
        scale = np.abs(column).max()
        np.testing.assert_allclose(column[k], lin.current[k][:, component], atol=1e-6 * scale)
        np.testing.assert_allclose(column[k + 1], lin.previous[k + 1][:, component],
                                   atol=1e-6 * scale)
    assert_parameter_columns(residuals, states, free, free_values, lin.parameters, eps)


def _case_states(furuta_case, formulation: str):
    """The swing-up case's structure (J_Azz, b1 free), values and initial states.

    The maximal one frees the tilt too: the Jacobian test's structure, whose compiled
    linearize of the whole recording it reuses.
    """
    truth, rig, grid = furuta_case
    values = parameter_arrays(truth.parameters)
    free = ("J_Azz", "b1", "tilt") if formulation == "maximal" else ("J_Azz", "b1")
    structure = ModelStructure(rig, FreeParameters.of(rig.spec, free),
                               MaximalCoordinates() if formulation == "maximal"
                               else JointCoordinates())
    fixed = {k: v for k, v in values.items() if k not in structure.free.names}
    free_values = {k: values[k] for k in structure.free.names}
    formulation = structure.formulation
    states = formulation.initial_states(structure.system(fixed, free_values),
                                        jnp.asarray(grid.filtered_angles),
                                        formulation.start_rates(grid.filtered_angles, STEP), STEP)
    return structure, fixed, free_values, states, grid


@pytest.mark.parametrize("formulation", ["maximal", "joint"])
def test_chunked_linearization_assembled_on_the_host_is_the_whole_recordings(
        furuta_case, formulation, monkeypatch):
    """Chunk by chunk, joined on the host, equal to the whole recording in one program.

    The model's programs run on three chunks (the last one cut); their parts are placed in the
    formulation's ⊞ layout and padded on the host.
    """
    monkeypatch.setattr(recording_blocks, "CHUNK_TRANSITIONS", 64)
    structure, fixed, free_values, states, grid = _case_states(furuta_case, formulation)
    n = grid.num_steps
    assert 2 * 64 + 1 < n < 3 * 64 + 1
    data = StepData(jnp.asarray(grid.measured_angles[:n]), jnp.asarray(grid.inputs[:n - 1]),
                    jnp.asarray(grid.observed[:n]), jnp.asarray(STEP), jnp.asarray(10.0),
                    jnp.zeros(2))
    whole = jit(linearize, static_argnums=0)(structure, fixed, free_values, states, data)
    size = bucket_length(n)
    chunked = linearization(Compiler(), structure, fixed, free_values, states, data, size)
    for name in ("residuals", "previous", "current", "parameters"):
        expected, got = np.asarray(getattr(whole, name)), np.asarray(getattr(chunked, name))
        assert got.shape == (size, *expected.shape[1:]), name
        np.testing.assert_allclose(got[:n], expected, rtol=1e-12,
                                   atol=1e-12 * np.abs(expected).max(), err_msg=name)
        assert not np.any(got[n:]), name
    assert not np.any(np.asarray(chunked.previous)[0])


@pytest.mark.parametrize("formulation", ["maximal", "joint"])
def test_shadow_states_in_chunks_are_those_of_the_whole_trajectory(furuta_case, formulation,
                                                                   monkeypatch):
    """The shadow map run chunk by chunk (three chunks, the last one cut) equals one call."""
    from mb_estimation.estimation.solver import _shadow

    monkeypatch.setattr(recording_blocks, "CHUNK_TRANSITIONS", 64)
    structure, fixed, free_values, states, grid = _case_states(furuta_case, formulation)
    assert 2 * 64 < grid.num_steps < 3 * 64
    whole = _shadow(structure, fixed, free_values, states)
    chunked = recording_blocks.per_state(Compiler(), _shadow, structure, fixed, free_values,
                                         states)
    for expected, got in zip(jax.tree_util.tree_leaves(whole),
                             jax.tree_util.tree_leaves(chunked), strict=True):
        assert got.shape == expected.shape
        # to round-off on the leaf's scale: the chunks are one compiled program, the whole
        # trajectory eager operations, and the two order some sums differently (a few ulp)
        np.testing.assert_allclose(got, expected, rtol=1e-13,
                                   atol=1e-14 * np.abs(expected).max())


#: The free set and Table 1's start of the Furuta problem's fits: one set of compiled model
#: programs for every fit of the module that does not test a free set of its own.
TABLE_1_FREE = ("J_Azz", "J_Byy", "b1", "b2")


def _table_1_problem(furuta_case, *grids):
    """The fit of ``grids`` (default: the case's own) from Table 1's initial values."""
    truth, rig, grid = furuta_case
    start = apply_overrides(truth, free=list(TABLE_1_FREE),
                            set_values={"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4})
    return EstimationProblem(rig, start.parameters, TABLE_1_FREE,
                             {n: start.free[n].lower for n in TABLE_1_FREE},
                             {n: start.free[n].upper for n in TABLE_1_FREE}, grids or (grid,))


def test_estimate_recovers_the_truth_from_self_consistent_data(furuta_case):
    """Noise-free data from the estimation model itself: the truth is the exact minimum.

    From Table 1's initial values (inertias 3× too large, b1 10× too small) LM must converge
    to the simulated values (b2, the least excited, to 1e-5), decreasing the cost monotonically.
    """
    truth, _, grid = furuta_case
    seen = []
    result = estimate(_table_1_problem(furuta_case),
                      SolverSettings(max_iterations=40, gradient_tolerance=1e-6,
                                     step_tolerance=1e-9), progress=seen.append)
    costs = [entry.cost for entry in result.history]
    assert seen == list(result.history)
    assert all(later <= earlier for earlier, later in zip(costs, costs[1:], strict=False))
    assert result.converged, result.message
    assert costs[-1] < 1e-16 * costs[0]
    for name in TABLE_1_FREE:
        assert float(result.parameters[name]) == pytest.approx(truth.parameters[name], rel=1e-4)
    assert result.std["J_Azz"].shape == (1,) and np.isfinite(result.std["J_Azz"][0])
    assert result.recordings[0].joint_angles.shape == grid.measured_angles.shape
    assert result.cost == pytest.approx(result.observation_mse + result.impulse_mse)
    assert result.message


def test_a_fit_stops_at_its_time_limit(furuta_case):
    """``time_limit_s``: no new iteration once the solve has run that long (compiling apart)."""
    problem = _table_1_problem(furuta_case)
    result = estimate(problem, SolverSettings(max_iterations=40, time_limit_s=1e-6))
    assert result.status == FitStatus.TIME_LIMIT and not result.converged
    assert result.iterations == 0 and "time limit (1e-06 s of solving)" in result.message
    assert estimate(problem, SolverSettings(max_iterations=40, time_limit_s=60.0)).converged

def _first_steps(grid, count: int):
    """The first ``count`` grid points of ``grid`` (a shorter recording)."""
    return dataclasses.replace(
        grid, time_s=grid.time_s[:count], measured_angles=grid.measured_angles[:count],
        filtered_angles=grid.filtered_angles[:count], inputs=grid.inputs[:count - 1],
        observed=grid.observed[:count])


def test_one_compilation_serves_other_lengths_and_recording_counts(furuta_case):
    """Recordings of other lengths in the same bucket, and two at once, compile nothing new.

    The model's blocks go in chunks of a fixed size, the whole-recording algebra (normal
    equations, block elimination, state maps) on the length padded to its bucket.
    """
    truth, rig, grid = furuta_case

    def solve(*grids):
        return estimate(_table_1_problem(furuta_case, *grids), SolverSettings(max_iterations=3))

    assert bucket_length(100) == bucket_length(120) == bucket_length(151) == 256
    assert [bucket_length(n) for n in (257, 385, 1001, 10_001)] == [320, 448, 1024, 10_240]
    first = solve(_first_steps(grid, 120))
    assert first.iterations >= 1
    for grids in ((_first_steps(grid, 100),), (_first_steps(grid, 151), _first_steps(grid, 137))):
        again = solve(*grids)
        assert again.compile_time_s == 0.0, [g.num_steps for g in grids]
        assert [r.joint_angles.shape[0] for r in again.recordings] == [g.num_steps for g in grids]
    # The recordings of one solve share the longest one's bucket: 120 steps alone are bucket
    # 256, but beside 301 steps (bucket 320) they reuse the programs that 301 alone compiled.
    sim = simulate_recording(rig, truth.parameters, "swingup", duration_s=3.0, dt=STEP,
                             rate_hz=1.0 / STEP)
    longer = prepare_recording(Recording("swingup", sim.time_s, sim.measured_angles, sim.time_s,
                                         sim.inputs), STEP, 10.0)
    assert longer.num_steps == 301 and bucket_length(301) == 320
    assert solve(longer).compile_time_s > 0.0
    both = solve(longer, _first_steps(grid, 120))
    assert both.compile_time_s == 0.0
    assert [r.joint_angles.shape[0] for r in both.recordings] == [301, 120]


def test_predictions_in_batches_reproduce_the_model_from_its_own_states(furuta_case):
    """Predictions from a simulation's own states, run in batches (one partial), are exact."""
    from mb_estimation.validation import PREDICTION_BATCH, prediction_check

    truth, rig, _ = furuta_case
    sim = simulate_recording(rig, truth.parameters, "multisine", duration_s=1.5, dt=STEP,
                             rate_hz=1.0 / STEP)
    grid = prepare_recording(Recording("m", sim.time_s, sim.joint_angles, sim.time_s,
                                       sim.inputs), STEP, 10.0)
    states = jax.tree_util.tree_map(np.asarray, sim.states)  # its body states on the grid
    check = prediction_check(rig, truth.parameters, grid, states, horizon_s=0.1,
                             simulation_dt=STEP)
    assert check.starts == 15 and check.starts % PREDICTION_BATCH
    assert np.all(check.rms < 1e-9)
    heavier = apply_overrides(truth, set_values={"J_Azz": 2 * truth.parameters["J_Azz"]})
    off = prediction_check(rig, heavier.parameters, grid, states, horizon_s=0.1,
                           simulation_dt=STEP)
    assert off.rms[-1, 0] > 1e-4


def test_open_loop_replay_in_chunks_is_the_whole_rollout_and_compiles_once(furuta_case):
    """An open-loop replay in fixed chunks is the rollout over the whole recording.

    The state is carried from chunk to chunk; a second length compiles nothing new.
    """
    from mb_estimation import compiled
    from mb_estimation.validation import REPLAY_CHUNK, _angles_on_the_way, _replayed_angles

    truth, rig, _ = furuta_case
    system = rig.build(parameter_arrays(truth.parameters))
    sim = simulate_recording(rig, truth.parameters, "multisine", duration_s=0.2, dt=STEP / 10,
                             rate_hz=10.0 / STEP)
    initial = jax.tree_util.tree_map(lambda leaf: leaf[0], sim.states)
    count = REPLAY_CHUNK + 77  # two chunks, the second one padded
    inputs = np.resize(np.asarray(sim.inputs), (count, sim.inputs.shape[1]))
    whole = np.asarray(_angles_on_the_way(system, initial, jnp.asarray(inputs), STEP / 10)[1])
    chunked = _replayed_angles(system, initial, inputs, STEP / 10)
    assert chunked.shape == whole.shape == (count + 1, 2)
    np.testing.assert_allclose(chunked, whole, rtol=0, atol=1e-12)
    programs = len(compiled._PROGRAMS)
    shorter = _replayed_angles(system, initial, inputs[:100], STEP / 10)
    assert len(compiled._PROGRAMS) == programs
    np.testing.assert_allclose(shorter, whole[:101], rtol=0, atol=1e-12)


def test_estimate_with_drift_corrected_rows_recovers_the_truth():
    """The estimator runs on the drift-corrected model too (curvature term differentiated)."""
    truth = apply_overrides(load_config("furuta_synthetic"), compliance=1e-4)
    rig = get_rig("furuta", None, True)
    sim = simulate_recording(rig, truth.parameters, "swingup", duration_s=1.5, dt=STEP,
                             rate_hz=1.0 / STEP)
    grid = prepare_recording(Recording("swingup", sim.time_s, sim.measured_angles, sim.time_s,
                                       sim.inputs), STEP, 10.0)
    free = ("J_Azz", "J_Byy", "b1")
    start = apply_overrides(truth, free=list(free),
                            set_values={"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4})
    problem = EstimationProblem(rig, start.parameters, free,
                                {n: start.free[n].lower for n in free},
                                {n: start.free[n].upper for n in free}, (grid,))
    result = estimate(problem, SolverSettings(max_iterations=40, gradient_tolerance=1e-6,
                                              step_tolerance=1e-9))
    assert result.converged, result.message
    for name in free:
        assert float(result.parameters[name]) == pytest.approx(truth.parameters[name], rel=1e-4)


def test_open_loop_replay_reproduces_its_own_simulation(furuta_case):
    """Replaying a recording with the parameters and initial state that made it is exact.

    A wrong inertia shows up in the RMS error.
    """
    from mb_estimation.validation import open_loop_check

    truth, rig, _ = furuta_case
    sim = simulate_recording(rig, truth.parameters, "multisine", duration_s=1.5, dt=STEP,
                             rate_hz=1.0 / STEP)
    grid = prepare_recording(Recording("m", sim.time_s, sim.joint_angles, sim.time_s,
                                       sim.inputs), STEP, 10.0)
    initial = jax.tree_util.tree_map(lambda leaf: leaf[0], sim.states)
    check = open_loop_check(rig, truth.parameters, grid, initial, first_s=1.0)
    assert check.simulated.shape == grid.measured_angles.shape
    assert np.all(check.rms_all < 1e-9) and np.all(check.rms_first < 1e-9)
    heavier = apply_overrides(truth, set_values={"J_Azz": 2 * truth.parameters["J_Azz"]})
    off = open_loop_check(rig, heavier.parameters, grid, initial, first_s=1.0)
    assert off.rms_all[0] > 1e-3
