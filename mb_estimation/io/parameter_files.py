"""Parameter files: parameters.yaml and ros_parameters.yaml written and read, crossval.yaml.

The one writer of ``parameters.yaml`` and ``ros_parameters.yaml``: ``calibrate``
(:func:`mb_estimation.results.write_results`) and the online node's fused estimate
(:func:`mb_estimation.ros.ros_common.write_fused`) both write them through
:func:`write_parameter_files`, atomically (a reader never sees half a file); ``simulate
--parameters`` and ``crossval --parameters`` read them back (:func:`read_parameters`). Light to
import (numpy and PyYAML).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import yaml

from mb_estimation.errors import UserError
from mb_estimation.io.files import write_text_atomically
from mb_estimation.message_types import published_std

#: The status of a parameter the data determine in parameters.yaml (the identifiability's
#: ``DETERMINED``; spelt here so that reading these files needs no JAX).
DETERMINED = "determined"

__all__ = [
    "ParametersFileError",
    "gravity_tilt",
    "plain_value",
    "read_parameters",
    "write_crossval",
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


def covariance_document(sizes: Mapping[str, int], covariance) -> dict:
    """A free parameters' covariance as parameters.yaml holds it, with its rows' names.

    ``sizes``: each parameter's rows, in order (1 for a scalar, 3 for a quaternion's tangent).
    ``rows``: a parameter's name, or ``name[i]`` for each of a quaternion's rows; ``matrix``:
    ``covariance`` as plain numbers, in the product of the two rows' units.
    """
    rows = [name if size == 1 else f"{name}[{i}]"
            for name, size in sizes.items() for i in range(size)]
    return {"rows": rows,
            "matrix": [[float(v) for v in row] for row in np.asarray(covariance)]}


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


def write_parameter_files(directory: str | Path, document: dict, values: Mapping[str, object],
                          node_name: str) -> Path:
    """Write ``parameters.yaml`` and ``ros_parameters.yaml`` into ``directory``; returns it.

    ``parameters.yaml`` is ``document`` (a calibration's,
    :func:`mb_estimation.results.parameters_document`, or the node's fused estimate);
    ``ros_parameters.yaml`` is ``{node_name: {ros__parameters: {estimate.<name>: value}}}``
    for every parameter of ``values`` in its order (a float, or ``[w, x, y, z]`` for a
    quaternion), then ``estimate_std.<name>`` for each estimated one (``document``'s
    ``parameters``), −1 where not determined (an infinite std, or a ``status`` other than
    determined: a value at its bound is no estimate either): the keys and convention of the node's
    parameters (a controller loading the file can tell a value from a guess). Each file is
    replaced atomically (:func:`~mb_estimation.io.files.write_text_atomically`). The folder is
    created if needed.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_text_atomically(directory / "parameters.yaml",
                          yaml.safe_dump(document, sort_keys=False))
    ros = {f"estimate.{name}": plain_value(value) for name, value in values.items()}
    ros.update({f"estimate_std.{name}": _published(entry)
                for name, entry in (document.get("parameters") or {}).items()})
    write_text_atomically(directory / "ros_parameters.yaml",
                          yaml.safe_dump({node_name: {"ros__parameters": ros}}, sort_keys=False))
    return directory


def _published(entry: dict) -> float | list[float]:
    """An entry's std as ros_parameters.yaml holds it: −1 for what is not an estimate."""
    std = entry["std"]
    if entry.get("status", DETERMINED) != DETERMINED:
        std = np.full(np.shape(std), np.inf)
    return published_std(std)


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
                                               sort_keys=False))
    return path


def write_model_comparison(directory: str | Path, terms, recordings, candidates: list[dict],
                           choice) -> Path:
    """Write ``model_comparison.yaml`` into ``directory``; returns the file.

    ``terms``: the terms compared; ``recordings``: the held-out recordings' names in order;
    ``candidates``: :func:`~mb_estimation.model_terms.scores_table`'s rows; ``choice``: the
    :class:`~mb_estimation.model_terms.Choice`, or ``None`` while candidates are still being
    fitted (the file then holds the finished ones, ``chosen: null``). Replaced atomically.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model_comparison.yaml"
    document = {"terms": list(terms), "recordings": list(recordings),
                "score": "held-out prediction 0.5 s ahead: RMS angle error over the joints [rad]",
                "candidates": candidates,
                "chosen": None if choice is None else {"terms": list(choice.candidate.terms),
                                                       "reason": choice.reason}}
    write_text_atomically(path, yaml.safe_dump(document, sort_keys=False))
    return path
