"""The verdict from hand-built assessments: each finding, its action for this rig, the summary.

No fit runs here: an :class:`~mb_estimation.assess.Assessment` is written by hand for each case
(what the checks would have found), and the setup is that of a config on a synthetic
recording. Whole calibrations that end in these verdicts are test_calibrations.py's.
"""

import dataclasses

import numpy as np
import pytest

from mb_estimation.assess import (
    PREDICTION_NOISE_RATIO,
    Assessment,
    PredictionMismatch,
    StageFollowing,
    StepDependence,
)
from mb_estimation.config import apply_overrides, load_config
from mb_estimation.cramer_rao import CramerRao
from mb_estimation.estimation import EstimationResult, FitStatus
from mb_estimation.estimation.identifiability import (
    AT_LOWER_BOUND,
    DETERMINED,
    NOT_DETERMINED,
    Combination,
    Identifiability,
    ParameterStanding,
    Ratio,
)
from mb_estimation.estimation.input_delay import InputDelay
from mb_estimation.setup import set_up, warm_up_recording
from mb_estimation.signals.steady import SteadyDrive
from mb_estimation.verdict import verdict

FREE = ("J_Azz", "J_Byy", "b1", "b2")
VALUES = {"J_Azz": 0.003, "J_Byy": 0.004, "b1": 1e-3, "b2": 1e-4}


def _setup(hinges="rigid", free=FREE, **overrides):
    """Slow sines of both joints under a constant input."""
    config = apply_overrides(load_config("furuta_synthetic"), hinges=hinges, free=list(free),
                             **overrides)
    recording = warm_up_recording(config, 0.5, 100.0)
    return set_up(config, [dataclasses.replace(recording, input_time_s=np.zeros(1),
                                               inputs=np.full((1, 1), 0.1))])


def _result(status=FitStatus.GRADIENT, free=FREE, **values) -> EstimationResult:
    values = {**VALUES, **values}
    return EstimationResult(
        parameters={name: np.asarray(values[name]) for name in free}, free=tuple(free),
        std={name: np.atleast_1d(0.01 * abs(values[name])) for name in free},
        excited=dict.fromkeys(free, True), covariance=np.eye(len(free)), recordings=(),
        cost=1e-6, observation_mse=1e-6, impulse_mse=0.0, iterations=5, status=status,
        message=f"{status.description}; 5 iterations", history=())


def _identified(free=FREE, **statuses) -> Identifiability:
    return Identifiability(tuple(ParameterStanding(name, statuses.get(name, DETERMINED),
                                                   0.01) for name in free))


def _settled(free=FREE, moved=()):
    return tuple(StepDependence(name, np.ones(1), np.ones(1), np.full(1, 2.0 if name in moved
                                                                      else 0.1),
                                np.ones(1), name not in moved) for name in free)


def _assessment(result=None, **fields) -> Assessment:
    result = _result() if result is None else result
    defaults = dict(result=result, refit_kept=False, predictions=(), replays=(),
                    noise_rad=np.full((1, 2), 1e-3),
                    mismatch=PredictionMismatch(1.2, "rec", 0.5, (1e-3, 1e-3)),
                    identified=_identified(result.free), step_dependence=_settled(result.free))
    return Assessment(**{**defaults, **fields})


def _problems(judged) -> str:
    return "\n".join(f"{f.problem} → {f.action}" for f in judged.findings)


def test_a_determined_settled_predicting_fit_is_trustworthy():
    judged = verdict(_setup(), _assessment())
    assert judged.trustworthy and not judged.findings and not judged.advice
    assert judged.summary == ("every free parameter determined, settled in the step, and the "
                              "model predicts 0.5 s ahead within 1.2× the fit's noise")
    assert judged.as_dict()["trustworthy"] is True
    assert judged.lines()[0].startswith("verdict: TRUSTWORTHY")


def test_a_fit_that_did_not_converge_is_named_with_what_to_do():
    judged = verdict(_setup(), _assessment(_result(FitStatus.MAX_ITERATIONS)))
    (finding,) = judged.findings
    assert "stopped without converging (max_iterations" in finding.problem
    assert "--max-iterations" in finding.action
    assert judged.lines()[0].startswith("verdict: NOT TRUSTWORTHY (1 finding)")


