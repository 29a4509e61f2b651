"""Steady drives: found where a held input spins the arm steadily, and the law they must obey.

Hand-built recordings only (no fit, no simulator): the arm's angle written from a spin-up to a
steady speed with an 8-per-revolution ripple and encoder-like noise, the input a step.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mb_estimation.config import load_config
from mb_estimation.setup import set_up
from mb_estimation.signals import Recording
from mb_estimation.signals.steady import (
    CONFLICT_FACTOR,
    SteadyDrive,
    drive_conflicts,
    drive_groups,
    drives_note,
    steady_drive,
)

RATE_HZ = 500.0
EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "examples" / "odrive_furuta.yaml"


def _step_recording(name, command, speed_rad_s, *, duration_s=5.0, step_at_s=0.5,
                    time_constant_s=0.2, seed=0) -> Recording:
    """The arm spun up by a command step to ``speed_rad_s``; the pendulum swinging a little."""
    rng = np.random.default_rng(seed)
    time_s = np.arange(0.0, duration_s, 1.0 / RATE_HZ)
    after = np.maximum(time_s - step_at_s, 0.0)
    arm = speed_rad_s * (after - time_constant_s * (1.0 - np.exp(-after / time_constant_s)))
    arm = arm + 0.01 * np.sin(8.0 * arm) + rng.normal(0.0, 4e-4, time_s.shape)
    pendulum = 0.3 * np.sin(2 * np.pi * 1.5 * time_s) + rng.normal(0.0, 4e-4, time_s.shape)
    return Recording(name, time_s, np.column_stack([arm, pendulum]),
                     np.array([0.0, step_at_s]), np.array([[0.0], [command]]))


def _setup(*recordings):
    return set_up(load_config(EXAMPLE), recordings)


def test_a_step_response_has_its_steady_drive_and_a_free_swing_or_a_sine_none():
    setup = _setup(_step_recording("step", 2.0, 7.4))
    (drive,) = setup.steady_drives
    assert drive.input == 2.0
    assert drive.speed_rad_s == pytest.approx(7.4, rel=2e-3)
    assert drive.speed_per_input == pytest.approx(3.7, rel=2e-3)

    grid = setup.grids[0]
    unforced = dataclasses.replace(grid, inputs=np.zeros_like(grid.inputs))
    assert steady_drive(unforced, 0, 0) is None
    sine = np.sin(2 * np.pi * np.asarray(grid.time_s[:-1]))[:, None]
    assert steady_drive(dataclasses.replace(grid, inputs=sine), 0, 0) is None
    stalled = np.asarray(grid.measured_angles).copy()
    stalled[:, 0] = 0.01 * np.sin(np.asarray(grid.time_s))  # held against a stop
    assert steady_drive(dataclasses.replace(grid, measured_angles=stalled), 0, 0) is None


def test_a_drive_still_speeding_up_is_not_steady():
    setup = _setup(_step_recording("slow", 2.0, 7.4, time_constant_s=3.0))
    assert setup.steady_drives == ()


@settings(max_examples=60, deadline=None)
@given(gain=st.floats(1e-3, 10.0), viscous=st.floats(1e-4, 1.0), dry_share=st.floats(0.0, 0.9),
       speeds=st.lists(st.floats(1.0, 60.0), min_size=2, max_size=8))
def test_drives_that_obey_one_gain_and_friction_growing_with_speed_never_conflict(
        gain, viscous, dry_share, speeds):
    # K u = c + b ω, the dry part c up to 90 % of the torque at the slowest speed
    dry = dry_share / (1.0 - dry_share) * viscous * min(speeds)
    drives = [SteadyDrive(f"r{i}", (dry + viscous * speed) / gain, speed, 2.0)
              for i, speed in enumerate(speeds)]
    assert drive_conflicts(drives) == ()
    assert drives_note(drives) is None


def test_a_group_of_recordings_in_another_unit_is_named_with_both_groups():
    volts = [SteadyDrive(f"{u:g}V.csv", u, 3.7 * u, 2.0) for u in (2.0, 3.0, 4.0, 5.0)]
    tenths = [SteadyDrive("01.csv", 0.1, 3.86, 5.0), SteadyDrive("0575.csv", 0.575, 21.8, 5.0)]
    conflicts = drive_conflicts(volts + tenths)
    assert conflicts and conflicts[0].factor > 5.0
    assert [len(group) for group in drive_groups(volts + tenths)] == [4, 2]
    note = drives_note(volts + tenths)
    assert "01.csv turns slower" in note
    assert "2V.csv, 3V.csv, 4V.csv, 5V.csv 3.7; 01.csv, 0575.csv 37.9–38.6" in note


def test_departures_from_the_law_within_its_factor_are_not_a_conflict():
    # a driver that saturates at top speed: 6 units give 19.7 rad/s where 5 give 19
    drives = [SteadyDrive("5V", 5.0, 19.0, 2.0), SteadyDrive("6V", 6.0, 19.7, 1.0)]
    assert drive_conflicts(drives) == ()
    twice = [SteadyDrive("a", 1.0, 2.0, 2.0), SteadyDrive("b", 1.0 / (CONFLICT_FACTOR + 0.1),
                                                          2.1, 2.0)]
    assert drive_conflicts(twice)


def test_the_setup_says_where_its_recordings_steady_drives_disagree_before_the_fit(capsys):
    from mb_estimation.cli.printing import print_set_up

    setup = _setup(_step_recording("volts.csv", 2.0, 7.4),
                   _step_recording("tenths.csv", 0.1, 3.9, seed=1))
    assert "tenths.csv turns slower" in setup.drives_conflict
    print_set_up(setup)
    assert capsys.readouterr().out.startswith("warning: the recordings' steady drives disagree")
    agreeing = _setup(_step_recording("volts.csv", 2.0, 7.4),
                      _step_recording("more.csv", 4.0, 15.1, seed=1))
    assert agreeing.drives_conflict is None and len(agreeing.steady_drives) == 2
    print_set_up(agreeing)
    assert capsys.readouterr().out == ""
