"""Driver and sensor terms: the model's, the candidate sets, the choice, the comparison run.

The terms' derivatives against finite differences and their physics by hand; the comparison on
simulated recordings.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from finite_differences import assert_parameter_columns

from mb_estimation.api import compare_models, write_simulated_bag
from mb_estimation.config import ConfigError, apply_overrides, load_config, parse_config
from mb_estimation.estimation.formulations import JointCoordinates, MaximalCoordinates
from mb_estimation.estimation.parameters import FreeParameters
from mb_estimation.estimation.residuals import (
    ModelStructure,
    StepData,
    linearize,
    recording_residuals,
)
from mb_estimation.model_terms import (
    SUPPORT_RELATIVE,
    Candidate,
    candidate_sets,
    choose,
    term_names,
    term_parameters,
    terms_note,
)
from mb_estimation.multibody import joint_angles, states_from_joints
from mb_estimation.multibody.system import ripple_torque
from mb_estimation.numerics import jax, jit
from mb_estimation.rigs import get_rig, parameter_arrays
from mb_estimation.setup import rig_of
from mb_estimation.signals import Recording, prepare_recording

jnp = jax.numpy

EXAMPLE = "config/examples/odrive_furuta.yaml"


def _candidate(terms, scores):
    scores = np.asarray(scores, dtype=float)
    return Candidate(tuple(terms), scores, np.stack([scores, scores], axis=1))


def test_every_subset_is_a_candidate_fewest_terms_first():
    sets = candidate_sets(("offsets", "dry", "ripple"))
    assert len(sets) == 8 and sets[0] == () and sets[-1] == ("offsets", "dry", "ripple")
    assert [len(s) for s in sets] == sorted(len(s) for s in sets)
    assert term_parameters(("offsets", "ripple")) == ("encoder_offset2", "ripple_cos1",
                                                      "ripple_sin1")


def test_term_names_keep_the_canonical_order_and_name_an_unknown_term():
    assert term_names("ripple, offsets") == ("offsets", "ripple")
    with pytest.raises(ValueError, match="unknown term 'cogging'.*offsets, dry, ripple"):
        term_names("offsets,cogging")


def test_a_term_is_chosen_only_where_it_predicts_a_held_out_recording_better():
    names = ("a", "b")
    little = 1.0 + 0.5 * SUPPORT_RELATIVE  # within the tolerance: not support
    candidates = [_candidate((), [2.0, 2.0]),
                  _candidate(("offsets",), [1.0, 1.0]),
                  _candidate(("dry",), [2.0, 2.0]),
                  _candidate(("offsets", "dry"), [1.0 / little, 1.0 / little])]
    choice = choose(candidates, names)
    assert choice.candidate.terms == ("offsets",)
    assert "offsets + dry scores" in choice.reason and "with fewer terms" in choice.reason
    assert "without offsets, a is predicted 2.00× worse" in choice.reason
    # the same gain of dry on one recording beyond the tolerance: dry is supported
    candidates[-1] = _candidate(("offsets", "dry"), [1.0, 0.5])
    choice = choose(candidates, names)
    assert choice.candidate.terms == ("offsets", "dry")
    assert "without dry, b is predicted 2.00× worse" in choice.reason


def test_the_reason_names_a_larger_set_that_predicts_better_and_why_it_is_not_chosen():
    """A set with more terms that predicts one recording better, matched by a smaller one."""
    candidates = [_candidate((), [2.0, 2.0]), _candidate(("offsets",), [1.5, 1.0]),
                  _candidate(("dry",), [1.0, 1.3]), _candidate(("offsets", "dry"), [1.45, 1.0])]
    choice = choose(candidates, ("a", "b"))
    assert choice.candidate.terms == ("dry",)
    assert "no set with more terms" not in choice.reason
    assert ("offsets + dry predicts b 1.30× better, but offsets predicts every held-out "
            "recording within 5% of it with fewer terms") in choice.reason


def test_a_term_its_fits_left_at_zero_is_not_chosen_whatever_the_scores():
    """Dry friction at zero in every fold is the model without it.

    A better score there is where that fit ended (another local minimum), not the term's
    support.
    """
    off = {"coulomb1": 0.0, "coulomb2": 0.0}
    none = _candidate((), [1.22, 1.0])
    dry = Candidate(("dry",), np.array([1.0, 1.0]), np.ones((2, 2)), (off, off))
    choice = choose([none, dry], ("2V", "3V"))
    assert choice.candidate.terms == ()
    assert "dry scores 1 rad, but its fits left dry at zero" in choice.reason
    used = Candidate(("dry",), dry.scores, dry.prediction_rms_rad, (off, {**off, "coulomb2": 1e-4}))
    assert choose([none, used], ("2V", "3V")).candidate.terms == ("dry",)


def test_without_support_for_any_term_the_model_as_given_is_chosen():
    candidates = [_candidate((), [1.0, 1.0]), _candidate(("ripple",), [0.99, 1.01])]
    choice = choose(candidates, ("a", "b"))
    assert choice.candidate.terms == ()
    assert choice.candidate.label == "none"


def test_the_note_names_each_term_that_is_on_and_says_nothing_where_none_is():
    parameters = {"encoder_offset1": 0.0, "encoder_offset2": 0.0, "mu1": 0.0, "mu2": 0.0,
                  "coulomb1": 0.002, "coulomb2": 0.0, "ripple_cos1": 0.0, "ripple_sin1": 0.0,
                  "ripple_cos2": 0.0, "ripple_sin2": 0.0}
    assert terms_note(parameters, (), 0) == ("driver and sensor terms on: dry friction "
                                             "(coulomb1 = 0.002)")
    note = terms_note(parameters, ("encoder_offset2", "ripple_cos1"), 8)
    assert "encoder offsets (encoder_offset2 free)" in note
    assert "torque ripple of 8 periods per revolution (ripple_cos1 free)" in note
    assert terms_note({**parameters, "coulomb1": 0.0}, (), 0) is None


TERM_PARAMETERS = ("encoder_offset2", "coulomb1", "coulomb2", "ripple_cos1", "ripple_sin1")


@pytest.fixture(scope="module")
def rig_with_terms():
    """The example rig with every term on: an encoder offset, Coulomb friction, an 8/rev ripple."""
    return apply_overrides(load_config(EXAMPLE), set_values={
        "encoder_offset2": 0.03, "coulomb1": 4e-3, "coulomb2": 2e-5, "ripple_cos1": 4e-3,
        "ripple_sin1": -3e-3}, free=list(TERM_PARAMETERS))


def test_the_terms_jacobian_columns_match_finite_differences(rig_with_terms):
    config = rig_with_terms
    rig = rig_of(config)
    time_s = np.arange(13) * 1e-3
    angles = np.stack([2.0 * np.sin(3.0 * time_s) + 0.3, 0.4 * np.cos(5.0 * time_s)], axis=1)
    grid = prepare_recording(Recording("terms", time_s, angles, time_s,
                                       np.sin(7.0 * time_s)[:, None]), 1e-3, 10.0)
    values = parameter_arrays(config.parameters)
    free = FreeParameters.of(rig.spec, TERM_PARAMETERS)
    fixed = {k: v for k, v in values.items() if k not in free.names}
    free_values = {k: values[k] for k in free.names}
    n = len(time_s)
    data = StepData(jnp.asarray(grid.measured_angles[:n]), jnp.asarray(grid.inputs[:n - 1]),
                    jnp.asarray(grid.observed[:n]), jnp.asarray(1e-3), jnp.asarray(30.0),
                    jnp.zeros(2))
    compiled = jit(recording_residuals, static_argnums=0)
    for formulation in (JointCoordinates(), MaximalCoordinates()):
        structure = ModelStructure(rig, free, formulation)
        system = structure.system(fixed, free_values)
        angles = grid.filtered_angles[:n]
        states = formulation.initial_states(system, jnp.asarray(angles),
                                            formulation.start_rates(angles, 1e-3), 1e-3)
        lin = jit(linearize, static_argnums=0)(structure, fixed, free_values, states, data)

        def residuals(x, parameter_values, structure=structure):
            return np.asarray(compiled(structure, fixed, parameter_values, x, data))

        assert np.all(np.any(np.abs(lin.parameters) > 0, axis=(0, 1))), formulation.name
        # a step of 1e-4: the initial block of maximal coordinates goes through a stiff
        # projection whose round-off swamps the differences of a 1e-6 step (measured)
        assert_parameter_columns(residuals, states, free, free_values, lin.parameters, 1e-4)


def test_the_encoder_offset_moves_where_the_pendulum_hangs(rig_with_terms):
    """Reading = model angle + offset.

    The pose at the readings (θ1, θ2 + 0.03) with the offset is the pose at (θ1, θ2) without it.
    """
    values = parameter_arrays(rig_with_terms.parameters)
    with_offset = get_rig("furuta").build(values)
    without = get_rig("furuta").build({**values, "encoder_offset2": np.asarray(0.0)})
    moved = states_from_joints(with_offset, jnp.array([0.4, 0.13]), jnp.zeros(2))
    plain = states_from_joints(without, jnp.array([0.4, 0.1]), jnp.zeros(2))
    np.testing.assert_allclose(moved.position, plain.position, atol=1e-15)
    np.testing.assert_allclose(joint_angles(with_offset, plain), [0.4, 0.13], atol=1e-15)


def test_the_ripple_is_the_torque_its_harmonics_say(rig_with_terms):
    system = rig_of(rig_with_terms).build(parameter_arrays(rig_with_terms.parameters))
    hinge = system.hinges[0]
    for angle in (0.0, 0.1, 1.3):
        expected = 4e-3 * np.cos(8 * angle) - 3e-3 * np.sin(8 * angle)
        assert float(ripple_torque(hinge, jnp.asarray(angle))) == pytest.approx(expected,
                                                                                abs=1e-15)
    assert float(ripple_torque(system.hinges[1], jnp.asarray(0.3))) == 0.0


@pytest.mark.parametrize("terms", [
    ("offsets",),
    # 210 s, nearly all compiling: four free sets, two of them on a rig with dry friction
    pytest.param(("offsets", "dry"), marks=pytest.mark.slow)])
def test_the_comparison_keeps_the_term_the_held_out_recordings_need_and_no_other(tmp_path,
                                                                                 terms):
    """A rig whose pendulum encoder reads 0.03 rad where it hangs, and no dry friction.

    Two simulated recordings (a multisine and pulses); the terms compared: offsets (and dry).
    The offset is chosen (each recording predicted better from a fit on the other with it), dry
    friction is not. The joint fit alone, to keep the test short.
    """
    truth = apply_overrides(load_config(EXAMPLE), set_values={"encoder_offset2": 0.03})
    bags = []
    for scenario, seed in (("multisine", 1), ("pulse", 2)):
        bags.append(tmp_path / scenario)
        write_simulated_bag(truth, scenario, bags[-1], duration_s=3.0, noise_rad=1e-3,
                            seed=seed)
    nominal = apply_overrides(truth, set_values={"encoder_offset2": 0.0},
                              simulation_refinement="off")
    fits = 2 * len(candidate_sets(terms))
    lines, written_before = [], {}

    def say(line):
        lines.append(line)
        if line.startswith(f"[3/{fits}]"):  # the first candidate done: already on disk
            written_before.update(yaml.safe_load((tmp_path / "out" /
                                                  "model_comparison.yaml").read_text()))

    comparison = compare_models(nominal, bags, terms, tmp_path / "out", say=say)
    assert len(lines) == fits and lines[0].startswith(f"[1/{fits}] no term: calibrating on 1")
    assert written_before["chosen"] is None
    assert [row["terms"] for row in written_before["candidates"]] == [[]]
    assert [c.terms for c in comparison.candidates] == list(candidate_sets(terms))
    assert comparison.choice.candidate.terms == ("offsets",), comparison.choice.reason
    by_terms = {c.terms: c for c in comparison.candidates}
    assert np.all(by_terms[("offsets",)].scores < by_terms[()].scores)
    written = yaml.safe_load(comparison.written.read_text())
    assert written["chosen"]["terms"] == ["offsets"]
    assert set(written["candidates"][0]["held_out"]) == set(comparison.recordings)
    offset = written["candidates"][1]["held_out"][comparison.recordings[0]]
    assert offset["fitted_on_the_others"]["encoder_offset2"] == pytest.approx(0.03, abs=3e-3)


def test_a_ripple_needs_its_period_and_only_the_furuta_rig_has_one():
    plain = load_config("furuta")
    with pytest.raises(ConfigError, match=r"--free: ripple_per_revolution: missing: the arm's "
                                          r"torque ripple is on \(ripple_cos1\)"):
        apply_overrides(plain, free=["ripple_cos1"], sources={"free": "--free"})
    data = load_config("pendulum").to_dict()
    with pytest.raises(ConfigError, match="ripple_per_revolution: only the furuta rig"):
        parse_config({**data, "ripple_per_revolution": 8})
    data = plain.to_dict()
    with pytest.raises(ConfigError, match="ripple_per_revolution: expected an integer >= 1"):
        parse_config({**data, "ripple_per_revolution": 2.5})
    config = parse_config({**data, "ripple_per_revolution": 8})
    assert config.ripple_per_revolution == 8
    assert parse_config(config.to_dict()) == config
    # a period without an amplitude leaves the ripple off: the rig is built without it
    assert rig_of(config) is rig_of(plain)


def test_compare_models_prints_the_table_and_the_choice(tmp_path, monkeypatch, capsys):
    """The command's shell: terms from --terms, a column per recording, the choice's reason."""
    import mb_estimation.api as api
    from mb_estimation.cli import main

    bags = [tmp_path / "a.csv", tmp_path / "long_recording_name.csv"]
    for bag in bags:
        bag.write_text("")
    candidates = (_candidate((), [2.0, 3.0]), _candidate(("dry",), [1.0, 1.5]))
    asked = {}

    def compare(config, sources, terms, output, **_):
        asked.update(terms=terms, sources=list(map(str, sources)))
        names = tuple(str(source) for source in sources)
        return api.ModelComparison(names, candidates, choose(candidates, names))

    monkeypatch.setattr(api, "compare_models", compare)
    assert main(["compare-models", *map(str, bags), "--config", EXAMPLE, "--terms", "dry"]) == 0
    out = capsys.readouterr().out
    assert asked["terms"] == ("dry",)
    assert "terms  mean       a.csv      long_recording_name.csv" in out
    assert "  dry    1.250e+00  1.000e+00  1.500e+00" in out
    assert "chosen: dry (held-out score 1.25 rad" in out
    assert main(["compare-models", *map(str, bags), "--config", EXAMPLE, "--terms",
                 "cogging"]) == 2
    assert "error: --terms: unknown term 'cogging'" in capsys.readouterr().err
