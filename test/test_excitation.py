"""Experiment design: a multisine whose predicted worst relative std beats the plain one's.

The design on the §4.7 rig (its rigid model) within the input bound, with the arm's limits
met or refused in one line, the bound's sensitivities it evaluates with equal to central
differences of the replay, and the ``excite`` command's files.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from mb_estimation.cli import main
from mb_estimation.config import apply_overrides, load_config
from mb_estimation.cramer_rao import FOLLOWED_AMPLIFICATION, cramer_rao_bound
from mb_estimation.errors import SimulationError
from mb_estimation.excitation import (
    ARM_LIMIT_SHARE,
    EXCITATION_FREQUENCIES_HZ,
    EXPERIMENT_AMPLIFICATION,
    SCALE_AIM,
    SCALE_TRIALS,
    SMALLEST_SCALE,
    Limits,
    Response,
    _against_goals,
    _overshoot,
    _scale_within,
    design_excitation,
    design_grid,
    evolution_strategy,
)
from mb_estimation.fade import RAMP_S
from mb_estimation.multisines import at_peak, low_crest_phases, multisine, schroeder_phases
from mb_estimation.online.exciter import excitation_run
from mb_estimation.report.excitation import (
    excitation_document,
    excitation_figure,
    multisine_input,
)
from mb_estimation.scenarios import MULTISINE_FREQUENCIES_HZ
from mb_estimation.setup import rig_of
from mb_estimation.validation import recording_sensitivities, rigid_replay, rigid_systems

FREE = ("J_Azz", "J_Byy", "b1", "b2")
BOUND = 0.4  # the multisine scenario's peak over 8 s on this rig (K = 1) [V]


@pytest.fixture(scope="module")
def rig_and_values():
    config = load_config("furuta_synthetic")
    return rig_of(config), config.parameters


def _design(rig_and_values, limits, evaluations, progress=None):
    rig, values = rig_and_values
    return design_excitation(rig, values, FREE, duration_s=3.0, rate_hz=200.0, limits=limits,
                             start=np.zeros(4), max_evaluations=evaluations, progress=progress)


def test_the_design_beats_the_multisine_at_the_same_bound(rig_and_values):
    design = _design(rig_and_values, Limits(BOUND), 20)
    assert design.evaluations == 20
    assert np.max(np.abs(design.inputs)) <= BOUND
    assert design.scale == BOUND and design.multisine_scale == BOUND
    assert design.time_s[-1] == pytest.approx(3.0) and len(design.inputs) == 601
    assert design.design.worst_relative_std < design.multisine.worst_relative_std
    assert design.design.amplification <= EXPERIMENT_AMPLIFICATION < FOLLOWED_AMPLIFICATION
    _, values = rig_and_values
    relative = {name: std / abs(float(values[name])) for name, std in design.design.std.items()}
    assert max(relative.values()) == pytest.approx(design.design.worst_relative_std)
    # the input is the multisine of the design's amplitudes and low-crest phases at the bound,
    # faded in and out over the exciter's ramp (as it plays it), held between samples
    np.testing.assert_array_equal(design.phases, low_crest_phases(
        design.amplitudes, EXCITATION_FREQUENCIES_HZ, 3.0))
    expected = at_peak(multisine(design.time_s, design.amplitudes, EXCITATION_FREQUENCIES_HZ,
                                 design.phases), BOUND)
    ramp = int(RAMP_S * 200.0)
    np.testing.assert_allclose(design.inputs[ramp:-ramp], expected[ramp:-ramp], rtol=0,
                               atol=1e-15)
    assert abs(design.inputs[0]) < 1e-3 * BOUND and abs(design.inputs[-1]) < 1e-3 * BOUND


def test_the_search_lowers_a_criterion_and_the_same_seed_draws_the_same_points():
    def run(seed):
        seen = []

        def criterion(point):
            seen.append(point)
            return float(np.sum((point - 0.3) ** 2))

        evolution_strategy(criterion, np.zeros(15), 200, seed=seed)
        return np.array(seen)

    first, again, other = run(0), run(0), run(5)
    assert len(first) == 200  # every evaluation allowed, and no more
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    values = np.sum((first - 0.3) ** 2, axis=1)
    assert values[0] == pytest.approx(15 * 0.3**2) and np.min(values) < 0.8 * values[0]


def _crest(signal):
    return np.max(np.abs(signal)) / np.sqrt(np.mean(signal**2))


def test_low_crest_phases_give_more_power_at_the_same_peak_than_schroeders():
    """Equal and uneven amplitudes alike: the clipped-and-projected phases lower the crest."""
    time_s = np.arange(8001) / 1000.0
    tones = EXCITATION_FREQUENCIES_HZ
    for amplitudes in (np.ones(len(tones)), np.exp(np.random.default_rng(1).normal(
            0.0, 0.8, len(tones)))):
        phases = low_crest_phases(amplitudes, tones, 8.0)
        low = _crest(multisine(time_s, amplitudes, tones, phases))
        schroeder = _crest(multisine(time_s, amplitudes, tones, schroeder_phases(len(tones))))
        assert low < 0.85 * schroeder, (low, schroeder)
        np.testing.assert_array_equal(phases, low_crest_phases(amplitudes, tones, 8.0))


def test_the_search_scales_a_candidate_to_the_arms_limits_in_a_few_replays():
    """The arm's excursion grows faster than the input: the secant steps find the peak."""
    limits = Limits(2.0, max_arm_rad=1.0)
    replays = []

    def arm_ratio(scale):  # the arm at its limit's share at a peak of 0.7
        replays.append(scale)
        return (scale / 0.7) ** 1.7

    scale = _scale_within(arm_ratio, limits)
    assert SCALE_AIM ** (1 / 1.7) * 0.7 <= scale <= 0.7 and len(replays) <= 1 + SCALE_TRIALS
    assert _scale_within(lambda scale: 0.5, limits) == 2.0  # within its limits at the bound
    assert _scale_within(lambda scale: 0.1, Limits(2.0)) == 2.0
    assert _scale_within(lambda scale: 3.0, limits) == pytest.approx(0.05 * 2.0)  # never within


