"""Our calibration against MuJoCo's system identification (``mujoco.sysid``) on the same data.

The data: 8 s of the independent rigid reference model (test/reference_furuta.py, RK4 at
1e-4 s) with furuta_synthetic's parameters, sampled at 1 kHz with 1e-3 rad angle noise (seed 0),
written as bags exactly as benchmarks/studies/reference_cases.py does: ``release`` (arm 0,
pendulum pi - 0.03, no input) and ``multisine`` (from rest, voltage multisine_torque(t) / K).
Both methods fit J_Azz, J_Byy, b1, b2 from J_Azz = J_Byy = 0.01, b1 = b2 = 1e-4, on one core:

* ours: ``mb-estimation calibrate`` under ``taskset -c 0``, run twice per case: with an empty
  compile cache (MB_ESTIMATION_CACHE_DIR a fresh folder), then with that cache filled;
  estimates and stds from its parameters.yaml;
* MuJoCo: an MJCF model of the same rigid pendulum (checked first against the reference with
  the true parameters), RK4 at 1e-3 s (one step per sample), fitted by ``mujoco.sysid.optimize``
  (its default optimizer, MuJoCo's Levenberg-Marquardt) with the initial joint angles and rates
  as four more parameters; residual: measured angles minus simulated ones; stds from the
  covariance of ``mujoco.sysid.calculate_intervals``. Timed from building the problem to the
  stds, in this process (pinned to core 0, one rollout thread).

Usage (needs ``mujoco[sysid]``)::

    taskset -c 0 python benchmarks/perf/bench_vs_mujoco.py [--cases release,multisine]
        [--work DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
import yaml
from mujoco import sysid

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "studies"))
from reference_cases import FREE, START, _reference_bag  # noqa: E402  (also puts test/ on path)
from reference_furuta import quat_to_matrix, simulate_reference  # noqa: E402

from mb_estimation.config import apply_overrides, load_config  # noqa: E402
from mb_estimation.io.recordings import read_recording  # noqa: E402
from mb_estimation.scenarios import multisine_torque  # noqa: E402

DURATION_S = 8.0
FITTED = FREE.split(",")
START_VALUES = {name: float(value) for name, value in
                (item.split("=") for item in START.split(","))}
BOUNDS = {"J_Azz": (1e-5, 0.1), "J_Byy": (1e-4, 0.1), "b1": (0.0, 0.01), "b2": (0.0, 0.01)}
ARM_TRANSVERSE = 0.1
"""The arm's J_Axx and J_Ayy in the MJCF: the arm turns about its z axis only, so they enter no
equation; large enough that any J_Azz within its bounds meets MuJoCo's triangle inequality."""
_R_A0 = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
_R_B0 = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def config_values() -> dict:
    """furuta_synthetic's parameters with rigid hinges (the truth), as plain floats."""
    config = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    return {name: (list(v) if name == "tilt" else float(v))
            for name, v in config.parameters.items()}


def pendulum_body_yy(values: dict) -> float:
    """The pendulum body's yy inertia in the MJCF, the rest of J_Byy being joint armature.

    J_Byy enters only M22 (as armature does), and MuJoCo accepts body inertias that meet the
    triangle inequality alone, which J_Byy = 0.01 with furuta_synthetic's J_Bxx and J_Bzz does
    not: the body keeps the smallest yy the inequality allows, |J_Bzz - J_Bxx|.
    """
    return abs(values["J_Bzz"] - values["J_Bxx"])


