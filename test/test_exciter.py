"""The exciter's rules without ROS: what it plays, and every way it stops with a zero input.

The rclpy node around it (its topics, ``~/stop``, the timing of the zero on a real executor)
is tested in test_ros_exciter.py.
"""

import math

import numpy as np
import pytest
import yaml

from mb_estimation.errors import UserError
from mb_estimation.online.exciter import (
    DONE,
    PLAYING,
    STOPPED,
    WAITING,
    ExcitationRun,
    Exciter,
    excitation_run,
)

RATE = 100.0
INPUTS = 0.5 * np.sin(2 * np.pi * 0.7 * np.arange(400) / RATE + 1.0)  # 4 s, nonzero start


def _run(**limits):
    return ExcitationRun(INPUTS, rate_hz=RATE, max_input=limits.pop("max_input", 1.0),
                         **limits)


def _started(run, at=10.0, arm=0.3):
    """An exciter that got its first joint state at ``at`` (arrival and stamp alike)."""
    exciter = Exciter(run)
    assert exciter.state == WAITING and exciter.tick(at - 1.0) == 0.0
    assert exciter.joint_state(at, at, arm, 0.0) == run.played()[0]
    assert exciter.state == PLAYING and exciter.tick(at) is None
    return exciter


def test_the_input_fades_in_and_out_and_stays_within_its_bound():
    played = _run(ramp_s=0.5, max_input=0.4).played()
    assert len(played) == len(INPUTS)
    assert abs(played[0]) < 0.01 * abs(INPUTS[0]) and abs(played[-1]) < 0.01 * abs(INPUTS[-1])
    middle = slice(50, 350)
    np.testing.assert_array_equal(played[middle], np.clip(INPUTS[middle], -0.4, 0.4))
    assert np.max(np.abs(played)) <= 0.4
    assert np.max(np.abs(np.diff(played))) < 0.05  # no step on the motor
    np.testing.assert_array_equal(_run(ramp_s=0.0).played(), INPUTS)


def test_an_input_faded_as_excite_fades_its_design_plays_unchanged():
    """The exciter bounds what it plays by the fade, so excite's faded design is not faded twice."""
    from mb_estimation.fade import fade

    faded = INPUTS * fade(len(INPUTS), RATE, 0.5)
    np.testing.assert_array_equal(ExcitationRun(faded, rate_hz=RATE, max_input=0.5,
                                                ramp_s=0.5).played(), faded)
    assert faded[0] == pytest.approx(INPUTS[0] * math.sin(math.pi / 200) ** 2)


def test_each_joint_state_is_answered_with_its_samples_input_by_its_stamp():
    exciter = _started(_run(ramp_s=0.0))
    for sample in (1, 2, 137, 399):
        stamp = 10.0 + sample / RATE
        arrival = stamp + 0.003 * (-1) ** sample  # late or early on the monotonic clock
        assert exciter.joint_state(arrival, stamp, 0.3, 0.0) == INPUTS[sample]
    assert exciter.joint_state(14.0, 10.0 + 400 / RATE, 0.3, 0.0) == 0.0
    assert exciter.state == DONE and exciter.tick(14.05) == 0.0
    assert exciter.joint_state(14.01, 14.01, 0.3, 0.0) == 0.0


def test_a_faster_rig_gets_each_sample_held_until_the_next():
    exciter = _started(_run(ramp_s=0.0))
    answers = [exciter.joint_state(10.0 + k / 500, 10.0 + k / 500, 0.3, 0.0) for k in range(20)]
    np.testing.assert_array_equal(answers, np.repeat(INPUTS[:4], 5))


@pytest.mark.parametrize("event, reason", [
    (lambda e: e.joint_state(10.5, 10.5, 0.3 + 1.01, 0.0), "the arm left its limit"),
    (lambda e: e.joint_state(10.5, 10.5, 0.3 - 1.01, 0.0), "the arm left its limit"),
    (lambda e: e.joint_state(10.5, 10.5, 0.3, -5.1), "the arm turned at 5.1"),
    (lambda e: e.joint_state(10.5, 10.5, math.nan, 0.0), "not finite"),
    (lambda e: e.joint_state(10.5, 10.5, 0.3, math.inf), "not finite"),
    (lambda e: e.joint_state(10.5, 10.5, 0.3, 0.0, finite=False), "not finite"),
    (lambda e: (e.stop("stopped on ~/stop"), 0.0)[1], "~/stop"),
], ids=["arm+", "arm-", "rate", "nan angle", "inf rate", "other joint", "stop"])
def test_a_breach_stops_it_for_good_at_once(event, reason):
    exciter = _started(_run(max_arm_rad=1.0, max_arm_rate=5.0))
    assert exciter.joint_state(10.45, 10.45, 0.3, 0.0) != 0.0
    assert event(exciter) == 0.0  # the answer to the breach itself
    assert exciter.state == STOPPED and reason in exciter.reason
    for now in (10.51, 10.6, 11.0):
        assert exciter.joint_state(now, now, 0.3, 0.0) == 0.0
        assert exciter.tick(now) == 0.0
    assert exciter.stop("again") is False and reason in exciter.reason