def _response(std, relative_std, amplification=1.0):
    return Response(std, relative_std, 0.0, 0.0, np.zeros((1, 2)), amplification)


def test_the_criterion_lowers_the_worst_relative_std_within_each_parameters_cap():
    plain = _response({"a": 1.0, "b": 1.0}, {"a": 0.01, "b": 0.04})
    # the worst relative std alone while every std is below its cap (1.2× the multisine's)
    assert _against_goals(_response({"a": 1.1, "b": 0.8}, {"a": 0.011, "b": 0.032}),
                          plain) == pytest.approx(0.032 / (0.5 * 0.04))
    # a parameter's std past its cap counts once the worst relative std nears its goal
    assert _against_goals(_response({"a": 1.8, "b": 0.4}, {"a": 0.018, "b": 0.016}),
                          plain) == pytest.approx(1.8 / 1.2)
    assert _against_goals(plain, plain) == pytest.approx(2.0)
    # where the multisine leaves a parameter undetermined: the worst relative std alone
    undetermined = _response({"a": 1.0, "b": np.inf}, {"a": 0.01, "b": np.inf})
    assert _against_goals(_response({"a": 3.0, "b": 1.0}, {"a": 0.03, "b": 0.04}),
                          undetermined) == pytest.approx(0.04)


def test_a_motion_that_amplifies_its_start_beyond_what_a_calibration_follows_is_a_limit(
        rig_and_values):
    within = _response({"a": 1.0}, {"a": 0.01}, 0.5 * EXPERIMENT_AMPLIFICATION)
    beyond = _response({"a": 1.0}, {"a": 0.01}, 4.0 * EXPERIMENT_AMPLIFICATION)
    assert _overshoot(within, Limits(BOUND)) == 0.0
    assert _overshoot(beyond, Limits(BOUND)) == pytest.approx(np.log(4.0))
    # the multisine it is compared with may go as far as a calibration follows
    assert 4.0 * EXPERIMENT_AMPLIFICATION < FOLLOWED_AMPLIFICATION
    assert _overshoot(beyond, Limits(BOUND), FOLLOWED_AMPLIFICATION) == 0.0
    # the bound measures it: a pendulum released near upright against one swinging low
    rig, values = rig_and_values
    time_s = np.arange(401) / 200.0
    grid = design_grid(time_s, np.zeros(401), 2)
    low, upright = (cramer_rao_bound(rig, values, ("J_Byy", "b2"), [grid],
                                     [np.array([0.0, angle, 0.0, 0.0])], [np.full(2, 1e-3)])
                    for angle in (0.3, np.pi - 0.03))
    assert upright.amplification > 10.0 * low.amplification > 10.0