def furuta_mjcf(values: dict) -> str:
    """The rigid Furuta pendulum of test/reference_furuta.py in MJCF, its frames and signs.

    Bodies take the reference's body frames (arm: R_A0, pendulum: C = R_A0^T R_B0 relative to
    the arm), so inertias are diagonal there; the arm hinge is its z axis (world +y), the
    pendulum hinge the arm's x axis (the pendulum's y); J_shaft is the arm joint's armature,
    the motor a torque K * voltage, b1 and b2 joint damping, gravity R(tilt) (0, -g, 0).
    """
    def text(vector) -> str:
        return " ".join(repr(float(x)) for x in vector)

    def quaternion(rotation) -> np.ndarray:
        q = np.zeros(4)
        mujoco.mju_mat2Quat(q, np.ascontiguousarray(rotation, dtype=float).ravel())
        return q

    v = values
    gravity = quat_to_matrix(v["tilt"]) @ np.array([0.0, -v["gravity"], 0.0])
    body_yy = pendulum_body_yy(v)
    return f"""<mujoco model="furuta_rigid">
  <option timestep="0.001" integrator="RK4" gravity="{text(gravity)}">
    <flag contact="disable"/>
  </option>
  <worldbody>
    <body name="arm" quat="{text(quaternion(_R_A0))}">
      <joint name="arm" type="hinge" axis="0 0 1" armature="{v['J_shaft']!r}"
             damping="{v['b1']!r}"/>
      <inertial pos="{v['l1']!r} 0 0" mass="{v['m_A']!r}"
                diaginertia="{text([ARM_TRANSVERSE, ARM_TRANSVERSE, v['J_Azz']])}"/>
      <body name="pendulum" pos="{v['lA']!r} 0 0" quat="{text(quaternion(_R_A0.T @ _R_B0))}">
        <joint name="pendulum" type="hinge" axis="0 1 0" armature="{v['J_Byy'] - body_yy!r}"
               damping="{v['b2']!r}"/>
        <inertial pos="{v['l2']!r} 0 0" mass="{v['m_B']!r}"
                  diaginertia="{text([v['J_Bxx'], body_yy, v['J_Bzz']])}"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="motor" joint="arm" gear="{v['K']!r}"/>
  </actuator>
</mujoco>
"""


def scenario(case: str, time_s: np.ndarray, values: dict) -> tuple[tuple, np.ndarray]:
    """Initial angles and voltage of a case, as reference_cases._reference_bag sets them."""
    if case == "release":
        return (0.0, np.pi - 0.03), np.zeros_like(time_s)
    return (0.0, 0.0), np.asarray(multisine_torque(time_s)) / values["K"]


def check_model(cases: list[str], values: dict) -> dict:
    """Largest angle difference [rad] of the MJCF to the reference, true parameters, 8 s."""
    model = mujoco.MjModel.from_xml_string(furuta_mjcf(values))
    data = mujoco.MjData(model)
    time_s = np.arange(int(round(DURATION_S * 1000)) + 1) / 1000.0
    result = {}
    for case in cases:
        initial, voltage = scenario(case, time_s, values)
        mujoco.mj_resetData(model, data)
        data.qpos[:] = initial
        angles = np.empty((len(time_s), 2))
        angles[0] = data.qpos
        for k in range(len(time_s) - 1):
            data.ctrl[0] = voltage[k]
            mujoco.mj_step(model, data)
            angles[k + 1] = data.qpos
        result[case] = {}
        for step in (1e-4, 1e-3):
            run = simulate_reference(values, initial, (0.0, 0.0), time_s,
                                     voltage=(time_s, voltage), method="rk4", step=step)
            result[case][f"reference_rk4_{step:g}"] = np.abs(angles - run["theta"]).max(
                axis=0).tolist()
    return result


def _rollout_from_fitted_state(models, datas, control_signal, initial_states, param_dicts,
                               rollout_signal_mapping, rollout_state_mapping, ctrl_mapping):
    """The rollout of sysid, started from each candidate's fitted initial angles and rates."""
    del initial_states
    states = [sysid.create_initial_state(model, p["qpos0"].value, p["qvel0"].value)
              for model, p in zip(models, param_dicts, strict=True)]
    return sysid.sysid_rollout(models, datas, control_signal, states, rollout_signal_mapping,
                               rollout_state_mapping, ctrl_mapping)