def test_a_friction_at_zero_is_no_estimate_and_the_action_names_the_motion():
    result = _result(b2=0.0)
    judged = verdict(_setup(), _assessment(result, identified=_identified(b2=AT_LOWER_BOUND)))
    (finding,) = judged.findings
    assert finding.problem.startswith("b2 ended at its lower bound (0)")
    assert finding.action == ("no b2 shows in these recordings: fix it at 0, or record the "
                              "pendulum swinging freely with the arm held still")


def test_a_value_the_refit_walked_to_its_bound_is_named_with_where_it_came_from():
    """A bound the simulation-error fit reached from a value the joint fit determined.

    That is a trade (an arm of enormous inertia for its damping), not the data's.
    """
    kept, identified = _result(b1=0.0), _identified(b1=AT_LOWER_BOUND)
    walked = verdict(_setup(), _assessment(kept, identified=identified, refit_kept=True,
                                           joint=_result(b1=7.5e-4)))
    (finding,) = walked.findings
    assert finding.problem.endswith("from the joint fit's 0.00075 (100.0 std from it), "
                                    "trading it against what the data hold little of")
    assert "--simulation-refinement off" in finding.action
    # where the joint fit had it at the bound too (within 2 of its std), the data's own advice
    near_zero = _result(b1=1e-5)
    near_zero = dataclasses.replace(near_zero, std={**near_zero.std, "b1": np.array([6e-6])})
    at_zero_before = verdict(_setup(), _assessment(kept, identified=identified, refit_kept=True,
                                                   joint=near_zero))
    assert at_zero_before.findings[0].action.startswith("no b1 shows in these recordings")
    # the arm's inertia walked to its bound with K fixed: the advice of a fixed gain stands
    arm = verdict(_setup(), _assessment(_result(J_Azz=1e-12), refit_kept=True,
                                        identified=_identified(J_Azz=AT_LOWER_BOUND),
                                        joint=_result(J_Azz=0.003)))
    (finding,) = arm.findings
    assert "from the joint fit's 0.003" in finding.problem and "free K as well" in finding.action


@pytest.mark.parametrize(("free", "advice"), [
    (FREE, "free K as well (--free J_Azz,J_Byy,b1,b2,K)"),
    ((*FREE, "K"), "check them, or fix J_Azz at a trusted value"),
])
def test_the_arms_inertia_at_its_bound_gets_the_advice_of_this_rig(free, advice):
    result = _result(free=free, J_Azz=1e-12, K=0.5)
    judged = verdict(_setup(free=free), _assessment(
        result, identified=_identified(free, J_Azz=AT_LOWER_BOUND)))
    (finding,) = judged.findings
    assert finding.problem.startswith("J_Azz ended at its lower bound")
    assert advice in finding.action
    assert "the combinations the data determine are listed" not in finding.action  # none are
    if "K" in free:  # where the data determine combinations, the action points at them
        identified = dataclasses.replace(_identified(free, J_Azz=AT_LOWER_BOUND),
                                         determined_ratios=(Ratio("b1", "K", 1.0, 0.3, 0.01),))
        (finding,) = verdict(_setup(free=free), _assessment(result, identified=identified)
                             ).findings
        assert finding.action.endswith("(the combinations the data determine are listed)")


def test_values_that_still_move_with_the_step_get_the_declared_models_advice():
    rigid = verdict(_setup(), _assessment(step_dependence=_settled(moved=("J_Byy", "b2"))))
    (finding,) = rigid.findings
    assert finding.problem == ("J_Byy, b2 still move with the estimation step: shadow values of "
                               "the method")
    assert "refine the step (--step)" in finding.action
    compliant = verdict(_setup("compliant"),
                        _assessment(step_dependence=_settled(moved=("J_Byy",))))
    (finding,) = compliant.findings
    assert finding.problem.startswith("J_Byy still moves with")
    assert "fit through them (--simulation-refinement on)" in finding.action