def test_a_search_that_finds_nothing_better_gives_the_multisine(rig_and_values):
    """Two high tones cannot beat the multisine: the design written is the multisine itself."""
    rig, values = rig_and_values
    design = design_excitation(rig, values, FREE, duration_s=2.0, rate_hz=200.0,
                               limits=Limits(BOUND), start=np.zeros(4), max_evaluations=2,
                               frequencies_hz=np.array([2.2, 2.4]))
    assert design.improved is False
    assert design.design is design.multisine
    np.testing.assert_array_equal(design.inputs, multisine_input(design))
    np.testing.assert_array_equal(design.frequencies_hz, MULTISINE_FREQUENCIES_HZ)
    assert _design(rig_and_values, Limits(BOUND), 2).improved is True


def test_the_arm_stays_within_its_limits_or_the_design_says_it_cannot(rig_and_values):
    free = _design(rig_and_values, Limits(BOUND), 1)
    limits = Limits(BOUND, max_arm_rad=0.5 * free.design.arm_peak_rad,
                    max_arm_rate=0.8 * free.design.arm_rate_peak)
    shown = []
    limited = _design(rig_and_values, limits, 5, lambda *seen: shown.append(seen))
    assert shown[0][2] == 1.0  # each candidate ranked at a peak within the limits
    assert [seen[0] for seen in shown] == [1, 2, 3, 4, 5]
    assert limited.improved and (limited.design.worst_relative_std
                                 < limited.multisine.worst_relative_std)
    # within the design's share of the limits: a rig moving a little more is not stopped
    assert limited.design.arm_peak_rad <= ARM_LIMIT_SHARE * limits.max_arm_rad
    assert limited.design.arm_rate_peak <= ARM_LIMIT_SHARE * limits.max_arm_rate
    assert limited.multisine.arm_peak_rad <= ARM_LIMIT_SHARE * limits.max_arm_rad
    assert limited.multisine_scale < BOUND  # the multisine it is compared with meets them too
    assert 0.0 < limited.scale < BOUND
    assert np.max(np.abs(limited.inputs)) <= limited.scale
    document = yaml.safe_load(yaml.safe_dump(excitation_document(  # plain numbers: written
        limited, limits, 1e-3, {name: 1.0 for name in FREE})))
    assert document["multisine"]["peak"] == limited.multisine_scale and document["seed"] == 0
    angles = excitation_figure(limited, limits).axes[1]  # the limits and the share drawn
    start = limited.design.angles[0, 0]
    drawn = sorted(line.get_ydata()[0] - start for line in angles.lines
                   if line.get_linestyle() in ("--", ":"))
    share = ARM_LIMIT_SHARE * limits.max_arm_rad
    np.testing.assert_allclose(drawn, [-limits.max_arm_rad, -share, share, limits.max_arm_rad])
    assert f"largest rate {limited.design.arm_rate_peak:.3g} rad/s" in angles.get_title()
    with pytest.raises(SimulationError, match=r"^no input within 0.1% of the bound keeps the arm "
                                              r"within its limits .*--max-arm-rad"):
        _design(rig_and_values, Limits(BOUND, max_arm_rad=1e-6), 1)


