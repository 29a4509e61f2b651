"""The commands' work as library functions: configs and recordings in, files out.

The command line (:mod:`mb_estimation.cli`) parses its arguments, calls one of these and prints
the progress events it passes on and what it returns: reading the recordings, calibrating
(:mod:`mb_estimation.calibration`), validating, writing the result files and the report
(:func:`calibrate_and_write`, :func:`cross_validate`, :func:`sweep` and
:func:`sweep_and_write`), and simulating
a scenario into a bag with its ground truth (:func:`write_simulated_bag`).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from mb_estimation import pipeline
from mb_estimation.calibration import Progress, calibrate_recordings, stage_following
from mb_estimation.config import Config, apply_overrides
from mb_estimation.cramer_rao import CramerRao
from mb_estimation.errors import SimulationError
from mb_estimation.estimation import EstimationResult
from mb_estimation.estimation.consistent import step_dependence
from mb_estimation.estimation.identifiability import Identifiability
from mb_estimation.io.bags import BagError, write_rig_bag
from mb_estimation.io.recordings import read_recording
from mb_estimation.io.results import write_crossval, write_outputs
from mb_estimation.message_types import JOINT_STATE
from mb_estimation.signals import GridData, Recording, recorded_joint_states
from mb_estimation.simulation import simulate_recording
from mb_estimation.validation import OpenLoopCheck, PredictionCheck
from mb_estimation.verdict import Verdict, verdict

__all__ = ["SIMULATED_START_TIME_S", "CalibrationRun", "SimulatedBag",
           "SweepPoint", "SweepRun", "calibrate_and_write", "cross_validate", "sweep",
           "sweep_and_write", "write_simulated_bag"]

# Simulated bags start at this wall-clock time [s since the Unix epoch]: a stamp of 0 means
# "unset" to many ROS tools.
SIMULATED_START_TIME_S = 1_700_000_000


def _units(config: Config, names) -> dict[str, str]:
    return {name: config.rig_spec.parameter(name).unit for name in names}


@dataclass(frozen=True)
class CalibrationRun:
    """What :func:`calibrate_and_write` did.

    ``notes``: what reading did to each recording (:func:`pipeline.recording_notes`);
    ``method``: the method settings written into parameters.yaml; ``predictions``: the fit
    predicted from its estimated states; ``advice``: a note for the user when the fit does not
    predict the recordings, or how ``method.simulation_refinement: auto`` decided (else None);
    ``open_loop``: each recording replayed open loop; ``identified``: what the data
    determine; ``verdict``: whether to trust the values, and what to do; ``bound``: the
    Cramér–Rao bound of the scalar free parameters (rigid hinges), else None.
    """

    result: EstimationResult
    grids: tuple[GridData, ...]
    notes: tuple[str, ...]
    method: dict
    predictions: tuple[PredictionCheck, ...]
    advice: str | None
    open_loop: tuple[OpenLoopCheck, ...]
    identified: Identifiability
    verdict: Verdict
    bound: CramerRao | None = None


def _read(config: Config, sources: Sequence[str | Path], start_s: float | None,
          end_s: float | None
          ) -> tuple[list[Recording], tuple[str, ...], tuple[GridData, ...]]:
    """The recordings read from ``sources``, what reading did to each (the notes), the grids.

    The grids are those of the config's (final) fit (:func:`pipeline.finest_step`); the gap
    steps are counted on them.
    """
    recordings = [read_recording(path, config) for path in sources]
    grids = pipeline.prepare(config, recordings, start_s=start_s, end_s=end_s,
                             dt=pipeline.finest_step(config, recordings))
    return recordings, tuple(pipeline.recording_notes(recordings, grids)), grids


def calibrate_and_write(config: Config, sources: Sequence[str | Path], output: str | Path, *,
                        start_s: float | None = None, end_s: float | None = None,
                        progress: Callable[[Progress], None] | None = None) -> CalibrationRun:
    """Estimate from recordings, validate, write the result files and the report (calibrate).

    Reads each of ``sources`` (a bag folder, a .db3/.mcap file or a PlotJuggler CSV export,
    trimmed to ``start_s``..``end_s`` s from its start); estimates the config's free parameters
    and the states by the config's plan of stages
    (:func:`~mb_estimation.calibration.calibrate_recordings`, ``progress`` its events);
    predicts 0.5 s ahead from the estimated states and replays each recording open loop; writes
    parameters.yaml, ros_parameters.yaml, states.csv and report.html (figures in figures/) into
    ``output``. Bad input raises a :class:`~mb_estimation.errors.UserError`.
    """
    from mb_estimation.report import write_report  # matplotlib: only where a report is written

    output = Path(output)
    recordings, notes, fit_grids = _read(config, sources, start_s, end_s)
    if config.advanced.estimator != "paper":  # too short for the first step: said before compiling
        pipeline.prepare(config, recordings, start_s=start_s, end_s=end_s,
                         dt=pipeline.consistent_steps(config, recordings)[0])
    # the checks' simulators compile on the other core while the fit runs
    with pipeline.compiling_meanwhile(pipeline.compile_checks, config, fit_grids):
        calibration = calibrate_recordings(config, recordings, start_s=start_s, end_s=end_s,
                                           progress=progress)
        result, grids = calibration.result, calibration.grids
        predictions = (calibration.predictions if calibration.predictions is not None
                       else pipeline.prediction_checks(config, grids, result))
        bound = pipeline.cramer_rao_of(config, grids, result)
        identified = pipeline.identifiability_of(config, result, bound)
        judged = judge(config, result, identified, recordings, grids, predictions, bound)
        method = pipeline.method_summary(config, result)
        write_outputs(output, result, config.rig_spec, method, predictions=predictions,
                      identified=identified, verdict=judged, bound=bound)
        open_loop = pipeline.open_loop_checks(config, grids, result)
    write_report(output, result, grids, open_loop, method=method, notes=list(notes),
                 units=_units(config, result.free), predictions=predictions, verdict=judged)
    return CalibrationRun(result, grids, notes, method, tuple(predictions), calibration.note,
                          open_loop, identified, judged, bound)


def judge(config: Config, result: EstimationResult, identified: Identifiability,
          recordings: Sequence[Recording], grids: Sequence[GridData],
          predictions: Sequence[PredictionCheck], bound: CramerRao | None = None) -> Verdict:
    """The verdict on a calibration (:func:`mb_estimation.verdict.verdict`) from its checks."""
    refined = bool(result.refinement) and result.refinement[-1].formulation == "simulation"
    return verdict(config, result, identified, step_dependence(result),
                   pipeline.prediction_mismatch(grids, result, predictions),
                   pipeline.validation_model(config), refined,
                   pipeline.input_delay(config, recordings, result), bound,
                   stage_following(grids, result))


def cross_validate(config: Config, sources: Sequence[str | Path],
                   output: str | Path | None = None, *, start_s: float | None = None,
                   end_s: float | None = None,
                   progress: Callable[[Progress], None] | None = None) -> list[dict]:
    """Score the config's parameters on each recording: its states-only fit's MSE (crossval).

    Paper §4.5: with the parameters fixed, only the states of each of ``sources`` are
    estimated. Returns one row per recording (``path``, ``mse``, ``observation_mse``,
    ``impulse_mse``), written with their mean into ``output``/crossval.yaml when ``output`` is
    given. ``progress`` sees the fits' :class:`~mb_estimation.calibration.Progress` events.
    """
    rows = []
    for path in sources:
        result = calibrate_recordings(
            config, [read_recording(path, config)], start_s=start_s, end_s=end_s,
            estimate_parameters=False, progress=progress).result
        rows.append({"path": str(path), "mse": result.cost,
                     "observation_mse": result.observation_mse,
                     "impulse_mse": result.impulse_mse})
    if output is not None:
        write_crossval(output, rows, mean_score(rows))
    return rows


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


def sweep(config: Config, recordings: Sequence[Recording], *, dts: Sequence[float],
          kappas: Sequence[float], compliances: Sequence[float | None],
          start_s: float | None = None, end_s: float | None = None,
          progress: Callable[[Progress], None] | None = None) -> tuple[SweepPoint, ...]:
    """Fit the config's free parameters at every (h, κ, compliance) of the grid (paper §4.7).

    Every fit starts from the config's values, so the points differ only in the method
    parameter; h is the step of the paper's fit or the finest step of the consistent path.
    A new h compiles anew, κ and the compliance do not. ``progress`` sees the fits' events.
    """
    points = []
    for dt in dts:
        on_grid = apply_overrides(config, step_s=dt)
        for compliance, kappa in itertools.product(compliances, kappas):
            point_config = apply_overrides(on_grid, kappa=kappa, compliance=compliance)
            result = calibrate_recordings(point_config, recordings, start_s=start_s,
                                          end_s=end_s, progress=progress).result
            points.append(SweepPoint(dt, kappa, compliance, result))
    return tuple(points)


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

    ``dts``/``kappas``: default the config's step (:func:`pipeline.finest_step`) and κ;
    ``compliances``: default the config's own. Each fit starts from the config's values
    (:func:`sweep`; ``progress`` sees the fits' events); sweep.csv and sweep_<setting>.png go
    into ``output``.
    """
    from mb_estimation.report.sweep import write_sweep  # matplotlib: only where it is needed

    recordings, notes, _ = _read(config, sources, start_s, end_s)
    run = SweepRun(tuple(config.free), tuple(dts or (pipeline.finest_step(config, recordings),)),
                   tuple(kappas or (config.method.kappa,)), tuple(compliances or (None,)),
                   notes=notes)
    points = sweep(config, recordings, dts=run.dts, kappas=run.kappas,
                   compliances=run.compliances, start_s=start_s, end_s=end_s,
                   progress=progress)
    written = write_sweep(Path(output), points, _units(config, config.free))
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