def test_within_its_limits_it_keeps_playing_and_keeps_the_peaks():
    exciter = _started(_run(max_arm_rad=1.0, max_arm_rate=5.0))
    assert exciter.joint_state(10.5, 10.5, 0.3 + 0.99, -4.9) != 0.0
    assert exciter.joint_state(10.6, 10.6, 0.3 - 0.5, None) != 0.0  # no velocity sent
    assert exciter.state == PLAYING
    assert exciter.arm_peak_rad == pytest.approx(0.99) and exciter.arm_rate_peak == 4.9


def test_a_lost_joint_state_stream_stops_it_at_the_first_tick_past_the_timeout():
    exciter = _started(_run(timeout_s=0.1))
    exciter.joint_state(11.0, 11.0, 0.3, 0.0)
    assert exciter.tick(11.1) is None and exciter.state == PLAYING
    assert exciter.tick(11.1 + 1.0 / RATE) == 0.0
    assert exciter.state == STOPPED and "no joint state for" in exciter.reason


def test_without_joint_states_it_never_starts():
    exciter = Exciter(_run())
    for now in np.arange(0.0, 5.0, 0.01):
        assert exciter.tick(now) == 0.0
    assert exciter.state == WAITING


@pytest.mark.parametrize("settings, message", [
    ({"inputs": [0.1]}, "two finite samples"),
    ({"inputs": [0.1, math.nan]}, "two finite samples"),
    ({"rate_hz": 0.0}, "rate_hz must be"),
    ({"max_input": -1.0}, "max_input must be"),
    ({"max_arm_rad": 0.0}, "max_arm_rad must be"),
    ({"timeout_s": math.inf}, "timeout_s must be"),
    ({"ramp_s": -0.1}, "ramp_s must be"),
])
def test_a_run_that_cannot_be_played_is_refused_in_one_line(settings, message):
    arguments = {"inputs": INPUTS, "rate_hz": RATE, "max_input": 1.0, **settings}
    with pytest.raises(ValueError, match=message) as raised:
        ExcitationRun(**arguments)
    assert "\n" not in str(raised.value)


def _write(folder, limits=None):
    csv = folder / "excitation.csv"
    csv.write_text("time_s,input\n" + "".join(
        f"{k / RATE!r},{u!r}\n" for k, u in enumerate(INPUTS.tolist())))
    if limits is not None:
        (folder / "excitation.yaml").write_text(yaml.safe_dump({"limits": limits}))
    return csv


def test_the_files_limits_apply_unless_given(tmp_path):
    csv = _write(tmp_path, {"max_input": 0.6, "max_arm_rad": 1.5, "max_arm_rate_rad_s": None})
    run = excitation_run(csv)
    assert (run.rate_hz, run.max_input, run.max_arm_rad, run.max_arm_rate) == \
        (pytest.approx(RATE), 0.6, 1.5, None)
    np.testing.assert_array_equal(run.inputs, INPUTS)
    given = excitation_run(csv, max_input=0.3, max_arm_rate=8.0, ramp_s=1.0, timeout_s=0.2)
    assert (given.max_input, given.max_arm_rad, given.max_arm_rate, given.ramp_s,
            given.timeout_s) == (0.3, 1.5, 8.0, 1.0, 0.2)
    (tmp_path / "excitation.yaml").unlink()
    alone = excitation_run(csv)
    assert alone.max_input == pytest.approx(np.max(np.abs(INPUTS)))
    assert alone.max_arm_rad is None and alone.max_arm_rate is None
    (tmp_path / "excitation.yaml").write_text("limits: [unclosed")
    with pytest.raises(UserError, match="excitation.yaml: cannot read its limits"):
        excitation_run(csv)
