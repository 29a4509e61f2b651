"""Each recording's own fit against the others': Cochran's Q on linear models of known answer.

For a linear model one Gauss–Newton step is exact, so a recording's own fit read from its share
of the pooled normal equations is its least-squares fit alone.
"""

import numpy as np
import pytest
from scipy.stats import chi2

from mb_estimation.estimation.agreement import (
    DISAGREEMENT_P,
    RecordingShare,
    agreements,
    ratio_agreements,
)

NOISE = 0.1


def _shares(truths, rng, count=400, blind=None):
    """Recordings ``y_r = X_r θ_r + e`` (one truth each), fitted together.

    Returns the pooled values and each recording's share at them (its ``X_r``; ``blind``: the
    column a recording's design leaves at zero).
    """
    designs = []
    for index, _ in enumerate(truths):
        design = np.column_stack([np.ones(count), rng.standard_normal(count)])
        if blind is not None and index == blind[0]:
            design[:, blind[1]] = 0.0
        designs.append(design)
    data = [x @ np.asarray(t) + NOISE * rng.standard_normal(count)
            for x, t in zip(designs, truths, strict=True)]
    pooled = np.linalg.solve(sum(x.T @ x for x in designs),
                             sum(x.T @ y for x, y in zip(designs, data, strict=True)))
    shares = []
    for x, y in zip(designs, data, strict=True):
        residual = x @ pooled - y  # model minus data, as the fits' residuals
        shares.append(RecordingShare(x.T @ x, NOISE**2 * x.T @ x, NOISE**2 * x.T @ x,
                                     x.T @ residual))
    return pooled, designs, data, shares


def _agreements(pooled, shares):
    return agreements({"a": pooled[0], "b": pooled[1]}, {"a": 0, "b": 1},
                      [f"r{i}" for i in range(len(shares))], shares, correlated=False)


def test_a_recordings_own_fit_is_its_least_squares_fit_alone():
    pooled, designs, data, shares = _shares([(1.0, 2.0), (1.0, 2.0), (1.0, 2.0)],
                                            np.random.default_rng(1))
    for x, y, share in zip(designs, data, shares, strict=True):
        change, covariance = share.own_fit(correlated=False)
        np.testing.assert_allclose(pooled + change, np.linalg.lstsq(x, y, rcond=None)[0],
                                   rtol=1e-10)
        np.testing.assert_allclose(covariance, NOISE**2 * np.linalg.inv(x.T @ x), rtol=1e-10)


def test_recordings_of_one_truth_agree_at_the_rate_chi_square_says():
    """Over many draws of three recordings of one truth, Q is χ² on 2.

    A disagreement is called about as rarely as DISAGREEMENT_P says.
    """
    rng = np.random.default_rng(2)
    q_values, called = [], 0
    for _ in range(400):
        pooled, _, _, shares = _shares([(1.0, 2.0)] * 3, rng, count=100)
        for row in _agreements(pooled, shares):
            q_values.append(row.chi_square)
            assert row.dof == 2
            called += not row.agree
    assert abs(np.mean(q_values) - 2.0) < 0.2  # χ² on 2 has mean 2
    assert np.mean(np.array(q_values) > chi2.isf(0.05, 2)) == pytest.approx(0.05, abs=0.02)
    assert called <= 3  # 800 comparisons at p < 1e-3: about one


def test_recordings_of_different_truths_disagree_and_the_std_scales_to_their_spread():
    pooled, designs, data, shares = _shares([(1.0, 2.0), (1.0, 2.5)],
                                            np.random.default_rng(3))
    by_name = {row.name: row for row in _agreements(pooled, shares)}
    slope = by_name["b"]
    own = [np.linalg.lstsq(x, y, rcond=None)[0][1] for x, y in zip(designs, data, strict=True)]
    np.testing.assert_allclose(slope.values, own, rtol=1e-10)
    weights = 1.0 / np.square(slope.std)
    mean = np.sum(weights * own) / np.sum(weights)
    assert slope.chi_square == pytest.approx(np.sum(weights * (np.array(own) - mean) ** 2))
    assert not slope.agree and slope.p_value < DISAGREEMENT_P
    assert slope.scale == pytest.approx(np.sqrt(slope.chi_square / slope.dof))
    assert "b: " in str(slope) and "(r0)" in str(slope) and "χ² = " in str(slope)
    assert by_name["a"].agree and by_name["a"].scale == 1.0


def test_a_recording_that_determines_nothing_of_a_parameter_is_left_out_of_its_comparison():
    pooled, _, _, shares = _shares([(1.0, 2.0), (1.0, 2.0), (1.0, 2.0)],
                                   np.random.default_rng(4), blind=(0, 1))
    by_name = {row.name: row for row in _agreements(pooled, shares)}
    assert by_name["b"].recordings == ("r1", "r2") and by_name["b"].dof == 1
    assert by_name["a"].recordings == ("r0", "r1", "r2")
    # one recording alone is no comparison
    pooled, _, _, shares = _shares([(1.0, 2.0), (1.0, 2.0)], np.random.default_rng(5),
                                   blind=(0, 1))
    assert [row.name for row in _agreements(pooled, shares)] == ["a"]


