"""Output files of ``calibrate``: parameters.yaml, ros_parameters.yaml, states.csv.

And ``crossval``'s crossval.yaml (:func:`write_crossval`).

The one writer of ``parameters.yaml`` and ``ros_parameters.yaml``: ``calibrate``
(:func:`write_outputs`) and the online node's fused estimate
(:func:`mb_estimation.transport.ros_common.write_fused`) both write them through
:func:`write_parameter_files`, atomically (a reader never sees half a file). Light to import
(numpy and PyYAML; the estimator is imported where a document is built).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from mb_estimation.errors import UserError
from mb_estimation.io.files import OWNER_ONLY, PLAIN_FILE, write_text_atomically

if TYPE_CHECKING:
    from mb_estimation.estimation import EstimationResult
    from mb_estimation.rigs.parameters import RigSpec

__all__ = [
    "ParametersFileError",
    "gravity_tilt",
    "parameters_document",
    "plain_value",
    "read_parameters",
    "refinement_document",
    "validation_document",
    "write_crossval",
    "write_outputs",
    "write_parameter_files",
]


class ParametersFileError(UserError):
    """A file given as a parameters.yaml that is not one (not YAML, or not calibrate's)."""


def plain_value(value) -> float | list[float]:
    """A value as YAML and ROS parameters hold it: a float, or a list of floats (a quaternion).

    One element (a float, a 0-d or one-element array) gives a float; more give the flat list.
    """
    array = np.asarray(value, dtype=np.float64).ravel()
    return float(array[0]) if array.size == 1 else [float(v) for v in array]


def refinement_document(result: EstimationResult, dependence: dict) -> dict | None:
    """The consistent path's levels for parameters.yaml: steps, costs and each free value.

    ``parameters.<name>``: ``values`` and ``std`` per level (coarse to fine), ``change`` over
    the last two levels and ``settled`` (moved by at most its standard deviation), from
    ``dependence`` (:func:`step_dependence` by name).
    """
    if not result.refinement:
        return None
    levels = result.refinement
    parameters = {}
    for name in result.free:
        entry = {"values": [plain_value(level.parameters[name]) for level in levels],
                 "std": [plain_value(level.std[name]) for level in levels]}
        if name in dependence:
            entry["change"] = plain_value(dependence[name].change)
            entry["settled"] = dependence[name].settled
        parameters[name] = entry
    document = {"dt": [float(level.dt) for level in levels],
                "formulation": [level.formulation for level in levels],
                "kappa_per_step": [float(level.kappa) for level in levels],
                "cost": [float(level.cost) for level in levels],
                "iterations": [int(level.iterations) for level in levels],
                "parameters": parameters}
    shooting = [level for level in levels if level.formulation == "simulation"]
    if shooting:  # the simulation refinement's segments: accepted, and every length tried
        document["shooting_segment_s"] = float(shooting[-1].segment_s)
        document["shooting_segments_tried_s"] = [float(s) for s in shooting[-1].segments_tried]
    return document


def validation_document(predictions) -> dict:
    """Short-horizon predictions per recording: lead times [s] and RMS error per joint [rad]."""
    return {"prediction": [
        {"recording": check.name, "starts": int(check.starts),
         "simulation_dt": float(check.simulation_dt),
         "lead_time_s": [round(float(t), 9) for t in check.horizons_s],
         "rms_rad": [[float(v) for v in row] for row in np.asarray(check.rms)]}
        for check in predictions]}


def gravity_tilt(quaternion, std) -> dict:
    """The two angles a tilt quaternion [w, x, y, z] shows: how far gravity leans [rad].

    Gravity ``(0, -g, 0)`` rotated by the quaternion leans by ``about_x`` (towards -z) and
    ``about_z`` (towards +x); a rotation about gravity itself moves nothing and is reported not
    determined. ``std``: the tilt's standard deviations in the gravity frame (about x, about
    gravity, about z) [rad].
    """
    w, x, y, z = (float(v) for v in np.ravel(quaternion))
    # the rotation matrix's middle column is the image of +y: gravity is its negative
    down = -np.array([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)])
    spread = np.ravel(np.asarray(std, dtype=np.float64))
    return {"about_x_rad": float(np.arctan2(-down[2], -down[1])),
            "about_z_rad": float(np.arctan2(down[0], -down[1])),
            "std_rad": [float(spread[0]), float(spread[2])],
            "about_gravity": "not determined (a rotation about gravity moves nothing)"}


