"""Each command as a library function: configs and recordings in, files out.

The command line (:mod:`mb_estimation.cli`) parses its arguments, calls one of these and prints
the progress events it passes on and what it returns. :func:`calibrate` runs a calibration
one way through: read the recordings → set up (:func:`~mb_estimation.setup.set_up`) → fit
(:func:`~mb_estimation.fitting.fit`) → assess (:func:`~mb_estimation.assess.assess`) → judge
(:func:`~mb_estimation.verdict.verdict`) → write (:func:`~mb_estimation.results.write_results`,
the report). :func:`cross_validate` scores fixed parameters by states-only fits,
:func:`compare_models` scores the driver and sensor terms by recording-wise cross-validation,
:func:`sweep_and_write` fits over a grid of method settings, :func:`write_simulated_bag`
simulates a scenario into a bag with its ground truth, :func:`design_experiment` designs an
input for the free parameters. Whatever can be checked before a fit
(the output folder, the recordings, the trim, the free set) is checked first.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from mb_estimation.assess import assess, kept_fit
from mb_estimation.calibration import Calibration
from mb_estimation.config import Config, ConfigError, apply_overrides
from mb_estimation.errors import SimulationError
from mb_estimation.estimation import EstimationResult
from mb_estimation.excitation import MAX_EVALUATIONS, ExcitationDesign, Limits, design_excitation
from mb_estimation.fitting import Progress, fit, plan_of
from mb_estimation.io.bags import BagError, write_rig_bag
from mb_estimation.io.files import writable_folder
from mb_estimation.io.parameter_files import write_crossval, write_model_comparison
from mb_estimation.io.recordings import read_recording
from mb_estimation.message_types import JOINT_STATE
from mb_estimation.model_terms import (
    Candidate,
    Choice,
    candidate_sets,
    choose,
    held_out_score,
    scores_table,
    term_parameters,
)
from mb_estimation.numerics import compiling_meanwhile
from mb_estimation.results import write_results
from mb_estimation.scenarios import Scenario
from mb_estimation.setup import Setup, check_input_gain, model_of, rig_of, set_up
from mb_estimation.signals import Recording, recorded_joint_states
from mb_estimation.simulation import sample_step
from mb_estimation.verdict import verdict

__all__ = ["SIMULATED_START_TIME_S", "ModelComparison", "SimulatedBag", "SweepPoint", "SweepRun",
           "calibrate", "compare_models", "cross_validate", "design_experiment", "mean_score",
           "read_recordings", "sweep", "sweep_and_write", "write_simulated_bag"]

# Simulated bags start at this wall-clock time [s since the Unix epoch]: a stamp of 0 means
# "unset" to many ROS tools.
SIMULATED_START_TIME_S = 1_700_000_000


def read_recordings(config: Config, sources: Sequence[str | Path]) -> tuple[Recording, ...]:
    """Each of ``sources`` as the config's rig sees it.

    A bag folder, a .db3/.mcap file or a PlotJuggler CSV export each.
    """
    return tuple(read_recording(path, config) for path in sources)


def _check_free(config: Config) -> None:
    if not config.free:
        raise ConfigError(f"{config.source}: no free parameters to calibrate: name them under "
                          "free: or with --free (crossval scores fixed values)")


def calibrate(config: Config, sources: Sequence[str | Path], output: str | Path, *,
              start_s: float | None = None, end_s: float | None = None,
              held: Mapping[str, Sequence[str]] | None = None,
              progress: Callable[[Progress], None] | None = None,
              on_set_up: Callable[[Setup], None] | None = None) -> Calibration:
    """Calibrate the config's free parameters from recordings; write the results (calibrate).

    Reads each of ``sources`` (trimmed to ``start_s``..``end_s`` s from its start; ``held``: by
    source, as given, the joints it holds still, where detection is overruled), sets the
    calibration up (``on_set_up`` sees the :class:`~mb_estimation.setup.Setup` before any
    fit), fits the plan of stages the config asks for (``progress`` sees its
    events), assesses the fit kept (predictions 0.5 s ahead from the estimated states, open-loop
    replays, the Cramér–Rao bound, what the data determine), judges it and writes
    parameters.yaml, ros_parameters.yaml, states.csv, calibrated.urdf (the Furuta rig) and
    report.html (figures in figures/) into ``output``. Bad input raises a
    :class:`~mb_estimation.errors.UserError` before any fit.
    """
    from mb_estimation.report import write_report  # matplotlib: only where a report is written

    output = writable_folder(output)
    _check_free(config)
    recordings = read_recordings(config, sources)
    # ``held`` by source as given, set_up's by recording name (a source's name as read)
    names = {str(source): recording.name for source, recording in zip(sources, recordings,
                                                                       strict=True)}
    setup = set_up(config, recordings, start_s=start_s, end_s=end_s, held={
        names.get(str(source), str(source)): joints for source, joints in (held or {}).items()})
    check_input_gain(setup)
    if on_set_up is not None:
        on_set_up(setup)
    # the checks' simulators compile on the other core while the fit runs
    with compiling_meanwhile(setup.model.compile_checks, config.parameters, setup.grids[0]):
        fitted = fit(setup, progress=progress)
        assessment = assess(setup, fitted)
    calibration = Calibration(setup, fitted, assessment, verdict(setup, assessment))
    write_results(calibration, output)
    write_report(output, calibration)
    return calibration


def cross_validate(config: Config, sources: Sequence[str | Path],
                   output: str | Path | None = None, *, start_s: float | None = None,
                   end_s: float | None = None,
                   progress: Callable[[Progress], None] | None = None) -> list[dict]:
    """Score the config's parameters on each recording: its states-only fit's MSE (crossval).

    Paper §4.5: with the parameters fixed, only the states of each of ``sources`` are
    estimated. Returns one row per recording (``path``, ``mse``, ``observation_mse``,
    ``impulse_mse``), written with their mean into ``output``/crossval.yaml when ``output`` is
    given. ``progress`` sees the fits' :class:`~mb_estimation.fitting.Progress` events. Every
    recording is read and set up before the first fit.
    """
    if output is not None:
        writable_folder(output)
    setups = [set_up(config, [recording], start_s=start_s, end_s=end_s)
              for recording in read_recordings(config, sources)]
    rows = []
    for path, setup in zip(sources, setups, strict=True):
        result = fit(setup, plan_of(setup, estimate_parameters=False), progress).joint
        rows.append({"path": str(path), "mse": result.cost,
                     "observation_mse": result.observation_mse,
                     "impulse_mse": result.impulse_mse})
    if output is not None:
        write_crossval(output, rows, mean_score(rows))
    return rows


@dataclass(frozen=True)
class ModelComparison:
    """What :func:`compare_models` found: every candidate's held-out scores and the choice."""

    recordings: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    choice: Choice
    written: Path | None = None


