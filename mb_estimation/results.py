"""A calibration's result files: parameters.yaml, ros_parameters.yaml, states.csv, calibrated.urdf.

:func:`write_results` writes them from one :class:`~mb_estimation.calibration.Calibration`
(calibrated.urdf for the Furuta rig: :mod:`mb_estimation.io.urdf_files`);
:func:`parameters_document` is parameters.yaml's content. The files themselves are written
through :mod:`mb_estimation.io.parameter_files` (atomically).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mb_estimation.calibration import Calibration
from mb_estimation.estimation.agreement import Agreement
from mb_estimation.fitting import StageKind
from mb_estimation.io.parameter_files import (
    covariance_document,
    gravity_tilt,
    plain_value,
    write_parameter_files,
)
from mb_estimation.io.urdf_files import write_calibrated_urdf


def _optional(values: dict, name: str):
    """A stage's value of ``name`` as YAML holds it, or None where the stage did not fit it."""
    return plain_value(values[name]) if name in values else None


def stages_document(calibration: Calibration) -> dict | None:
    """The consistent path's stages for parameters.yaml: steps, costs and each free value.

    ``parameters.<name>``: ``values`` and ``std`` per stage (coarse to fine; null where a stage
    did not fit it), ``change`` over the last two joint levels and ``settled`` (moved by at
    most its standard deviation), where the step dependence was assessed. None for the
    paper's single fit.
    """
    stages = calibration.stages
    if not stages:
        return None
    dependence = {row.name: row for row in calibration.assessment.step_dependence}
    parameters = {}
    for name in calibration.result.free:
        entry = {"values": [_optional(stage.values, name) for stage in stages],
                 "std": [_optional(stage.std, name) for stage in stages]}
        if name in dependence:
            entry["change"] = plain_value(dependence[name].change)
            entry["settled"] = dependence[name].settled
        parameters[name] = entry
    document = {"dt": [float(stage.dt) for stage in stages],
                "formulation": [str(stage.kind) for stage in stages],
                "kappa_per_step": [float(stage.kappa) for stage in stages],
                "cost": [float(stage.cost) for stage in stages],
                "iterations": [int(stage.iterations) for stage in stages],
                "parameters": parameters}
    last = stages[-1]
    if last.kind is StageKind.SIMULATION:  # its segments: accepted, and every length tried
        document["shooting_segment_s"] = float(last.segment_s)
        document["shooting_segments_tried_s"] = [float(s) for s in last.segments_tried]
    return document


def validation_document(predictions) -> dict:
    """Short-horizon predictions per recording: lead times [s] and RMS error per joint [rad]."""
    return {"prediction": [
        {"recording": check.name, "starts": int(check.starts),
         "simulation_dt": float(check.simulation_dt),
         "lead_time_s": [round(float(t), 9) for t in check.horizons_s],
         "rms_rad": [[float(v) for v in row] for row in np.asarray(check.rms)]}
        for check in predictions]}


def _agreement_document(row: Agreement, scaled: bool = True) -> dict:
    """Each recording's own fit of a parameter or a combination, and whether they agree.

    ``scaled``: with what the parameter's std is scaled by (not for a combination).
    """
    document = {"own_fit": {recording: {"value": value, "std": std} for recording, value, std
                            in zip(row.recordings, row.values, row.std, strict=True)},
                "chi_square": row.chi_square, "dof": row.dof, "p_value": row.p_value,
                "agree": row.agree}
    return {**document, "std_scaled_by": row.scale} if scaled else document


