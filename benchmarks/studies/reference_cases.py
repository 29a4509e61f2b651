"""The reference calibrations, through the command line: estimates, stds and verdicts as JSON.

For checking that a change of structure changes no result: run it on two trees and compare the
files (``--compare A.json B.json``: the largest relative difference of any value or std, and
any verdict line that differs). The cases:

* ``rigid_release``, ``rigid_multisine``: 3 s of the independent rigid reference model
  (test/reference_furuta.py, RK4 at 1e-4 s) at 1 kHz, noise 1e-3 rad, furuta_synthetic's
  hinges declared rigid, J_Azz, J_Byy, b1, b2 free from §4.7's start; the default path and the
  joint fit alone (``--simulation-refinement off``);
* ``compliant_release``: §4.7 as the paper set it up (furuta_synthetic's own compliant hinges,
  3 s of its release simulated by ``mb-estimation simulate``);
* ``peer_2V``: the peer rig's 2 V step with the shipped ODrive example config, K at its
  datasheet value, J_Azz, J_Byy, b1, b2 free.

Usage (``MB_SHARED_DATA`` where the shared recordings are, default ../shared/data)::

    python benchmarks/studies/reference_cases.py --output /tmp/cases.json [--work DIR]
    python benchmarks/studies/reference_cases.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))
SHARED = Path(os.environ.get("MB_SHARED_DATA", REPO.parent / "shared" / "data"))
NOISE_RAD = 1e-3
START = "J_Azz=0.01,J_Byy=0.01,b1=1e-4,b2=1e-4"
FREE = "J_Azz,J_Byy,b1,b2"


def _reference_bag(folder: Path, scenario: str, duration_s: float) -> Path:
    """The rigid reference model's run written as a bag on the config's topics."""
    from reference_furuta import simulate_reference

    from mb_estimation.config import apply_overrides, load_config
    from mb_estimation.io.bags import write_rig_bag
    from mb_estimation.scenarios import multisine_torque

    config = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    values = {name: (list(v) if name == "tilt" else float(v))
              for name, v in config.parameters.items()}
    time_s = np.arange(int(round(duration_s * 1000)) + 1) / 1000.0
    if scenario == "release":
        initial, voltage = (0.0, np.pi - 0.03), np.zeros_like(time_s)
    else:
        initial, voltage = (0.0, 0.0), np.asarray(multisine_torque(time_s)) / values["K"]
    run = simulate_reference(values, initial, (0.0, 0.0), time_s, voltage=(time_s, voltage),
                             method="rk4", step=1e-4)
    angles = run["theta"] + NOISE_RAD * np.random.default_rng(0).standard_normal(
        run["theta"].shape)
    stamps = 1_700_000_000 * 10**9 + np.round(time_s * 1e9).astype(np.int64)
    return write_rig_bag(folder / scenario, joint_time_ns=stamps,
                         joint_names=["arm", "pendulum"], joint_positions=angles,
                         joint_states_topic="/joint_states", voltage_time_ns=stamps,
                         voltage=voltage, voltage_topic="/control_voltage")


def _calibrate(name: str, work: Path, recording: Path, *options: str) -> dict:
    output = work / name
    command = ["mb-estimation", "calibrate", str(recording), "--output", str(output),
               "--quiet", *options]
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode not in (0, 1):
        raise SystemExit(f"{name}: {' '.join(command)} failed:\n{finished.stderr}")
    document = yaml.safe_load((output / "parameters.yaml").read_text())
    refinement = document.get("refinement", {})
    return {
        "parameters": {key: {"value": entry["value"], "std": entry["std"],
                             "status": entry.get("status")}
                       for key, entry in document["parameters"].items()},
        "stages": refinement.get("formulation", []),
        "verdict": document.get("verdict"),
        "fit": {key: document["fit"][key] for key in ("cost", "iterations", "status")},
        "printed": [line for line in finished.stdout.splitlines()
                    if not line.startswith("wrote ") and "compil" not in line],
    }


def run_cases(work: Path) -> dict:
    """Every case's calibration, its bags and outputs in ``work``."""
    synthetic = "furuta_synthetic"
    rigid = ["--config", synthetic, "--hinges", "rigid", "--free", FREE, "--set", START]
    cases = {}
    for scenario in ("release", "multisine"):
        bag = _reference_bag(work, scenario, 3.0)
        cases[f"rigid_{scenario}"] = _calibrate(f"rigid_{scenario}", work, bag, *rigid)
        cases[f"rigid_{scenario}_joint"] = _calibrate(
            f"rigid_{scenario}_joint", work, bag, *rigid, "--simulation-refinement", "off")
    compliant = work / "compliant_release"
    subprocess.run(["mb-estimation", "simulate", "release", "--config", synthetic,
                    "--duration", "3", "--noise", str(NOISE_RAD), "--output", str(compliant)],
                   check=True, capture_output=True)
    cases["compliant_release"] = _calibrate("compliant_release_out", work, compliant,
                                            "--config", synthetic, "--set", START)
    peer = SHARED / "peer-furuta-hardware" / "hardware_step_response_2V.csv"
    cases["peer_2V"] = _calibrate(
        "peer_2V", work, peer, "--config", str(REPO / "config/examples/odrive_furuta.yaml"),
        "--set", "K=0.00646", "--free", FREE)
    return cases