def compare_models(config: Config, sources: Sequence[str | Path], terms: Sequence[str],
                   output: str | Path | None = None, *, start_s: float | None = None,
                   end_s: float | None = None,
                   say: Callable[[str], None] | None = None) -> ModelComparison:
    """Which of the driver and sensor ``terms`` the recordings support (compare-models).

    Every subset of ``terms`` (:mod:`mb_estimation.model_terms`) is added to the config's free
    parameters and scored by recording-wise cross-validation: each recording is held out in
    turn, the others calibrated together (the calibration's own fit), and the held-out one
    predicted 0.5 s ahead from its states estimated with those values fixed. The choice is the
    fewest terms no larger set predicts better (:func:`~mb_estimation.model_terms.choose`).
    ``say`` sees a line per fit. Writes ``output``/model_comparison.yaml when ``output`` is
    given, after each candidate (``chosen: null`` until the last one: a crash keeps the finished
    candidates). Every candidate's config and every recording is checked before the first fit.
    """
    if len(sources) < 2:
        raise ConfigError("compare-models needs two recordings or more: each one is predicted "
                          "by a fit on the others")
    if output is not None:
        writable_folder(output)
    recordings = read_recordings(config, sources)
    names = tuple(recording.name for recording in recordings)
    sets = candidate_sets(terms)
    configs = []
    for terms_on in sets:
        free = dict.fromkeys([*config.free_names, *term_parameters(terms_on)])
        configs.append(apply_overrides(config, free=list(free), sources={"free": "--terms"}))
        _check_free(configs[-1])
    folds = [[recording for other, recording in enumerate(recordings) if other != held]
             for held in range(len(recordings))]
    checked = set_up(configs[-1], recordings, start_s=start_s, end_s=end_s)  # the data, once
    check_input_gain(checked)
    candidates, total, count = [], len(sets) * len(recordings), 0
    for terms_on, candidate_config in zip(sets, configs, strict=True):
        rms, fitted = [], []
        for held, training in enumerate(folds):
            count += 1
            if say is not None:
                say(f"[{count}/{total}] {' + '.join(terms_on) or 'no term'}: calibrating on "
                    f"{len(training)} recording(s), predicting {names[held]}")
            setup = set_up(candidate_config, training, start_s=start_s, end_s=end_s)
            values = _kept_result(setup, None).parameters
            fitted.append({name: float(np.ravel(values[name])[0])
                           for name in term_parameters(terms_on)})
            rms.append(_held_out_prediction_rms(candidate_config, values, recordings[held],
                                                start_s, end_s))
        rms = np.asarray(rms)
        candidates.append(Candidate(terms_on, np.array([held_out_score(r) for r in rms]), rms,
                                    tuple(fitted)))
        if output is not None and len(candidates) < len(sets):  # a crash keeps these
            write_model_comparison(output, terms, names, scores_table(candidates, names), None)
    comparison = ModelComparison(names, tuple(candidates), choose(candidates, names))
    if output is not None:
        comparison = dataclasses.replace(comparison, written=write_model_comparison(
            output, terms, names, scores_table(candidates, names), comparison.choice))
    return comparison