def parameters_document(result: EstimationResult, rig: RigSpec, method: dict,
                        predictions=(), identified=None, verdict=None, bound=None) -> dict:
    """The content of parameters.yaml.

    Free parameters with std, fixed ones, fit and method; with the consistent path its
    refinement levels, and the prediction validation when given; each free parameter's
    ``status`` and the combinations the data determine (``identified``, an
    :class:`~mb_estimation.estimation.identifiability.Identifiability`) and the ``verdict``
    (:class:`~mb_estimation.verdict.Verdict`) when given; each scalar's ``cramer_rao_std``,
    the std a simulation-error fit could reach on these data (``bound``, a
    :class:`~mb_estimation.cramer_rao.CramerRao`), when given.
    """
    from mb_estimation.estimation.consistent import step_dependence

    free = {}
    dependence = {row.name: row for row in step_dependence(result)}
    for name in result.free:
        free[name] = {
            "value": plain_value(result.parameters[name]),
            "std": plain_value(result.std[name]),
            "unit": rig.parameter(name).unit,
            "excited": bool(result.excited[name]),
        }
        if np.size(result.parameters[name]) == 4:
            free[name]["gravity_tilt"] = gravity_tilt(result.parameters[name],
                                                      result.std[name])
        if bound is not None and name in bound.std:
            free[name]["cramer_rao_std"] = bound.std[name]
        if identified is not None:
            free[name]["status"] = identified.standing(name).status
        if name in dependence:
            free[name]["settled"] = dependence[name].settled
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
    }
    document = {"rig": rig.name, "parameters": free, "fixed": fixed, "fit": fit,
                "method": method}
    refinement = refinement_document(result, dependence)
    if refinement is not None:
        document["refinement"] = refinement
    if predictions:
        document["validation"] = validation_document(predictions)
    if identified is not None:
        document["identifiability"] = {
            "undetermined": [str(c) for c in identified.undetermined],
            "determined_combinations": [
                {"combination": str(r).split(" = ")[0], "value": float(r.value),
                 "relative_std": float(r.relative_std)} for r in identified.determined_ratios]}
    if verdict is not None:
        document["verdict"] = verdict.as_dict()
    return document


def write_parameter_files(directory: str | Path, document: dict, values: Mapping[str, object],
                          node_name: str, *, mode: int = OWNER_ONLY) -> Path:
    """Write ``parameters.yaml`` and ``ros_parameters.yaml`` into ``directory``; returns it.

    ``parameters.yaml`` is ``document`` (:func:`parameters_document`, or the node's fused
    estimate); ``ros_parameters.yaml`` is ``{node_name: {ros__parameters: {estimate.<name>:
    value}}}`` for every parameter of ``values`` in its order (a float, or ``[w, x, y, z]`` for a
    quaternion). Each file is replaced atomically, with permissions ``mode`` less the umask
    (:func:`~mb_estimation.io.files.write_text_atomically`). The folder is created if needed.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_text_atomically(directory / "parameters.yaml",
                          yaml.safe_dump(document, sort_keys=False), mode=mode)
    ros = {f"estimate.{name}": plain_value(value) for name, value in values.items()}
    write_text_atomically(directory / "ros_parameters.yaml",
                          yaml.safe_dump({node_name: {"ros__parameters": ros}}, sort_keys=False),
                          mode=mode)
    return directory


def write_outputs(directory: Path, result: EstimationResult, rig: RigSpec, method: dict,
                  node_name: str = "mb_estimator", predictions=(), identified=None,
                  verdict=None, bound=None) -> None:
    """Write parameters.yaml, ros_parameters.yaml and states.csv into ``directory``.

    The two parameter files through :func:`write_parameter_files` (atomically, with the
    permissions of a plain file); states.csv directly. ``predictions``, ``identified`` and
    ``verdict`` and ``bound`` as :func:`parameters_document` takes them.
    """
    document = parameters_document(result, rig, method, predictions, identified, verdict,
                                   bound)
    write_parameter_files(directory, document, result.parameters, node_name, mode=PLAIN_FILE)
    with open(directory / "states.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        nb = result.recordings[0].position.shape[1]
        joints = rig.joints
        header = (["recording", "time_s"] + [f"theta_{j}" for j in joints]
                  + [f"theta_dot_{j}" for j in joints])
        for b in range(nb):
            header += [f"body{b}_{f}" for f in ("x", "y", "z", "qw", "qx", "qy", "qz",
                                                "vx", "vy", "vz", "wx", "wy", "wz")]
        writer.writerow(header)
        for index, rec in enumerate(result.recordings):
            for k in range(len(rec.time_s)):
                row = [index, f"{rec.time_s[k]:.6f}"]
                row += [f"{v:.9g}" for v in rec.joint_angles[k]]
                row += [f"{v:.9g}" for v in rec.joint_rates[k]]
                for b in range(nb):
                    for part in (rec.position, rec.orientation, rec.linear_velocity,
                                 rec.angular_velocity):
                        row += [f"{v:.9g}" for v in part[k, b]]
                writer.writerow(row)


def read_parameters(path: str | Path) -> tuple[str | None, dict]:
    """The rig name and every parameter value (free and fixed) of a calibrate parameters.yaml.

    Raises :class:`ParametersFileError` when the file is not valid YAML or not such a file.
    """
    try:
        document = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as error:
        raise ParametersFileError(f"{path}: not valid YAML ({error})".splitlines()[0]) from None
    if not isinstance(document, dict) or not isinstance(document.get("parameters"), dict):
        raise ParametersFileError(
            f"{path}: not a parameters.yaml written by mb-estimation calibrate")
    values = dict(document.get("fixed") or {})
    for name, entry in document["parameters"].items():
        values[name] = entry["value"] if isinstance(entry, dict) else entry
    return document.get("rig"), values


def write_crossval(directory: str | Path, scores: list[dict], mean_mse: float) -> Path:
    """Write ``crossval.yaml`` into ``directory`` (created if needed); returns the file.

    ``scores``: one mapping per recording (``path``, ``mse``, ``observation_mse``,
    ``impulse_mse``), written in order; ``mean_mse`` their mean score. Replaced atomically, with
    the permissions of a plain file.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "crossval.yaml"
    write_text_atomically(path, yaml.safe_dump({"recordings": scores, "mean_mse": mean_mse},
                                               sort_keys=False), mode=PLAIN_FILE)
    return path