def _angle_residual(params, predicted, measured, model, return_pred_all, state):
    """Measured minus simulated joint angles at samples 1..N (the rollout's qpos after each step).

    sysid's default residual would divide each column by its measured norm and compare the
    rollout's sensor values, which are those of the state before each step.
    """
    del params, predicted, return_pred_all
    times = measured.times[1:]
    simulated = sysid.TimeSeries(times, state[:, 1:1 + model.nq], measured.signal_mapping)
    observed = sysid.TimeSeries(times, measured.data[1:], measured.signal_mapping)
    return observed.data - simulated.data, simulated, observed


def _modifier(name: str, body_yy: float):
    """The sysid modifier writing one fitted parameter into the MjSpec."""
    def write(spec, parameter):
        value = float(parameter.value[0])
        if name == "J_Azz":
            spec.body("arm").inertia[2] = value
        elif name == "J_Byy":
            spec.joint("pendulum").armature = value - body_yy
        else:
            spec.joint("arm" if name == "b1" else "pendulum").damping[0] = value
    return write


def fit_mujoco(bag: Path, values: dict) -> dict:
    """Fit J_Azz, J_Byy, b1, b2 and the initial state with mujoco.sysid; estimates and stds."""
    recording = read_recording(bag, apply_overrides(load_config("furuta_synthetic"),
                                                    hinges="rigid"))
    time_s = recording.time_s
    angles = np.unwrap(recording.joint_angles, axis=0)
    held = np.searchsorted(recording.input_time_s, time_s, side="right") - 1
    voltage = recording.inputs[np.clip(held, 0, None), 0]
    line = np.polyfit(time_s[:21], angles[:21], 1)  # start: a line through the first 20 ms
    body_yy = pendulum_body_yy(values)

    started = time.perf_counter()
    spec = mujoco.MjSpec.from_string(furuta_mjcf({**values, **START_VALUES}))
    params = sysid.ParameterDict()
    for name in FITTED:
        params.add(sysid.Parameter(name, START_VALUES[name], *BOUNDS[name],
                                   modifier=_modifier(name, body_yy)))
    params.add(sysid.Parameter("qpos0", line[1], line[1] - 0.2, line[1] + 0.2))
    params.add(sysid.Parameter("qvel0", line[0], line[0] - 10.0, line[0] + 10.0))
    model = spec.compile()
    measured = sysid.TimeSeries.from_names(time_s, angles, model,
                                           names=["arm_qpos", "pendulum_qpos"])
    control = sysid.TimeSeries.from_control_names(time_s, voltage[:, None], model)
    initial = sysid.create_initial_state(model, line[1], line[0])
    sequences = sysid.ModelSequences(bag.name, spec, bag.name, initial, control, measured,
                                     allow_missing_sensors=True)  # angles are qpos, no sensors
    residual_fn = sysid.build_residual_fn(
        models_sequences=[sequences], custom_rollout=_rollout_from_fitted_state,
        modify_residual=_angle_residual, resample_true=False, n_threads=1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        fitted, result = sysid.optimize(params, residual_fn, verbose=False)
    residuals, _, _ = residual_fn(result.x, fitted)
    covariance, half_widths = sysid.calculate_intervals(residuals, result.jac)
    seconds = time.perf_counter() - started

    names = fitted.get_non_frozen_parameter_names()
    std = np.sqrt(np.diag(covariance))
    lines = [text for text in printed.getvalue().splitlines() if text.startswith("Terminated")]
    return {
        "seconds": seconds,
        "parameters": {name: {"value": float(result.x[i]), "std": float(std[i]),
                              "ci95_half_width": float(half_widths[i])}
                       for i, name in enumerate(names)},
        "cost": float(0.5 * np.sum(np.concatenate(residuals) ** 2)),
        "residual_rms_rad": float(np.sqrt(np.mean(np.concatenate(residuals) ** 2))),
        "optimizer": lines[-1] if lines else printed.getvalue()[-300:],
    }


def calibrate_ours(bag: Path, work: Path, case: str) -> dict:
    """``mb-estimation calibrate`` on one core, cold compile cache then warm; times, estimates."""
    cache = Path(tempfile.mkdtemp(prefix=f"cache_{case}_", dir=work))
    environment = {**os.environ, "MB_ESTIMATION_CACHE_DIR": str(cache)}
    runs = {}
    for label in ("cold", "warm"):
        output = work / f"ours_{case}_{label}"
        command = ["taskset", "-c", "0", "mb-estimation", "calibrate", str(bag),
                   "--config", "furuta_synthetic", "--hinges", "rigid", "--free", FREE,
                   "--set", START, "--output", str(output), "--quiet"]
        started = time.perf_counter()
        finished = subprocess.run(command, capture_output=True, text=True, env=environment)
        seconds = time.perf_counter() - started
        if finished.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(command)} failed:\n{finished.stderr}")
        document = yaml.safe_load((output / "parameters.yaml").read_text())
        runs[label] = {
            "seconds": seconds, "exit_status": finished.returncode,
            "parameters": {name: {"value": document["parameters"][name]["value"],
                                  "std": document["parameters"][name]["std"]}
                           for name in FITTED},
        }
    return runs