def test_an_input_acting_late_is_named_with_the_setting_that_states_it():
    judged = verdict(_setup(), _assessment(delay=InputDelay(0.0102, 0.0004)))
    (finding,) = judged.findings
    assert finding.problem == "the input acts 10.2 ms (± 0.4) after its recorded stamps"
    assert finding.action == "state it in the config: recording.input_delay_s: 0.0102"
    within = verdict(_setup(), _assessment(delay=InputDelay(0.001, 0.0004)))
    assert within.trustworthy  # 2.5 std: not a delay the data show
    # with a model that also misses the recordings: the joints' signs first (a sign flipped
    # on one joint reads as a delay of tens of ms)
    miss = PredictionMismatch(3 * PREDICTION_NOISE_RATIO, "rec", 0.5, (1e-3, 1e-3))
    both = verdict(_setup(), _assessment(delay=InputDelay(0.06, 0.0005), mismatch=miss))
    assert both.findings[0].action.startswith("state it in the config: "
                                              "recording.input_delay_s: 0.06; but the model "
                                              "also misses the recordings (below): check each "
                                              "joint's sign"), both.findings[0].action
    # the check measures beyond the delay the config states: the setting is their sum; a
    # delay at the edge of those tried is a bound, measured again once stated
    stated = _setup()
    stated = dataclasses.replace(stated, config=dataclasses.replace(
        stated.config, recording=dataclasses.replace(stated.config.recording,
                                                     input_delay_s=-0.02)))
    (finding,) = verdict(stated, _assessment(delay=InputDelay(-0.0086, 0.0005))).findings
    assert finding.action == "state it in the config: recording.input_delay_s: -0.0286"
    (edge,) = verdict(_setup(), _assessment(delay=InputDelay(-0.02, 0.0005,
                                                             at_edge=True))).findings
    assert edge.problem == ("the input acts at least 20 ms before its recorded stamps (the "
                            "edge of the delays tried, -20 to 60 ms)")
    assert edge.action == ("state it in the config: recording.input_delay_s: -0.02, and "
                           "calibrate again: the check then measures what is left")


def test_a_model_that_mispredicts_is_a_finding_unless_its_simulations_follow():
    miss = PredictionMismatch(3 * PREDICTION_NOISE_RATIO, "rec", 0.5, (1e-3, 1e-3))
    rigid = verdict(_setup(), _assessment(mismatch=miss))
    (finding,) = rigid.findings
    assert finding.problem.startswith("run 0.5 s ahead from its estimated states, the fitted "
                                      "model (the rigid model in joint coordinates")
    assert "misses rec by 15× the fit's noise" in finding.problem
    assert ("check each joint's sign and offset in recording.joints (the model's directions: "
            "user guide, Model conventions; a flipped sign can pass for a delay) and that the "
            "angles are in radians, the encoders' "
            "zero (encoder_offset2 free), the input model (its gain free, "
            "recording.input_delay_s), dry friction (mu1, coulomb1, mu2, coulomb2), whether the "
            "rig stands level (tilt free), the fixed "
            "geometry") in finding.action
    tilt_free = _setup(free=(*FREE, "tilt"))
    (finding,) = verdict(tilt_free, _assessment(mismatch=miss)).findings
    assert "level" not in finding.action
    offset_free = _setup(free=(*FREE, "encoder_offset2"))
    (finding,) = verdict(offset_free, _assessment(mismatch=miss)).findings
    assert "sign and offset" in finding.action and "zero" not in finding.action
    # unforced (a free swing): not the input's model; the arm held: not its friction
    config = _setup().config
    swing = warm_up_recording(config, 0.5, 100.0)
    held = dataclasses.replace(swing, joint_angles=swing.joint_angles * np.array([0.0, 1.0]))
    (finding,) = verdict(set_up(config, [swing]), _assessment(mismatch=miss)).findings
    assert "(encoder_offset2 free), dry friction (mu1, coulomb1, mu2, coulomb2), whether " \
        "the rig stands level" in finding.action and "input" not in finding.action
    (finding,) = verdict(set_up(config, [held]), _assessment(mismatch=miss)).findings
    assert "(encoder_offset2 free), dry friction (mu2, coulomb2), whether the rig stands " \
        "level" in finding.action
    compliant = verdict(_setup("compliant"), _assessment(mismatch=miss))
    assert "fit through them (--simulation-refinement on" in compliant.findings[0].action
    refitted = verdict(_setup("compliant"), _assessment(mismatch=miss, refit_kept=True,
                                                         step_dependence=()))
    assert refitted.findings[0].action.startswith("neither the rigid limit nor")
    followed = verdict(_setup(), _assessment(
        mismatch=miss, refit_kept=True, step_dependence=(),
        following=StageFollowing(1.1e-3, 1.1, 3.0)))
    assert followed.trustworthy
    assert "follow the recordings over 3 s from fitted starts within 1.1× the noise" in \
        followed.summary and "miss by 15×" in followed.summary


