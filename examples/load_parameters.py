"""Load a calibration's results in plain Python (PyYAML only, no mb_estimation import).

``mb-estimation calibrate`` (and the node's ``output_dir``) write two files:

* ``parameters.yaml``: ``parameters`` maps each free parameter to ``value``, ``std`` (``.inf``
  where the data do not determine it), ``unit`` and ``excited``; ``covariance`` holds their
  covariance (``rows``, ``matrix``); ``fixed`` the values that were not estimated;
* ``ros_parameters.yaml``: every value as a ROS 2 parameter file
  ``{node: {ros__parameters: {estimate.<name>: value}}}``, for ``--params-file``.

    python examples/load_parameters.py RESULTS_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml


def load_parameters(directory: str | Path) -> dict[str, float | list[float]]:
    """Every parameter value (estimated and fixed) of ``directory/parameters.yaml`` [SI]."""
    document = yaml.safe_load((Path(directory) / "parameters.yaml").read_text())
    values = dict(document.get("fixed") or {})
    values.update({name: entry["value"] for name, entry in document["parameters"].items()})
    return values


def load_ros_parameters(directory: str | Path) -> dict[str, float | list[float]]:
    """``{name: value}`` of ``directory/ros_parameters.yaml`` (the ``estimate.`` prefix off).

    Its ``estimate_std.<name>`` entries (−1: not determined) are left out.
    """
    document = yaml.safe_load((Path(directory) / "ros_parameters.yaml").read_text())
    (node,) = document.values()
    return {key.removeprefix("estimate."): value
            for key, value in node["ros__parameters"].items() if key.startswith("estimate.")}


def main(argv: list[str]) -> int:
    """Print each estimate ± std of the results folder ``argv[1]``."""
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    if not (Path(argv[1]) / "parameters.yaml").is_file():
        print(f"{argv[1]}: no parameters.yaml (give the folder calibrate wrote)", file=sys.stderr)
        return 2
    document = yaml.safe_load((Path(argv[1]) / "parameters.yaml").read_text())
    for name, entry in document["parameters"].items():
        print(f"{name} = {entry['value']} ± {entry['std']} {entry.get('unit', '')}".rstrip())
    ros, values = load_ros_parameters(argv[1]), load_parameters(argv[1])
    same = ros == values
    print(f"{len(ros)} values in ros_parameters.yaml, "
          f"{'the same as' if same else 'DIFFERENT FROM'} parameters.yaml")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