def _cell(entry: dict | None) -> str:
    if entry is None:
        return ""
    std = entry.get("std")
    return f"{entry['value']:.6g}" + ("" if std is None else f" ± {float(std):.2g}")


def markdown_table(results: dict) -> str:
    """One row per case and method: seconds, then each fitted parameter as value ± std."""
    rows = ["| case | method | time [s] | " + " | ".join(FITTED) + " |",
            "|---|---|---:|" + "---|" * len(FITTED)]
    truth = results["truth"]
    for case, runs in results["cases"].items():
        rows.append(f"| {case} | truth | | " + " | ".join(f"{truth[n]:.6g}" for n in FITTED)
                    + " |")
        for label, run in (("MuJoCo sysid", runs["mujoco"]), ("ours, cold cache", runs["cold"]),
                           ("ours, warm cache", runs["warm"])):
            rows.append(f"| {case} | {label} | {run['seconds']:.1f} | "
                        + " | ".join(_cell(run["parameters"].get(n)) for n in FITTED) + " |")
    return "\n".join(rows)


def main() -> int:
    """Check the MJCF, make the bags, fit each case both ways, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="release,multisine",
                        help="comma-separated: release, multisine")
    parser.add_argument("--work", type=Path, help="folder for bags and outputs (default: temp)")
    parser.add_argument("--json", type=Path, help="write every number here as well")
    args = parser.parse_args()
    cases = args.cases.split(",")
    if unknown := set(cases) - {"release", "multisine"}:
        parser.error(f"unknown cases {sorted(unknown)}")
    os.sched_setaffinity(0, {0})
    values = config_values()

    check = check_model(cases, values)
    print("MJCF with the true parameters against the reference, largest |angle difference| "
          "[rad] over 8 s (arm, pendulum):")
    for case, differences in check.items():
        print("  " + case + ": " + "; ".join(
            f"vs {key.replace('_', ' ')} s {a:.2e}, {b:.2e}"
            for key, (a, b) in differences.items()))

    results = {"truth": {name: values[name] for name in FITTED}, "model_check": check,
               "cases": {}}
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        for case in cases:
            bag = _reference_bag(work, case, DURATION_S)
            print(f"{case}: MuJoCo sysid ...", flush=True)
            runs = {"mujoco": fit_mujoco(bag, values)}
            print(f"{case}: {runs['mujoco']['optimizer']}")
            print(f"{case}: ours, cold then warm cache ...", flush=True)
            runs.update(calibrate_ours(bag, work, case))
            results["cases"][case] = runs
    print()
    print(markdown_table(results))
    for case, runs in results["cases"].items():
        state = {n: _cell(runs["mujoco"]["parameters"][n]) for n in ("qpos0[0]", "qpos0[1]",
                                                                     "qvel0[0]", "qvel0[1]")}
        print(f"{case}: MuJoCo's initial state {state}; residual rms "
              f"{runs['mujoco']['residual_rms_rad']:.3g} rad")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