def test_an_undetermined_combination_is_one_finding_with_what_the_data_fix():
    combination = Combination(("J_Azz", "b1"), (0.7, 0.7), 0.8)
    ratio = Ratio("b1", "J_Azz", 1.0, 0.33, 0.01)
    identified = Identifiability(
        tuple(ParameterStanding(name, NOT_DETERMINED if name in ("J_Azz", "b1") else
                                DETERMINED, 0.9) for name in FREE), (combination,), (ratio,))
    judged = verdict(_setup(), _assessment(identified=identified))
    (finding,) = judged.findings
    assert finding.problem == (f"not determined: {combination}; the data determine {ratio}")
    assert finding.action.startswith("fix one of J_Azz, b1 at a trusted value")


def test_a_lone_undetermined_parameter_is_named_and_the_arms_cross_axes_are_fixed():
    free = (*FREE, "J_Axx")
    judged = verdict(_setup(free=free), _assessment(
        _result(free=free, J_Axx=1e-4), identified=_identified(free, J_Axx=NOT_DETERMINED),
        step_dependence=_settled(free)))
    (finding,) = judged.findings
    assert finding.problem.startswith("J_Axx is not determined")
    assert finding.action == "fix it: the arm never turns about that axis"


def test_a_std_far_above_the_bound_is_advice_not_a_finding():
    result = _result()
    names = ("J_Azz", "J_Byy")
    bound = CramerRao(names, np.eye(2), {name: 0.002 * VALUES[name] for name in names},
                      np.eye(2), 1.0)
    judged = verdict(_setup(), _assessment(result, bound=bound))
    assert judged.trustworthy
    (advice,) = judged.advice
    assert advice.startswith("the data allow tighter values than this fit gives (J_Azz 5×, "
                             "J_Byy 5× the Cramér–Rao bound)")
    assert "(method.simulation_refinement, on unless set off;" in advice
    short = "the recordings (0.998 s) are shorter than one segment …: the joint fit is kept"
    (advice,) = verdict(_setup(), _assessment(result, bound=bound, note=short)).advice
    assert advice.endswith(f"where the model follows the data (it did not run: {short})")
    refitted = verdict(_setup(), _assessment(result, bound=bound, refit_kept=True,
                                             step_dependence=()))
    assert not refitted.advice


def test_a_std_below_the_bound_is_advice():
    """A std half the Cramér–Rao bound: the fit and the bound disagree, which is said."""
    names = ("J_Azz", "J_Byy")
    bound = CramerRao(names, np.eye(2), {"J_Azz": 0.02 * VALUES["J_Azz"],
                                         "J_Byy": 0.0101 * VALUES["J_Byy"]}, np.eye(2), 1.0)
    judged = verdict(_setup(), _assessment(bound=bound))
    assert judged.trustworthy  # which of the two is right is not known here
    (advice,) = judged.advice  # J_Byy's 0.99× is the bound's own
    assert advice.startswith("the std of J_Azz lies below the Cramér–Rao bound (0.5×), which "
                             "no fit of this model reaches")


def test_the_verdict_reads_the_setups_box_not_the_raw_config():
    setup = _setup()
    wider = dataclasses.replace(setup, lower={**setup.lower, "b2": -1.0})
    identified = _identified(b2=AT_LOWER_BOUND)
    at_zero = verdict(setup, _assessment(_result(b2=0.0), identified=identified))
    at_minus_one = verdict(wider, _assessment(_result(b2=-1.0), identified=identified))
    assert "fix it at 0" in at_zero.findings[0].action
    assert "fix it at 0" not in at_minus_one.findings[0].action