def _numbers(value) -> np.ndarray:
    return np.atleast_1d(np.asarray(value, dtype=np.float64))


def _without_folders(line: str) -> str:
    """A printed line with every folder of a path left out (runs write to other folders)."""
    return re.sub(r"[^\s():,]*/", "", line)


def compare(before: dict, after: dict) -> int:
    """Print the largest relative change per case; non-zero when anything beyond round-off."""
    worst_overall = 0.0
    different = False
    for case in sorted(set(before) | set(after)):
        if case not in before or case not in after:
            print(f"{case}: only in {'after' if case in after else 'before'}")
            different = True
            continue
        a, b = before[case], after[case]
        worst = 0.0
        for name in a["parameters"]:
            for key in ("value", "std"):
                x, y = _numbers(a["parameters"][name][key]), _numbers(b["parameters"][name][key])
                finite = np.isfinite(x) & np.isfinite(y)
                if not np.array_equal(np.isfinite(x), np.isfinite(y)):
                    worst = np.inf
                scale = np.maximum(np.abs(x[finite]), 1e-300)
                worst = max(worst, float(np.max(np.abs(x[finite] - y[finite]) / scale,
                                                initial=0.0)))
        same_text = a["verdict"] == b["verdict"] and a["stages"] == b["stages"] and all(
            a["parameters"][n]["status"] == b["parameters"][n]["status"]
            for n in a["parameters"])
        printed = [(x, y) for x, y in zip(map(_without_folders, a["printed"]),
                                          map(_without_folders, b["printed"]), strict=False)
                   if x != y]
        if len(a["printed"]) != len(b["printed"]):
            printed.append((f"{len(a['printed'])} lines", f"{len(b['printed'])} lines"))
        print(f"{case}: largest relative change of a value or std {worst:.2e}; verdict, "
              f"statuses and stages {'identical' if same_text else 'DIFFER'}; printed output "
              f"{'identical' if not printed else f'differs in {len(printed)} lines'}")
        for x, y in printed:
            print(f"  - {x}\n  + {y}")
        if not same_text:
            print("  before:", json.dumps(a["verdict"], indent=None)[:2000])
            print("  after: ", json.dumps(b["verdict"], indent=None)[:2000])
        worst_overall = max(worst_overall, worst)
        different |= not same_text or bool(printed)
    print(f"largest relative change over all cases: {worst_overall:.2e}")
    return 1 if different or worst_overall > 1e-6 else 0


def main() -> int:
    """Run the cases, or compare two runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, help="write the cases' results here (JSON)")
    parser.add_argument("--work", type=Path, help="folder for bags and outputs (default: temp)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        return compare(*(json.loads(path.read_text()) for path in args.compare))
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        cases = run_cases(work)
    text = json.dumps(cases, indent=1)
    if args.output:
        args.output.write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