def test_an_own_fit_outside_the_parameters_bounds_determines_nothing():
    """A recording whose one step from the pooled values leaves the box (a negative inertia)."""
    pooled, _, _, shares = _shares([(1.0, 2.0), (1.0, 2.0), (1.0, -3.0)],
                                   np.random.default_rng(7))
    names = [f"r{i}" for i in range(3)]
    values, rows = {"a": pooled[0], "b": pooled[1]}, {"a": 0, "b": 1}
    unbounded = {row.name: row for row in agreements(values, rows, names, shares, False)}
    assert unbounded["b"].recordings == ("r0", "r1", "r2") and not unbounded["b"].agree
    bounded = {row.name: row for row in agreements(values, rows, names, shares, False,
                                                   bounds={"b": (1e-12, np.inf)})}
    assert bounded["b"].recordings == ("r0", "r1") and bounded["b"].agree
    assert bounded["a"].recordings == ("r0", "r1", "r2")


def _ratio_agreements(pooled, shares):
    return ratio_agreements([("a/b", "a", "b", 1.0)], {"a": pooled[0], "b": pooled[1]},
                            {"a": 0, "b": 1}, [f"r{i}" for i in range(len(shares))], shares,
                            correlated=False)


def test_recordings_that_differ_in_scale_agree_on_the_ratio_they_share():
    """Like steps at other speeds: each asks for another scale, all for one ratio."""
    pooled, designs, data, shares = _shares([(1.0, 2.0), (2.0, 4.0), (1.5, 3.0)],
                                            np.random.default_rng(6))
    assert not any(row.agree for row in _agreements(pooled, shares))
    (ratio,) = _ratio_agreements(pooled, shares)
    assert ratio.agree and ratio.dof == 2
    for x, y, own, std in zip(designs, data, ratio.values, ratio.std, strict=True):
        fitted = np.linalg.lstsq(x, y, rcond=None)[0]
        covariance = NOISE**2 * np.linalg.inv(x.T @ x)
        assert own == pytest.approx(fitted[0] / fitted[1], rel=1e-10)
        gradient = np.array([1.0 / fitted[1], -fitted[0] / fitted[1] ** 2])
        assert std == pytest.approx(np.sqrt(gradient @ covariance @ gradient), rel=1e-10)
    pooled, _, _, shares = _shares([(1.0, 2.0), (1.0, 4.0)], np.random.default_rng(7))
    (ratio,) = _ratio_agreements(pooled, shares)
    assert not ratio.agree


def test_a_recording_silent_on_a_parameter_takes_no_part_whatever_its_own_fit_reads():
    """Like a free swing's held arm: its residuals read a value, but it is the hand's."""
    pooled, _, _, shares = _shares([(1.0, 2.0), (1.0, 2.0), (1.0, 5.0)],
                                   np.random.default_rng(8))
    values, rows, names = {"a": pooled[0], "b": pooled[1]}, {"a": 0, "b": 1}, ["r0", "r1", "r2"]
    heard = {row.name: row for row in agreements(values, rows, names, shares, False)}
    assert not heard["b"].agree  # r2's b is another truth
    quiet = {row.name: row for row in agreements(values, rows, names, shares, False,
                                                 [frozenset(), frozenset(), {"b"}])}
    assert quiet["b"].recordings == ("r0", "r1") and quiet["b"].agree
    assert quiet["a"].recordings == ("r0", "r1", "r2")
    ratios = ratio_agreements([("a/b", "a", "b", 1.0)], values, rows, names, shares, False,
                              [frozenset(), frozenset(), {"b"}])
    assert [row.recordings for row in ratios] == [("r0", "r1")]


def test_a_recording_holding_the_arm_is_silent_on_the_arms_parameters_only():
    from pathlib import Path

    from mb_estimation.assess import held_joints_parameters
    from mb_estimation.config import load_config
    from mb_estimation.setup import set_up
    from mb_estimation.signals import Recording

    time_s = np.arange(0.0, 4.0, 0.002)
    noise = np.random.default_rng(9).normal(0.0, 4e-4, (len(time_s), 2))
    swing = np.column_stack([np.full_like(time_s, 0.3), 1.2 * np.cos(6.0 * time_s)]) + noise
    spin = np.column_stack([3.0 * time_s, 0.5 * np.sin(6.0 * time_s)]) + noise
    unforced = (np.array([0.0]), np.array([[0.0]]))
    config = load_config(Path(__file__).resolve().parents[1] / "config" / "examples"
                         / "odrive_furuta.yaml")
    setup = set_up(config, [Recording("swing", time_s, swing, *unforced),
                            Recording("spin", time_s, spin, *unforced)])
    held, moving = held_joints_parameters(setup)
    assert {"J_Azz", "K", "b1", "J_shaft", "mu1", "encoder_offset1", "ripple_cos1"} <= held
    assert not held & {"J_Byy", "b2", "J_Bxx", "J_Bzz", "m_B", "l2"}
    assert moving == frozenset()
