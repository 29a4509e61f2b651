"""Output files of ``calibrate`` (DESIGN §6): parameters.yaml, ros_parameters.yaml, states.csv."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import yaml

from mb_estimation.estimation import EstimationResult
from mb_estimation.rigs.parameters import RigSpec


def _plain(value):
    array = np.asarray(value, dtype=float)
    return float(array) if array.ndim == 0 else [float(v) for v in array.ravel()]


def parameters_document(result: EstimationResult, rig: RigSpec, method: dict) -> dict:
    """The content of parameters.yaml: free parameters with std, fixed ones, fit and method."""
    free = {}
    for name in result.free:
        std = result.std[name]
        free[name] = {
            "value": _plain(result.parameters[name]),
            "std": _plain(std) if std.size > 1 else float(std[0]),
            "unit": rig.parameter(name).unit,
            "excited": bool(result.excited[name]),
        }
    fixed = {name: _plain(value) for name, value in result.parameters.items()
             if name not in result.free}
    fit = {
        "cost": result.cost, "observation_mse": result.observation_mse,
        "impulse_mse": result.impulse_mse, "iterations": result.iterations,
        "converged": result.converged, "status": result.status, "message": result.message,
        "wall_time_s": round(result.wall_time_s, 3),
        "compile_time_s": round(result.compile_time_s, 3), "steps": result.num_steps,
        "recordings": [r.name for r in result.recordings],
    }
    return {"rig": rig.name, "parameters": free, "fixed": fixed, "fit": fit, "method": method}


def write_outputs(directory: Path, result: EstimationResult, rig: RigSpec, method: dict,
                  node_name: str = "mb_estimator") -> None:
    """Write parameters.yaml, ros_parameters.yaml and states.csv into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    document = parameters_document(result, rig, method)
    (directory / "parameters.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    ros = {f"estimate.{name}": _plain(result.parameters[name]) for name in result.parameters}
    (directory / "ros_parameters.yaml").write_text(
        yaml.safe_dump({node_name: {"ros__parameters": ros}}, sort_keys=False))
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
    """The rig name and every parameter value (free and fixed) of a calibrate parameters.yaml."""
    try:
        document = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML ({error})".splitlines()[0]) from None
    if not isinstance(document, dict) or not isinstance(document.get("parameters"), dict):
        raise ValueError(f"{path}: not a parameters.yaml written by mb-estimation calibrate")
    values = dict(document.get("fixed") or {})
    for name, entry in document["parameters"].items():
        values[name] = entry["value"] if isinstance(entry, dict) else entry
    return document.get("rig"), values
