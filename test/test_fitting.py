"""The plan of stages each kind of config gives (no fit runs here).

A rigid rig (``furuta``, the ODrive example, the pendulum): joint levels at 2h then h, then
the simulation-error fit through the rigid model, kept where it follows. Compliant hinges
(``furuta_synthetic``): the last stage runs the config's simulator with a lead of 3 τ.
The paper's estimator: one fit. The method settings that change the plan, the states-only fit,
and recordings too short for the simulation stage.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mb_estimation.config import apply_overrides, load_config
from mb_estimation.fitting import Keep, Progress, Stage, StageKind, plan_of
from mb_estimation.models import RIGID_LONGEST_SEGMENT_S, RIGID_SHOOTING_DT
from mb_estimation.setup import set_up, warm_up_recording

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "examples" / "odrive_furuta.yaml"


def _recording(config, duration_s=20.0, rate_hz=1000.0):
    return warm_up_recording(config, duration_s, rate_hz)


def _plan(config, recording=None, *, start_s=None, end_s=None, **options):
    recording = _recording(config) if recording is None else recording
    return plan_of(set_up(config, [recording], start_s=start_s, end_s=end_s), **options)


def _fits(plan):
    return [(str(stage.kind), stage.dt) for stage in plan.stages]


@pytest.mark.parametrize("name", ["furuta", str(EXAMPLE), "pendulum"])
def test_a_rigid_rig_fits_joint_levels_then_through_the_rigid_model(name):
    config = load_config(name)
    assert config.hinges == "rigid"
    plan = _plan(config)
    assert _fits(plan) == [("joint", 0.002), ("joint", 0.001),
                           ("simulation", RIGID_SHOOTING_DT)]
    last = plan.stages[-1]
    assert last.keep is Keep.IF_IT_FOLLOWS and last.shooting.rigid
    assert last.shooting.longest_segment_s == RIGID_LONGEST_SEGMENT_S
    assert last.shooting.lead_s == 0.0 and plan.note is None and plan.estimate_parameters


def test_compliant_hinges_are_fitted_through_the_configs_simulator():
    config = load_config("furuta_synthetic")
    assert config.hinges == "compliant"
    plan = _plan(config, _recording(config, rate_hz=500.0))
    assert _fits(plan) == [("joint", 0.004), ("joint", 0.002),
                           ("simulation", config.simulation.dt)]
    last = plan.stages[-1]
    assert last.keep is Keep.ALWAYS and not last.shooting.rigid
    taus = [float(v) for name, v in config.parameters.items() if name.startswith("tau")]
    assert last.shooting.lead_s == pytest.approx(3.0 * max(taus))
    assert last.shooting.segment_s == config.advanced.simulation_segment_s


def test_the_papers_estimator_is_one_fit_at_its_step():
    config = apply_overrides(load_config("furuta"), estimator="paper")
    plan = _plan(config)
    assert plan.stages == (Stage(StageKind.PAPER, 0.01),)  # the paper's step unless method.step_s


@pytest.mark.parametrize(("mode", "fits", "keep"), [
    ("off", ["joint", "joint"], None),
    ("on", ["joint", "joint", "simulation"], Keep.IF_IT_FOLLOWS),
    ("auto", ["joint", "joint", "simulation"], Keep.IF_IT_PREDICTS_BETTER),
])
def test_the_simulation_refinement_setting_shapes_the_last_stage(mode, fits, keep):
    config = apply_overrides(load_config("furuta"), simulation_refinement=mode)
    plan = _plan(config)
    assert [stage.kind for stage in plan.stages] == fits
    if keep is not None:
        assert plan.stages[-1].keep == keep


def test_levels_and_the_finest_step_come_from_the_config():
    config = apply_overrides(load_config("furuta"), step_s=5e-4)
    config = dataclasses.replace(config, advanced=dataclasses.replace(
        config.advanced, refinement_levels=3))
    plan = _plan(config)
    assert _fits(plan)[:3] == [("joint", 0.002), ("joint", 0.001), ("joint", 0.0005)]


def test_a_states_only_fit_is_the_finest_joint_level_alone():
    config = load_config("furuta")
    plan = _plan(config, estimate_parameters=False)
    assert _fits(plan) == [("joint", 0.001)] and not plan.estimate_parameters


def test_recordings_shorter_than_a_segment_keep_the_joint_fit_with_a_note():
    config = load_config("furuta")
    segment_s = config.advanced.simulation_segment_s
    short = _plan(config, _recording(config, duration_s=0.5 * segment_s))
    assert [stage.kind for stage in short.stages] == ["joint", "joint"]
    assert "shorter than one segment" in short.note
    # trimmed by --start/--end to less than a segment: the same
    trimmed = _plan(config, start_s=1.0, end_s=1.0 + 0.5 * segment_s)
    assert trimmed.stages == short.stages and "shorter than one segment" in trimmed.note
    # whatever the mode that asks for the stage
    for mode in ("on", "auto"):
        named = _plan(apply_overrides(config, simulation_refinement=mode),
                      _recording(config, duration_s=0.5 * segment_s))
        assert named.stages == short.stages and "shorter than one segment" in named.note


def test_a_progress_event_names_its_stage():
    config = load_config("furuta")
    plan = _plan(config)
    event = Progress(1, plan.stages, steps=100, recordings=1)
    assert event.stage == plan.stages[1] and event.iteration is None
