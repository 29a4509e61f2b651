"""The drift filter (:mod:`mb_estimation.online.drift`): values and rates fused window by window.

Checked against the batch solution of the same linear-Gaussian model (every state at once,
no prior), for consistency of the reported std over noise draws, and for what the data do not
determine, alarms, time going back and the state file.
"""

import math

import numpy as np
import pytest
from test_fusion import window_with_undetermined_directions

from mb_estimation.lie import quat_boxminus, quat_exp, quat_multiply
from mb_estimation.online.drift import (
    HOUR_S,
    DriftSettings,
    alarms,
    load_drifting,
    per_tangent_entry,
    save_drifting,
    track,
)
from mb_estimation.online.fusion import ParameterEstimate, save_estimate

INF = math.inf


def scalars(values, covariance, names=("a", "b")):
    return ParameterEstimate(names, {n: np.array([v]) for n, v in zip(names, values, strict=True)},
                             np.asarray(covariance, dtype=float))


def _batch_last_state(times_h, measured, covariances, noise, prior):
    """The last (values, rates) and their information from all windows solved at once.

    Unknowns: every window's state; rows: the first rates' prior ``0 ± p``, each measurement
    (whitened by its covariance) and each transition ``s_{k+1} − F s_k`` (whitened by the
    process covariance).
    """
    p = len(noise)
    n = len(times_h)
    size = 2 * p * n
    first = np.zeros((p, size))
    first[:, p:2 * p] = np.diag(1.0 / np.asarray(prior))
    rows, rhs = [first], [np.zeros(p)]
    for k in range(n):
        whiten = np.linalg.cholesky(np.linalg.inv(covariances[k])).T
        block = np.zeros((p, size))
        block[:, 2 * p * k:2 * p * k + p] = np.eye(p)
        rows.append(whiten @ block)
        rhs.append(whiten @ measured[k])
    for k in range(n - 1):
        hours = times_h[k + 1] - times_h[k]
        transition = np.block([[np.eye(p), hours * np.eye(p)], [np.zeros((p, p)), np.eye(p)]])
        process = np.zeros((2 * p, 2 * p))
        q2 = np.asarray(noise) ** 2
        i = np.arange(p)
        process[i, i] = q2 * hours**3 / 3
        process[i, p + i] = process[p + i, i] = q2 * hours**2 / 2
        process[p + i, p + i] = q2 * hours
        whiten = np.linalg.cholesky(np.linalg.inv(process)).T
        block = np.zeros((2 * p, size))
        block[:, 2 * p * (k + 1):2 * p * (k + 2)] = np.eye(2 * p)
        block[:, 2 * p * k:2 * p * (k + 1)] = -transition
        rows.append(whiten @ block)
        rhs.append(np.zeros(2 * p))
    a, b = np.vstack(rows), np.concatenate(rhs)
    normal = a.T @ a
    solution = np.linalg.solve(normal, a.T @ b)
    covariance = np.linalg.inv(normal)
    last = slice(size - 2 * p, size)
    return solution[last], np.linalg.inv(covariance[last, last])