def parameters_document(calibration: Calibration) -> dict:
    """The content of parameters.yaml.

    ``parameters``: each free parameter's value, std, unit, whether the data excite it, its
    ``status`` (what the data determine), ``settled`` (step dependence) where assessed, its
    ``cramer_rao_std`` where the bound was computed and, where two recordings or more
    determine it, ``recordings`` (each one's own fit and whether they agree); ``covariance``
    (:func:`~mb_estimation.io.parameter_files.covariance_document`; its diagonal the std
    squared, but a tilt's, whose std are in the gravity frame); ``fixed``:
    every other value; ``fit`` (with whether the std include the model's error); ``method``;
    ``refinement`` (:func:`stages_document`); the predictions and the steady drives
    (``validation``: where a held input spins its joint steadily, its speed per unit), the
    combinations the data determine (``identifiability``) and the ``verdict``.
    """
    result, assessment = calibration.result, calibration.assessment
    spec = calibration.setup.config.rig_spec
    bound, identified = assessment.bound, assessment.identified
    dependence = {row.name: row for row in assessment.step_dependence}
    agreement = {row.name: row for row in assessment.agreement}
    free = {}
    for name in result.free:
        entry = free[name] = {
            "value": plain_value(result.parameters[name]),
            "std": plain_value(result.std[name]),
            "unit": spec.parameter(name).unit,
            "excited": bool(result.excited[name]),
        }
        if np.size(result.parameters[name]) == 4:
            entry["gravity_tilt"] = gravity_tilt(result.parameters[name], result.std[name])
        if bound is not None and name in bound.std:
            entry["cramer_rao_std"] = bound.std[name]
        entry["status"] = identified.standing(name).status
        if name in dependence:
            entry["settled"] = dependence[name].settled
        if name in agreement:
            entry["recordings"] = _agreement_document(agreement[name])
    std_note = {"std_include_model_error": assessment.model_error_correlation_s is not None}
    if assessment.model_error_correlation_s is not None:
        std_note["residual_correlation_s"] = assessment.model_error_correlation_s
    fixed = {name: plain_value(value) for name, value in result.parameters.items()
             if name not in result.free}
    fit = {
        "cost": result.cost, "observation_mse": result.observation_mse,
        "impulse_mse": result.impulse_mse, "iterations": result.iterations,
        "converged": result.converged, "status": str(result.status),
        "message": result.message,
        "wall_time_s": round(result.wall_time_s, 3),
        "compile_time_s": round(result.compile_time_s, 3), "steps": result.num_steps,
        "recordings": [r.name for r in result.recordings],
        **std_note,
    }
    covariance = covariance_document(  # a tilt's rows: its rotation vector in the world frame
        {name: len(rows) for name, rows in result.tangent_rows.items()}, result.covariance)
    document = {"rig": spec.name, "parameters": free, "covariance": covariance,
                "fixed": fixed, "fit": fit, "method": calibration.method}
    stages = stages_document(calibration)
    if stages is not None:
        document["refinement"] = stages
    if assessment.predictions:
        document["validation"] = validation_document(assessment.predictions)
    if calibration.setup.steady_drives:
        document.setdefault("validation", {})["steady_drives"] = [
            {"recording": drive.recording, "input": drive.input,
             "speed_rad_s": drive.speed_rad_s, "speed_per_input": drive.speed_per_input,
             "duration_s": drive.duration_s} for drive in calibration.setup.steady_drives]
    document["identifiability"] = {
        "undetermined": [str(c) for c in identified.undetermined],
        "determined_combinations": [
            {"combination": r.expression, "value": float(r.value),
             "relative_std": float(r.relative_std),
             **({"recordings": _agreement_document(agreement[r.expression], scaled=False)}
                if r.expression in agreement else {})}
            for r in identified.determined_ratios]}
    document["verdict"] = calibration.verdict.as_dict()
    return document


#: states.csv's rows are turned into Python numbers this many at a time: a 60 s recording at
#: 1 kHz at once held about 70 MB of them, the calibration's peak.
STATES_BLOCK_ROWS = 4096


def write_states(path: Path, calibration: Calibration) -> None:
    """states.csv: per recording and grid point, the joint angles and rates and body states."""
    result = calibration.result
    joints = calibration.setup.config.rig_spec.joints
    nb = result.recordings[0].position.shape[1]
    header = (["recording", "time_s"] + [f"theta_{j}" for j in joints]
              + [f"theta_dot_{j}" for j in joints])
    for b in range(nb):
        header += [f"body{b}_{f}" for f in ("x", "y", "z", "qw", "qx", "qy", "qz",
                                            "vx", "vy", "vz", "wx", "wy", "wz")]
    # One format per row (the csv module's line end), all values of a recording as one table,
    # a block of rows at a time.
    row = "%d,%.6f," + ",".join(["%.9g"] * (len(header) - 2)) + "\r\n"
    with open(path, "w", newline="") as stream:
        stream.write(",".join(header) + "\r\n")
        for index, rec in enumerate(result.recordings):
            table = np.column_stack(
                [np.full(len(rec.time_s), index), rec.time_s, rec.joint_angles, rec.joint_rates]
                + [part[:, b] for b in range(nb) for part in (
                    rec.position, rec.orientation, rec.linear_velocity, rec.angular_velocity)])
            for first in range(0, len(table), STATES_BLOCK_ROWS):
                stream.writelines(row % tuple(values)
                                  for values in table[first:first + STATES_BLOCK_ROWS].tolist())


def write_results(calibration: Calibration, directory: str | Path,
                  node_name: str = "mb_estimator") -> Path:
    """Write parameters.yaml, ros_parameters.yaml, states.csv, calibrated.urdf into ``directory``.

    The two parameter files atomically, with the permissions of a plain file
    (:func:`~mb_estimation.io.parameter_files.write_parameter_files`; ``node_name`` heads
    ros_parameters.yaml); states.csv directly; calibrated.urdf atomically, for a rig with a
    URDF form. Returns ``directory``.
    """
    directory = Path(directory)
    write_parameter_files(directory, parameters_document(calibration),
                          calibration.result.parameters, node_name)
    write_states(directory / "states.csv", calibration)
    write_calibrated_urdf(directory, calibration.setup.config, calibration.result.parameters)
    return directory
