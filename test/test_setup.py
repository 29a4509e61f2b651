"""Setting a calibration up: a joint a recording holds still is found, said and held (no fit).

A recording in which a joint does not move (a free swing with the arm held by hand) has that
joint held still at its median angle on every grid, with one note; a joint left free, or
moved, is not held; a recording in which nothing moves, or a held joint on compliant hinges
or under the paper's estimator (which cannot hold it), fails before any fit.
"""

from __future__ import annotations

import numpy as np
import pytest

from mb_estimation.config import apply_overrides, load_config
from mb_estimation.errors import RecordingError
from mb_estimation.setup import locked_joints, set_up
from mb_estimation.signals import Recording

RATE_HZ = 500.0


def _recording(arm, pendulum, name="swing"):
    """Joint angles at 500 Hz from ``arm(t)`` and ``pendulum(t)`` [rad], no input."""
    time_s = np.arange(0.0, 4.0, 1.0 / RATE_HZ)
    angles = np.stack([arm(time_s), pendulum(time_s)], axis=1)
    return Recording(name, time_s, angles, np.array([0.0]), np.zeros((1, 1)))


def _swinging(time_s):
    return 0.8 * np.exp(-0.1 * time_s) * np.cos(2 * np.pi * 0.9 * time_s)


def _by_hand(time_s):
    """An arm held by hand: 3 mrad of slow wobble, read by an 8192-count encoder."""
    quantum = 2 * np.pi / 8192
    return 0.2356 + quantum * np.round(3e-3 * np.sin(2 * np.pi * 0.3 * time_s) / quantum)


@pytest.fixture(scope="module")
def rigid():
    return apply_overrides(load_config("furuta_synthetic"), hinges="rigid",
                           free=["J_Byy", "b2"])


def test_an_arm_held_by_hand_is_held_still_at_its_median_angle(rigid):
    setup = set_up(rigid, [_recording(_by_hand, _swinging)])
    for grids in setup.level_grids:
        (grid,) = grids
        assert grid.locked == (True, False)
        np.testing.assert_array_equal(grid.locked_mask, [1.0, 0.0])
        arm = grid.measured_angles[:, 0]
        assert np.all(arm == np.median(_by_hand(np.arange(0.0, 4.0, 1 / RATE_HZ))))
        np.testing.assert_array_equal(grid.filtered_angles[:, 0], arm)
        assert np.ptp(grid.measured_angles[:, 1]) > 1.0  # the pendulum as it was
    (note,) = [note for note in setup.notes if "held still" in note]
    assert note.startswith("swing: the arm (it spans 0.0061 rad) does not move: fitted as "
                           "held still at its median angle"), note


def test_joints_that_move_are_not_held():
    rng = np.random.default_rng(0)
    time_s = np.arange(0.0, 4.0, 1.0 / RATE_HZ)
    noise = 1e-3 * rng.standard_normal((len(time_s), 2))
    config = load_config("furuta_synthetic")
    (grid,) = set_up(config, [Recording("moving", time_s, np.stack(
        [0.3 * np.sin(time_s), _swinging(time_s)], axis=1) + noise, np.array([0.0]),
        np.zeros((1, 1)))]).grids
    assert locked_joints(grid) == (False, False) and grid.locked == ()
    # a still arm read with 1e-3 rad of noise is still: a few times the noise is no motion
    (still,) = set_up(apply_overrides(config, hinges="rigid"), [Recording(
        "still", time_s, np.stack([noise[:, 0], _swinging(time_s)], axis=1), np.array([0.0]),
        np.zeros((1, 1)))]).grids
    assert still.locked == (True, False)


@pytest.mark.parametrize(("options", "message"), [
    ({}, r"swing: the arm \(it spans 0.0061 rad\) does not move; a joint held still is fitted "
         r"on rigid hinges by the default estimator only"),
    ({"hinges": "rigid", "estimator": "paper"}, r"fitted on rigid hinges by the default "
                                                r"estimator only"),
])
def test_a_held_joint_the_fit_cannot_hold_fails_before_it(options, message):
    config = load_config("furuta_synthetic")  # compliant hinges
    config = apply_overrides(config, **options)
    with pytest.raises(RecordingError, match=message):
        set_up(config, [_recording(_by_hand, _swinging)])


def test_small_motions_of_both_joints_are_motion(rigid):
    """A centimetre-radian of both joints (a quiet stretch of a driven rig): nothing is held."""
    (grid,) = set_up(rigid, [_recording(lambda t: 0.006 * np.sin(3 * t),
                                        lambda t: 0.006 * np.cos(3 * t))]).grids
    assert locked_joints(grid) == (False, False)


def test_a_recording_in_which_nothing_moves_fails_before_the_fit(rigid):
    rng = np.random.default_rng(1)
    with pytest.raises(RecordingError, match=r"still: no joint moves \(the arm \(it spans "
                                             r"0.0\d+ rad\), the pendulum \(it spans 0 rad\)\)"):
        set_up(rigid, [_recording(lambda t: 1e-3 * rng.standard_normal(len(t)),
                                  np.zeros_like, name="still")])