def write_simulated_bag(config: Config, scenario: str, output: str | Path, *,
                        duration_s: float, dt: float | None = None,
                        rate_hz: float | None = None, noise_rad: float | None = None,
                        seed: int = 0, encoder_counts: int | None = None,
                        storage: str = "sqlite3", overwrite: bool = False) -> SimulatedBag:
    """Simulate the config's rig through ``scenario`` and write a rosbag2 bag (simulate).

    The rig model (the config's ``hinges``: rigid, or through their compliance and damping)
    steps at ``dt`` [s] and is sampled at ``rate_hz``, with Gaussian angle noise
    ``noise_rad`` [rad] (seed ``seed``) and ``encoder_counts`` per revolution (each default:
    the config's ``simulation`` section). The bag at ``output`` holds the joint states and the
    voltage as the config's ``recording`` reads them (topics, names, offset, sign, the voltage's
    type or joint), stamped from :data:`SIMULATED_START_TIME_S`; beside them ground_truth.yaml,
    the config with these settings (a valid config). ``output`` must not exist unless ``overwrite``.
    """
    settings = config.simulation
    dt = dt if dt is not None else settings.dt
    rate = rate_hz if rate_hz is not None else settings.rate_hz
    noise = noise_rad if noise_rad is not None else settings.noise_rad
    counts = encoder_counts if encoder_counts is not None else settings.encoder_counts
    if noise < 0:
        raise SimulationError(f"the angle noise must be non-negative, got {noise} rad")
    output = Path(output)
    if output.exists() and not overwrite:  # before the simulation, not after it
        raise BagError(f"{output} exists already; pass overwrite=True to replace it")

    rig = pipeline.config_rig(config)
    started = time.perf_counter()
    recording = simulate_recording(
        rig, config.parameters, scenario, duration_s=duration_s, dt=dt, rate_hz=rate,
        noise_rad=noise, seed=seed, encoder_counts=counts, rigid=config.hinges == "rigid",
    )
    elapsed = time.perf_counter() - started

    recording_settings = config.recording
    joints = [recording_settings.joints[name] for name in rig.spec.joints]
    positions, velocities = recorded_joint_states(joints, recording.measured_angles,
                                                  recording.joint_rates)
    stamps_ns = SIMULATED_START_TIME_S * 10**9 + np.round(recording.time_s * 1e9).astype(np.int64)
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
        f"# Ground truth of a simulation by mb-estimation simulate: scenario {scenario}, "
        f"duration {duration_s} s, step {dt} s,\n# rate {rate} Hz, noise {noise} rad, "
        f"seed {seed}, encoder counts {counts}. A valid config: use it with --config.\n"
    )
    truth = config.to_dict()
    truth["simulation"].update(dt=dt, rate_hz=rate, noise_rad=noise, encoder_counts=counts)
    (output / "ground_truth.yaml").write_text(header + yaml.safe_dump(truth, sort_keys=False))
    return SimulatedBag(output, scenario, duration_s, dt, rate, noise, seed, counts,
                        len(recording.time_s), int(round(duration_s / dt)), elapsed)