def test_std_with_the_models_error_are_said_and_not_taken_for_a_loose_fit():
    result = _result()
    names = ("J_Azz", "J_Byy")
    bound = CramerRao(names, np.eye(2), {name: 0.002 * VALUES[name] for name in names},
                      np.eye(2), 1.0)
    judged = verdict(_setup(), _assessment(
        result, bound=bound, model_error_correlation_s=0.17,
        identified=_identified(J_Byy=NOT_DETERMINED)))
    (advice,) = judged.advice  # not "the data allow tighter values": the model misses
    assert advice.startswith("the std include the model's error: the fit's residuals stay "
                             "correlated over 0.17 s")
    problems = _problems(judged)
    assert "J_Byy is not determined (its std is 1 % of its value, the model's error " \
           "included) → give the model what the rig does that it lacks" in problems


def test_recordings_no_one_input_gain_fits_are_a_finding_with_what_to_do():
    drives = [SteadyDrive("volts.csv", 2.0, 7.4, 2.0), SteadyDrive("tenths.csv", 0.1, 3.9, 5.0)]
    setup = dataclasses.replace(_setup(), steady_drives=tuple(drives))
    judged = verdict(setup, _assessment())
    (finding,) = judged.findings
    assert "tenths.csv turns slower" in finding.problem
    assert "Calibrate each group on its own" in finding.action
    assert not verdict(_setup(), _assessment()).findings


def test_a_parameter_at_its_bound_is_not_called_settled_with_the_step(capsys):
    """The step dependence: a value pinned at its bound moves by 0, and is no estimate."""
    from types import SimpleNamespace

    from mb_estimation.assess import step_dependence
    from mb_estimation.cli.printing import print_step_dependence

    def level(dt, b1):
        result = SimpleNamespace(free=("J_Azz", "b1"), parameters={"J_Azz": 1e-4, "b1": b1},
                                 std={"J_Azz": 1e-6, "b1": 1.0})
        return SimpleNamespace(stage=SimpleNamespace(dt=dt), result=result)

    levels = [level(0.004, 0.0), level(0.002, 0.5)]
    rows = step_dependence(levels, at_bound=("J_Azz",))
    assert [row.settled for row in rows] == [None, True]
    print_step_dependence(SimpleNamespace(assessment=SimpleNamespace(step_dependence=rows),
                                          fit=SimpleNamespace(levels=levels)))
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith("at its bound: not an estimate the step could move"), lines
    assert lines[2].endswith("(0.5 std): settled"), lines


def test_the_printed_table_gives_each_parameters_status_as_the_verdict_reads_it(capsys):
    """A value at its bound is said to be there (not "not determined", the fit's own flag)."""
    from mb_estimation.cli.printing import print_parameters

    result = _result(b1=0.0)
    print_parameters(result, _identified(b1=AT_LOWER_BOUND, b2=NOT_DETERMINED))
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert lines["b1"].endswith("   at its lower bound")
    assert lines["b2"].endswith("   not determined")
    assert not lines["J_Azz"].endswith("determined")


def test_std_with_the_model_s_error_are_never_below_the_model_is_right_ones():
    """The larger of the two per parameter, the covariance scaled with it.

    The residuals' correlation widens the std; where its sandwich comes out below the
    model-is-right std (its own sampling error), that one is kept, the correlations too.
    """
    from mb_estimation.assess import with_model_error
    from mb_estimation.estimation.covariance import CorrelatedCovariance

    result = _result()
    plain = np.array([float(result.std[name][0]) for name in FREE])
    own = plain * np.array([3.0, 0.5, 2.0, 0.8])
    correlation = np.eye(4)
    correlation[0, 1] = correlation[1, 0] = 0.5
    result = dataclasses.replace(result, correlated=CorrelatedCovariance(
        correlation * np.outer(own, own), {name: own[[i]] for i, name in enumerate(FREE)}, 0.2))
    widened = with_model_error(result)
    expected = np.maximum(plain, own)
    assert widened.std_include_model_error and not result.std_include_model_error
    np.testing.assert_allclose([widened.std[name][0] for name in FREE], expected, rtol=1e-14)
    np.testing.assert_allclose(np.sqrt(np.diag(widened.covariance)), expected, rtol=1e-14)
    assert widened.covariance[0, 1] / (expected[0] * expected[1]) == pytest.approx(0.5)