def test_the_filter_equals_the_batch_solution_of_the_same_model():
    rng = np.random.default_rng(3)
    noise = np.array([0.4, 2.0])
    prior = np.array([1.0, 3.0])
    settings = DriftSettings(noise, prior, alarm_std=3.0)
    times_h = np.cumsum(rng.uniform(0.001, 0.05, 9))
    measured, covariances = [], []
    tracked = None
    for time_h in times_h:
        std = rng.uniform(0.05, 0.3, 2)
        correlation = rng.uniform(-0.8, 0.8)
        covariance = np.outer(std, std) * np.array([[1, correlation], [correlation, 1]])
        value = np.array([1.0 + 0.3 * time_h, -2.0 - 1.5 * time_h]) + rng.multivariate_normal(
            np.zeros(2), covariance)
        measured.append(value)
        covariances.append(covariance)
        tracked = track(tracked, scalars(value, covariance), time_h * HOUR_S, settings)
    state, information = _batch_last_state(times_h, measured, covariances, noise, prior)
    got = np.concatenate([[tracked.estimate.values[n][0] for n in "ab"], tracked.rates])
    # the batch's normal equations hold process rows whitened by Δ^-3/2 (condition ~1e9)
    np.testing.assert_allclose(got, state, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(tracked.information, information, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(tracked.rate_covariance, np.linalg.inv(information)[2:, 2:],
                               rtol=1e-8)
    assert tracked.estimate.windows == len(times_h)


def test_the_first_window_gives_values_and_the_rates_their_prior():
    window = scalars([1.0, 2.0], np.diag([0.01, 0.04]))
    tracked = track(None, window, 10.0, DriftSettings([0.1, 0.3], [0.5, 0.6]))
    assert tracked.estimate.values["a"][0] == 1.0 and tracked.time_s == 10.0
    np.testing.assert_allclose(tracked.estimate.covariance, np.diag([0.01, 0.04]))
    np.testing.assert_allclose(tracked.rate_std, [0.5, 0.6])
    assert np.all(tracked.rates == 0.0) and alarms(tracked, 0.0) == ()


def test_windows_close_in_time_are_averaged():
    """Two windows 5 s apart: nearly the information-weighted mean (the rate prior holds)."""
    settings = DriftSettings([0.1], [0.5])
    tracked = track(None, scalars([1.0], [[0.01]], names=("b1",)), 0.0, settings)
    tracked = track(tracked, scalars([1.2], [[0.01]], names=("b1",)), 5.0, settings)
    assert tracked.estimate.values["b1"][0] == pytest.approx(1.1, abs=1e-4)
    assert tracked.estimate.std["b1"][0] == pytest.approx(math.sqrt(0.005), rel=1e-3)


def _drifting_rig(rng, windows, spacing_s, noise, start_rate):
    """Values of a rig whose rate walks as the filter's model says (fine steps), per window."""
    substeps = 20
    step_h = spacing_s / HOUR_S / substeps
    value, rate, values, rates = 1.0, start_rate, [], []
    for _ in range(windows):
        values.append(value)
        rates.append(rate)
        for _ in range(substeps):
            value += rate * step_h
            rate += noise * np.sqrt(step_h) * rng.standard_normal()
    return np.array(values), np.array(rates)


@pytest.mark.parametrize("windows, spacing_s, start_rate", [(30, 5.0, None), (60, 60.0, 0.2)])
def test_reported_std_hold_over_noise_draws(windows, spacing_s, start_rate):
    """Value and rate errors over their std are unit normals where the rig follows the model.

    A rate drawn from its prior over a few windows; a rate walking from 20 %/h over an hour.
    """
    sigma, noise, prior = 0.01, 0.05, 0.5  # per window; per hour per √h; per hour
    settings = DriftSettings([noise], [prior])
    z = []
    for seed in range(300):
        rng = np.random.default_rng(seed)
        start = prior * rng.standard_normal() if start_rate is None else start_rate
        values, rates = _drifting_rig(rng, windows, spacing_s, noise, start)
        tracked = None
        for k, value in enumerate(values):
            measured = value + sigma * rng.standard_normal()
            tracked = track(tracked, scalars([measured], [[sigma**2]], names=("b1",)),
                            spacing_s * k, settings)
        z.append([(tracked.estimate.values["b1"][0] - values[-1]) / tracked.estimate.std["b1"][0],
                  (tracked.rates[0] - rates[-1]) / tracked.rate_std[0]])
    z = np.asarray(z)
    assert np.all(np.abs(np.mean(z, axis=0)) < 0.2)
    assert np.all((0.88 < np.std(z, axis=0)) & (np.std(z, axis=0) < 1.12))


def test_a_rate_steadier_than_the_model_allows_is_reported_conservatively():
    """A constant 20 %/h: the rate's error is well inside its std (the model lets it wander)."""
    z = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        tracked = None
        for k in range(60):
            time_s = 60.0 * k
            value = 1.0 + 0.2 * time_s / HOUR_S + 0.01 * rng.standard_normal()
            tracked = track(tracked, scalars([value], [[1e-4]], names=("b1",)), time_s,
                            DriftSettings([0.05], [0.5]))
        z.append((tracked.rates[0] - 0.2) / tracked.rate_std[0])
    assert abs(np.mean(z)) < 0.2 and 0.3 < np.std(z) < 0.8


def test_what_no_window_determines_stays_undetermined():
    settings = DriftSettings([0.1, 0.1], [0.5, 0.5])
    tracked = None
    for k in range(5):
        tracked = track(tracked, scalars([1.0 + 0.01 * k, 7.0 * k], [[1e-4, 0.0], [0.0, INF]]),
                        600.0 * k, settings)
    assert tracked.estimate.values["b"][0] == 0.0  # the first window's value, never moved
    assert np.isinf(tracked.estimate.std["b"][0])
    assert tracked.rates[1] == 0.0 and tracked.rate_std[1] >= 0.5  # its prior, widened
    assert tracked.rate_std[0] < 0.1 and tracked.rates[0] > 0.0


def test_a_steady_drift_raises_the_alarm_after_its_hold_time_and_no_drift_does_not():
    settings = DriftSettings([0.05], [0.5], alarm_std=3.0)
    alarm_s = 300.0

    def run(rate, seed, windows=240):
        rng = np.random.default_rng(seed)
        tracked, first_alarm = None, None
        for k in range(windows):
            time_s = 5.0 * k
            value = 1.0 + rate * time_s / HOUR_S + 0.01 * rng.standard_normal()
            tracked = track(tracked, scalars([value], [[1e-4]], names=("b1",)), time_s, settings)
            if first_alarm is None and alarms(tracked, alarm_s):
                first_alarm = time_s
        return tracked, first_alarm

    tracked, first_alarm = run(0.2, 0)
    assert alarms(tracked, alarm_s) == ("b1",)
    since = tracked.exceeding_since_s[0]
    assert first_alarm == pytest.approx(since + 300.0, abs=5.0)
    quiet = [run(0.0, seed)[1] for seed in range(20)]
    assert sum(alarm is not None for alarm in quiet) <= 1


def test_time_going_back_predicts_nothing():
    settings = DriftSettings([0.1], [0.5])
    tracked = track(None, scalars([1.0], [[1e-4]], names=("b1",)), 3600.0, settings)
    tracked = track(tracked, scalars([1.1], [[1e-4]], names=("b1",)), 7200.0, settings)
    rate = tracked.rates[0]
    assert 0.05 < rate < 0.15
    value = tracked.estimate.values["b1"][0]
    back = track(tracked, scalars([value], [[1e-4]], names=("b1",)), 10.0, settings)
    # nothing predicted: the value was measured where it stood, so the rate stays
    assert back.rates[0] == pytest.approx(rate, rel=1e-9)
    assert back.time_s == 10.0


def test_a_drifting_tilt_is_tracked_in_its_tangent():
    axis_rate = np.array([0.0, 0.02, -0.01])  # rad/h
    base = np.array([1.0, 0.0, 0.0, 0.0])
    settings = DriftSettings([0.01] * 3, [0.1] * 3)
    tracked = None
    for k in range(20):
        hours = 0.05 * k
        value = quat_multiply(quat_exp(axis_rate * hours), base)
        window = ParameterEstimate(("tilt",), {"tilt": value}, np.eye(3) * 1e-8)
        tracked = track(tracked, window, hours * HOUR_S, settings)
    np.testing.assert_allclose(tracked.rates, axis_rate, atol=1e-5)
    np.testing.assert_allclose(quat_boxminus(tracked.estimate.values["tilt"], value), 0.0,
                               atol=1e-6)


def test_rate_settings_are_relative_to_the_first_nonzero_value_unless_given():
    nominal = {"J": np.array([-2e-3]), "b": np.array([0.0]), "c": np.array([3.0]),
               "d": np.array([0.0]), "tilt": np.eye(4)[0]}
    fused = {"J": np.array([0.0]), "c": np.array([4.0]), "d": np.array([0.0])}
    noise = per_tangent_entry(("J", "b", "c", "d", "tilt"),
                              ("scalar",) * 4 + ("quaternion",), [fused, nominal],
                              relative=0.1, absolute={"b": 5e-4})
    np.testing.assert_allclose(noise, [2e-4, 5e-4, 0.4, 0.1, 0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="positive"):
        DriftSettings([0.1, 0.0], [0.1, 0.1])


def test_the_state_file_round_trips_and_an_estimate_without_rates_loads(tmp_path):
    settings = DriftSettings([0.1, 0.2], [0.5, 0.5])
    tracked = None
    for k in range(4):
        tracked = track(tracked, scalars([1.0 + k, 2.0], np.diag([0.01, 0.04])), 60.0 * k,
                        settings)
    path = tmp_path / "state.yaml"
    save_drifting(path, tracked)
    loaded = load_drifting(path)
    np.testing.assert_array_equal(loaded.rates, tracked.rates)
    np.testing.assert_array_equal(loaded.information, tracked.information)
    np.testing.assert_array_equal(loaded.estimate.covariance, tracked.estimate.covariance)
    assert loaded.time_s == tracked.time_s and loaded.estimate.windows == 4
    np.testing.assert_array_equal(np.isnan(loaded.exceeding_since_s),
                                  np.isnan(tracked.exceeding_since_s))
    assert load_drifting(tmp_path / "missing.yaml") is None

    plain = tmp_path / "plain.yaml"
    save_estimate(plain, scalars([1.0, 2.0], np.diag([0.01, 0.04])))
    old = load_drifting(plain)
    assert math.isnan(old.time_s) and np.all(np.isinf(old.rate_std))
    later = track(old, scalars([1.5, 2.0], np.diag([0.01, 0.04])), 100.0, settings)
    assert later.time_s == 100.0 and later.estimate.values["a"][0] == pytest.approx(1.25)
    np.testing.assert_allclose(later.rate_std, [0.5, 0.5])  # the prior: no time has passed

    text = path.read_text().replace("rates_per_hour", "rates")
    path.write_text(text)
    with pytest.raises(ValueError, match="corrupt parameter estimate file: drift"):
        load_drifting(path)


def test_random_undetermined_directions_never_produce_non_finite_values():
    rng = np.random.default_rng(5)
    settings = DriftSettings(np.full(4, 0.3), np.ones(4))
    tracked = None
    for k in range(200):
        tracked = track(tracked, window_with_undetermined_directions(rng), 5.0 * k, settings)
        assert all(np.all(np.isfinite(v)) for v in tracked.estimate.values.values())
        assert np.all(np.isfinite(tracked.rates))
        assert not np.any(np.isnan(tracked.estimate.covariance))


def test_overlapping_windows_count_each_sample_once():
    """Windows half over each other: two of them hold one window's data, and fuse so."""
    import dataclasses

    from mb_estimation.config import load_config
    from mb_estimation.config.overrides import with_node_values
    from mb_estimation.online.windows import with_window

    base = load_config("furuta_synthetic")
    window = ParameterEstimate(("b1",), {"b1": np.array([1e-3])}, np.array([[1e-10]]))

    def fused_variance(stride_s):
        config = with_node_values(base, {"window_s": 5.0, "stride_s": stride_s,
                                         "buffer_s": 15.0}, source="test")
        first = with_window(config, None, window, 0.0)
        second = with_window(config, first, dataclasses.replace(window), 1e-9)
        return float(second.estimate.covariance[0, 0])

    assert fused_variance(5.0) == pytest.approx(0.5e-10, rel=1e-6)  # two windows' data
    assert fused_variance(2.5) == pytest.approx(1e-10, rel=1e-6)  # one window's data, twice
    assert fused_variance(10.0) == pytest.approx(0.5e-10, rel=1e-6)  # gaps: each counts whole