def test_a_multisine_held_by_the_limits_below_a_twentieth_of_the_bound_still_gets_a_design():
    """A light pendulum on a freely turning arm: the multisine is held below 5 % of the bound.

    Its lowest tones turn the arm past its limits even at 5 % of the bound, where higher tones
    may use the whole bound: the design is made, beside the multisine at the peak the limits
    allow it.
    """
    config = apply_overrides(load_config("furuta_synthetic"), set_values={
        "l2": 0.15, "m_B": 0.1, "J_Bxx": 2e-6, "J_Byy": 7.5e-4, "J_Bzz": 7.5e-4, "b2": 2e-5})
    limits = Limits(0.3, max_arm_rad=2.0, max_arm_rate=10.0)
    design = design_excitation(rig_of(config), config.parameters, FREE, duration_s=8.0,
                               rate_hz=100.0, limits=limits, start=np.zeros(4),
                               max_evaluations=3)
    assert design.multisine_scale < SMALLEST_SCALE * 0.3
    for response in (design.design, design.multisine):
        assert response.arm_peak_rad <= ARM_LIMIT_SHARE * 2.0
        assert response.arm_rate_peak <= ARM_LIMIT_SHARE * 10.0
    assert np.max(np.abs(design.inputs)) <= 0.3


def test_the_bounds_sensitivities_are_central_differences_of_the_replay(rig_and_values):
    """The bound's sensitivities, chained through the stage's lanes, are the replay's.

    1.4 s of a multisine at 500 Hz (six lanes, the last padded) from a moving start: the
    simulated angles' derivatives in J_Byy, b2 and the four start components match central
    differences of the open-loop replay within their truncation and round-off.
    """
    rig, values = rig_and_values
    time_s = np.arange(701) / 500.0
    inputs = at_peak(multisine(time_s, np.ones(4), [0.3, 0.7, 1.1, 2.0], schroeder_phases(4)),
                     BOUND)
    grid = design_grid(time_s, inputs, 2)
    names, start = ("J_Byy", "b2"), np.array([0.1, -0.2, 0.3, 0.0])
    got = recording_sensitivities(rig, values, names, grid, start, 2e-3)
    assert got.shape == (701, 2, 6)

    def replay(point):
        moved = {**values, **dict(zip(names, point[:2], strict=True))}
        return rigid_replay(rigid_systems(rig, moved)[0], grid, point[2:], 2e-3)

    point = np.concatenate([[float(values[name]) for name in names], start])
    steps = np.concatenate([1e-4 * point[:1], 1e-2 * point[1:2], np.full(4, 1e-6)])
    central = np.stack([(replay(point + step * unit) - replay(point - step * unit)) / (2 * step)
                        for step, unit in zip(steps, np.eye(6), strict=True)], axis=-1)
    round_off = np.spacing(np.abs(replay(point)) + 1.0)[..., None] / steps
    error = np.abs(got - central)
    assert np.all(error <= 1e-4 * np.abs(central) + 10 * round_off), np.max(
        error / (np.abs(central) + round_off))