def _held_out_prediction_rms(config: Config, values: Mapping[str, object],
                             recording: Recording, start_s: float | None,
                             end_s: float | None) -> np.ndarray:
    """RMS angle error [rad] per joint of ``recording`` predicted 0.5 s ahead with ``values``.

    From its states estimated with every parameter fixed at ``values`` (a states-only fit).
    """
    fixed = dataclasses.replace(config, free={}, parameters={
        name: tuple(np.ravel(value)) if np.size(value) > 1 else float(np.ravel(value)[0])
        for name, value in values.items()})
    setup = set_up(fixed, [recording], start_s=start_s, end_s=end_s)
    states = fit(setup, plan_of(setup, estimate_parameters=False)).joint
    check = setup.model.predictions(states.parameters, setup.grids, states.recordings)[0]
    return np.asarray(check.rms[-1])


def mean_score(rows: Sequence[dict]) -> float:
    """The mean cross-validation score of :func:`cross_validate`'s rows."""
    return sum(row["mse"] for row in rows) / len(rows)


@dataclass(frozen=True)
class SweepPoint:
    """One fit of a method-parameter sweep: step h [s], κ, hinge compliance and the result."""

    dt: float
    kappa: float
    compliance: float | None  # None: the config's own hinge compliances
    result: EstimationResult


def _kept_result(setup: Setup, progress) -> EstimationResult:
    """The result a calibration of ``setup`` keeps (its fit, without the rest of the checks)."""
    return kept_fit(setup, fit(setup, progress=progress)).result


