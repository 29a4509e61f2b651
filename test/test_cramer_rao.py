"""The Cramér–Rao bound's algebra on a toy with a closed form, and its undetermined cases.

The toy is a straight-line-and-parabola fit with an unknown offset: ``y_k = a t_k + b t_k² + c
+ e_k``, ``e_k`` white with std σ. Its Fisher information is ``XᵀX/σ²`` with the columns
``X = [t, t², 1]``, and the bound on ``(a, b)`` with ``c`` a nuisance is the ``(a, b)`` block of
``σ² (XᵀX)⁻¹`` — the full inverse, a route the module (which eliminates ``c`` by a Schur
complement) does not take.
"""

import numpy as np
import pytest

from mb_estimation.cramer_rao import (
    FOLLOWED_AMPLIFICATION,
    CramerRao,
    covariance_of,
    eliminated_information,
)

SIGMA = 0.01


def _columns(n=200):
    t = np.linspace(-1.0, 2.0, n)
    return np.stack([t, t**2, np.ones(n)], axis=1)


def test_the_bound_on_two_parameters_is_the_block_of_the_full_inverse():
    columns = _columns()
    information = eliminated_information(columns / SIGMA, 2)
    expected = SIGMA**2 * np.linalg.inv(columns.T @ columns)[:2, :2]
    np.testing.assert_allclose(covariance_of(information), expected, rtol=1e-9)
    # the nuisance costs precision: the bound is wider than with c known
    known = SIGMA**2 * np.linalg.inv(columns[:, :2].T @ columns[:, :2])
    assert np.all(np.diag(expected) > np.diag(known))


def test_the_bound_falls_with_the_square_root_of_the_samples():
    few = covariance_of(eliminated_information(_columns(100) / SIGMA, 2))
    many = covariance_of(eliminated_information(_columns(400) / SIGMA, 2))
    np.testing.assert_allclose(np.sqrt(np.diag(few) / np.diag(many)), 2.0, rtol=0.02)


def test_a_parameter_the_data_hold_nothing_of_is_infinitely_uncertain():
    columns = _columns()
    columns[:, 1] = 0.0  # b acts nowhere
    covariance = covariance_of(eliminated_information(columns / SIGMA, 2))
    assert np.isinf(covariance[1, 1])
    assert covariance[0, 0] == pytest.approx(
        SIGMA**2 * np.linalg.inv(columns[:, [0, 2]].T @ columns[:, [0, 2]])[0, 0], rel=1e-9)


def test_parameters_the_data_see_only_together_are_both_undetermined():
    columns = _columns()
    columns[:, 1] = 2.0 * columns[:, 0]  # a and b act alike: only a + 2 b shows
    covariance = covariance_of(eliminated_information(columns / SIGMA, 2))
    assert np.isinf(covariance[0, 0]) and np.isinf(covariance[1, 1])


def test_a_motion_followed_in_segments_only_gives_no_bound_to_judge_by():
    # 60 s of the §4.7 multisine amplify a start change 6e4-fold: its whole-motion bound's
    # sensitivities outgrow float64 and marked well-determined values "not determined"
    columns = _columns()
    information = eliminated_information(columns / SIGMA, 2)
    covariance = covariance_of(information)
    std = {"a": float(np.sqrt(covariance[0, 0])), "b": float(np.sqrt(covariance[1, 1]))}

    def bound(amplification):
        return CramerRao(("a", "b"), covariance, std, information, amplification)

    assert bound(43.0).followed and bound(FOLLOWED_AMPLIFICATION).followed
    assert not bound(6.2e4).followed and not bound(1.01 * FOLLOWED_AMPLIFICATION).followed