def test_excite_writes_the_input_what_it_predicts_and_a_figure(tmp_path, capsys):
    out = tmp_path / "design"
    assert main(["excite", "--config", "furuta_synthetic", "--free", ",".join(FREE),
                 "--duration", "2", "--rate", "500", "--max-input", str(BOUND),
                 "--max-evaluations", "3", "--seed", "2", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "worst relative std: design" in printed
    assert "evaluation    1/3: the best so far, worst relative std" in printed
    lines = (out / "excitation.csv").read_text().splitlines()
    assert lines[0] == "time_s,input" and len(lines) == 1002  # 500 Hz, --rate
    inputs = np.array([float(line.split(",")[1]) for line in lines[1:]])
    assert np.max(np.abs(inputs)) <= BOUND
    document = yaml.safe_load((out / "excitation.yaml").read_text())
    assert document["criterion"].startswith("worst relative std") and document["seed"] == 2
    values = load_config("furuta_synthetic").parameters
    assert document["designed_at"] == {name: values[name] for name in FREE}
    assert document["limits"] == {"max_input": BOUND, "max_arm_rad": None,
                                  "max_arm_rate_rad_s": None, "designed_within_share": 0.9}
    assert document["input"]["fade_s"] == RAMP_S
    assert set(document["design"]["parameters"]) == set(FREE)
    assert set(document["multisine"]["parameters"]) == set(FREE)
    assert document["multisine"]["peak"] == BOUND
    assert document["design"]["worst_relative_std"] == pytest.approx(max(
        entry["relative_std"] for entry in document["design"]["parameters"].values()))
    assert (out / "excitation.png").read_bytes().startswith(b"\x89PNG")
    run = excitation_run(out / "excitation.csv")  # as the exciter node reads them back
    assert (run.max_input, run.max_arm_rad, run.rate_hz) == (BOUND, None, pytest.approx(500))
    np.testing.assert_array_equal(run.inputs, inputs)
    np.testing.assert_array_equal(run.played(), inputs)  # the exciter plays it unchanged


@pytest.mark.parametrize(("arguments", "message"), [
    (["--config", "pendulum", "--free", "J_P"], "the pendulum rig has no input to design"),
    (["--config", "furuta_synthetic", "--free", "J_Azz,tilt"], "tilt is not a scalar"),
    (["--config", "furuta_synthetic", "--free", "J_Azz", "--max-arm-rad", "-1"],
     "--max-arm-rad must be positive"),
    (["--config", "furuta_synthetic", "--free", "J_Azz", "--rate", "0"],
     "--rate must be positive"),
    (["--config", "furuta_synthetic", "--free", "J_Azz", "--max-input", "-1"],
     "--max-input must be positive, got -1.0"),
    (["--config", "furuta_synthetic", "--free", "J_Azz", "--duration", "0"],
     "--duration must be positive, got 0.0"),
])
def test_excite_refuses_in_one_line(tmp_path, capsys, arguments, message):
    assert main(["excite", "--max-input", "1", *arguments, "--output",
                 str(tmp_path / "o")]) == 2
    printed = capsys.readouterr()
    error = printed.err.strip()
    assert message in error and len(error.splitlines()) == 1, error
    assert "designing" not in printed.out  # refused before it starts


def test_simulate_plays_an_input_file_and_refuses_one_that_is_not(tmp_path, capsys):
    """An input at 300 Hz, whose period --dt 1e-3 s does not divide: steps of 1/1200 s."""
    from mb_estimation.io.recordings import read_recording

    time_s = np.arange(151) / 300.0
    inputs = 0.3 * np.sin(2 * np.pi * 1.5 * time_s)
    played = tmp_path / "excitation.csv"
    played.write_text("time_s,input\n" + "".join(
        f"{t!r},{u!r}\n" for t, u in zip(time_s.tolist(), inputs.tolist(), strict=True)))
    bag = tmp_path / "bag"
    assert main(["simulate", "--input", str(played), "--config", "furuta_synthetic",
                 "--hinges", "rigid", "--dt", "1e-3", "--output", str(bag),
                 "--duration", "2"]) == 0
    printed = capsys.readouterr()
    assert "simulated input: 0.5 s in 600 steps of 0.000833333 s" in printed.out
    assert f"warning: --duration 2 s is longer than {played} (0.5 s): 0.5 s played" in \
        printed.err
    recording = read_recording(bag, load_config(bag / "ground_truth.yaml"))
    assert len(recording.time_s) == 151
    np.testing.assert_allclose(recording.inputs[:150, 0], inputs[:150], rtol=0, atol=1e-12)
    assert np.ptp(recording.joint_angles[:, 0]) > 1e-3  # the arm moved
    played.write_text("t,u\n0,1\n")
    assert main(["simulate", "--input", str(played), "--config", "furuta_synthetic",
                 "--output", str(tmp_path / "other")]) == 2
    assert "first line must be 'time_s,input'" in capsys.readouterr().err
    assert main(["simulate", "release", "--input", str(played), "--config", "furuta_synthetic",
                 "--output", str(tmp_path / "other")]) == 2
    assert "give a SCENARIO or --input FILE" in capsys.readouterr().err