def sweep(config: Config, recordings: Sequence[Recording], *, dts: Sequence[float],
          kappas: Sequence[float], compliances: Sequence[float | None],
          start_s: float | None = None, end_s: float | None = None,
          progress: Callable[[Progress], None] | None = None) -> tuple[SweepPoint, ...]:
    """Fit the config's free parameters at every (h, κ, compliance) of the grid (paper §4.7).

    Every fit starts from the config's values, so the points differ only in the method
    parameter; h is the step of the paper's fit or the finest step of the consistent path.
    A new h compiles anew, κ and the compliance do not. ``progress`` sees the fits' events.
    Every point is set up before the first fit.
    """
    grid = []
    for dt in dts:
        on_grid = apply_overrides(config, step_s=dt)
        for compliance, kappa in itertools.product(compliances, kappas):
            point = apply_overrides(on_grid, kappa=kappa, compliance=compliance)
            grid.append((dt, kappa, compliance,
                         set_up(point, recordings, start_s=start_s, end_s=end_s)))
    return tuple(SweepPoint(dt, kappa, compliance, _kept_result(setup, progress))
                 for dt, kappa, compliance, setup in grid)


@dataclass(frozen=True)
class SweepRun:
    """The grid of :func:`sweep_and_write` (with the defaults filled in) and what it gave.

    ``compliances``: None for the config's own hinge compliances; ``points``: one fit per
    combination, in the order fitted; ``written``: the files written; ``notes``: what reading
    did to the recordings.
    """

    free: tuple[str, ...]
    dts: tuple[float, ...]
    kappas: tuple[float, ...]
    compliances: tuple[float | None, ...]
    points: tuple[SweepPoint, ...] = ()
    written: tuple[Path, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """How many fits the grid has."""
        return len(self.dts) * len(self.kappas) * len(self.compliances)


def sweep_and_write(config: Config, sources: Sequence[str | Path], output: str | Path, *,
                    dts: Sequence[float] | None = None, kappas: Sequence[float] | None = None,
                    compliances: Sequence[float] | None = None, start_s: float | None = None,
                    end_s: float | None = None,
                    progress: Callable[[Progress], None] | None = None) -> SweepRun:
    """Fit at every combination of steps, κ and compliances; write sweep.csv and figures (sweep).

    ``dts``/``kappas``: default the config's step (the finest of its fit) and κ;
    ``compliances``: default the config's own. Each fit starts from the config's values
    (:func:`sweep`; ``progress`` sees the fits' events); sweep.csv and sweep_<setting>.png go
    into ``output``.
    """
    from mb_estimation.report.sweep import write_sweep  # matplotlib: only where it is needed

    output = writable_folder(output)
    _check_free(config)
    recordings = read_recordings(config, sources)
    setup = set_up(config, recordings, start_s=start_s, end_s=end_s)
    check_input_gain(setup)
    run = SweepRun(setup.free, tuple(dts or setup.steps[-1:]),
                   tuple(kappas or (config.method.kappa,)), tuple(compliances or (None,)),
                   notes=setup.notes)
    points = sweep(config, recordings, dts=run.dts, kappas=run.kappas,
                   compliances=run.compliances, start_s=start_s, end_s=end_s,
                   progress=progress)
    spec = config.rig_spec
    written = write_sweep(output, points, {name: spec.parameter(name).unit
                                           for name in setup.free})
    return dataclasses.replace(run, points=points, written=tuple(written))


@dataclass(frozen=True)
class SimulatedBag:
    """What :func:`write_simulated_bag` wrote: the bag folder and the settings it simulated.

    ``samples``: joint-state (and voltage) messages; ``steps``: simulation steps;
    ``elapsed_s``: the simulation's wall time, compilation included.
    """

    path: Path
    scenario: str
    duration_s: float
    dt: float
    rate_hz: float
    noise_rad: float
    seed: int
    encoder_counts: int | None
    samples: int
    steps: int
    elapsed_s: float


def write_simulated_bag(config: Config, scenario: str | Scenario, output: str | Path, *,
                        duration_s: float, dt: float | None = None,
                        rate_hz: float | None = None, noise_rad: float | None = None,
                        seed: int = 0, encoder_counts: int | None = None,
                        storage: str = "sqlite3", overwrite: bool = False,
                        start_time_s: float = SIMULATED_START_TIME_S,
                        drifts: Mapping[str, tuple[float, float]] | None = None
                        ) -> SimulatedBag:
    """Simulate the config's rig through ``scenario`` and write a rosbag2 bag (simulate).

    The model the config's ``hinges`` declare (:func:`~mb_estimation.setup.model_of`) steps at
    ``dt`` [s] (or the largest step below it that divides the sample period:
    :func:`~mb_estimation.simulation.sample_step`) and is sampled at ``rate_hz``, with Gaussian
    angle noise ``noise_rad`` [rad] (seed ``seed``) and ``encoder_counts`` per revolution (each
    default: the config's ``simulation`` section). The bag at ``output`` holds the joint states
    and the voltage as the config's ``recording`` reads them (topics, names, offset, sign, the
    voltage's type or joint), stamped from ``start_time_s`` [s since the epoch]; beside them
    ground_truth.yaml, the config with these settings (a valid config; its values the rig's at
    the start). ``drifts`` (:func:`~mb_estimation.simulation.drifted_values`): a wearing rig,
    each named parameter moving linearly from its value at the start. ``output`` must not exist
    unless ``overwrite``.
    """
    settings = config.simulation
    rate = float(rate_hz if rate_hz is not None else settings.rate_hz)
    dt, _ = sample_step(float(dt if dt is not None else settings.dt), rate)
    noise = noise_rad if noise_rad is not None else settings.noise_rad
    counts = encoder_counts if encoder_counts is not None else settings.encoder_counts
    if noise < 0:
        raise SimulationError(f"the angle noise must be non-negative, got {noise} rad")
    output = Path(output)
    if output.exists() and not overwrite:  # before the simulation, not after it
        raise BagError(f"{output} exists already; pass overwrite=True to replace it")

    name = scenario if isinstance(scenario, str) else scenario.name
    model = model_of(config)
    started = time.perf_counter()
    recording = model.simulate(config.parameters, scenario, duration_s=duration_s, dt=dt,
                               rate_hz=rate, noise_rad=noise, seed=seed,
                               encoder_counts=counts, drifts=drifts)
    elapsed = time.perf_counter() - started

    recording_settings = config.recording
    joints = [recording_settings.joints[name] for name in model.rig.spec.joints]
    positions, velocities = recorded_joint_states(joints, recording.measured_angles,
                                                  recording.joint_rates)
    stamps_ns = (int(round(start_time_s * 1e9))
                 + np.round(recording.time_s * 1e9).astype(np.int64))
    has_input = recording.inputs.shape[1] > 0
    in_joint_states = recording_settings.voltage_type == JOINT_STATE
    voltage_joint = recording_settings.voltage_joint if in_joint_states else None
    write_rig_bag(
        output,
        joint_time_ns=stamps_ns,
        joint_names=[joint.name for joint in joints],
        joint_positions=positions,
        joint_velocities=velocities,
        joint_states_topic=recording_settings.joint_states_topic,
        voltage_time_ns=stamps_ns if has_input else None,
        voltage=recording.inputs[:, 0] if has_input else None,
        voltage_topic=(recording_settings.voltage_topic
                       if has_input and not in_joint_states else None),
        voltage_type=recording_settings.voltage_type,
        voltage_index=recording_settings.voltage_index,
        voltage_joint=voltage_joint,
        storage=storage,
        overwrite=overwrite,
    )
    header = (
        f"# Ground truth of a simulation by mb-estimation simulate: scenario {name}, "
        f"duration {duration_s} s, step {dt} s,\n# rate {rate} Hz, noise {noise} rad, "
        f"seed {seed}, encoder counts {counts}. A valid config: use it with --config.\n"
    )
    if drifts:
        header += ("# A wearing rig: the values below are the start's; " + ", ".join(
            f"{name} {100 * fraction:+g} % every {period:g} s" for name, (fraction, period)
            in drifts.items()) + ", linearly.\n")
    truth = config.to_dict()
    truth["simulation"].update(dt=dt, rate_hz=rate, noise_rad=noise, encoder_counts=counts)
    (output / "ground_truth.yaml").write_text(header + yaml.safe_dump(truth, sort_keys=False))
    return SimulatedBag(output, name, duration_s, dt, rate, noise, seed, counts,
                        len(recording.time_s), int(round(duration_s / dt)), elapsed)


def design_experiment(config: Config, output: str | Path, *, duration_s: float,
                      limits: Limits, noise_rad: float | None = None,
                      rate_hz: float | None = None, max_evaluations: int = MAX_EVALUATIONS,
                      seed: int = 0,
                      progress: Callable[[int, float, float], None] | None = None
                      ) -> tuple[ExcitationDesign, tuple[Path, ...]]:
    """An input for the config's free parameters at its values (excite), and its files.

    :func:`~mb_estimation.excitation.design_excitation` at ``rate_hz`` [Hz] (default: the
    config's ``simulation.rate_hz``) from rest, hanging (the ``multisine`` scenario's start),
    the angle noise ``noise_rad`` (default: the config's ``simulation.noise_rad``, else 1e-3
    rad), the search's ``seed``; writes excitation.csv, excitation.yaml and excitation.png into
    ``output``
    (:mod:`mb_estimation.report.excitation`).
    """
    names = design_names(config, duration_s=duration_s, limits=limits, rate_hz=rate_hz)
    from mb_estimation.report.excitation import write_excitation  # matplotlib: only here

    folder = writable_folder(output)
    if noise_rad is None:
        noise_rad = config.simulation.noise_rad or 1e-3
    rig = rig_of(config)
    start = np.zeros(2 * len(rig.spec.joints))  # at rest, hanging (the multisine's start)
    design = design_excitation(rig, config.parameters, names, duration_s=duration_s,
                               rate_hz=rate_hz or config.simulation.rate_hz, limits=limits,
                               start=start,
                               noise_rad=noise_rad, max_evaluations=max_evaluations, seed=seed,
                               progress=progress)
    designed_at = {name: float(np.ravel(config.parameters[name])[0]) for name in names}
    return design, write_excitation(folder, design, limits, noise_rad, designed_at)


def design_names(config: Config, *, duration_s: float, limits: Limits,
                 rate_hz: float | None = None) -> tuple[str, ...]:
    """The free parameters :func:`design_experiment` designs for, checked before any work.

    A :class:`~mb_estimation.config.ConfigError` where the rig has no input, a free parameter
    is not a nonzero scalar, or the bound, duration or rate is not positive.
    """
    if not config.rig_spec.inputs:
        raise ConfigError(f"excite: the {config.rig} rig has no input to design")
    names = tuple(config.free_names)
    if not names:
        raise ConfigError(f"{config.source}: no free parameters to design for: name them "
                          "under free: or with --free")
    vector = [name for name in names if np.size(config.parameters[name]) != 1]
    if vector:
        raise ConfigError(f"excite: {', '.join(vector)} is not a scalar parameter: its bound "
                          "is not computed; leave it out of --free")
    zero = [name for name in names if float(np.ravel(config.parameters[name])[0]) == 0.0]
    if zero:
        raise ConfigError(f"excite: {', '.join(zero)} is 0 at the values designed at (the "
                          "config's, with --set and --from): a relative std needs a nonzero "
                          "value (give a guess with --set or --from)")
    if limits.max_input <= 0 or duration_s <= 0 or (rate_hz is not None and rate_hz <= 0):
        raise ConfigError("excite: --max-input, --duration and --rate must be positive")
    return names
