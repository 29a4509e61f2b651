"""calibrated.urdf in a simulator nobody here wrote: MuJoCo's URDF compiler.

Run (MuJoCo is the ``bench`` extra, never a package dependency)::

    python benchmarks/studies/bench_urdf_mujoco.py CONFIG RESULTS_DIR

``CONFIG`` the config a calibration ran with, ``RESULTS_DIR`` its output (its parameters.yaml).
Writes the calibrated URDF as ``calibrate`` does, loads it in MuJoCo, and compares at a few
joint states the mass matrix, the gravity torques and the joints' damping with the independent
reference model (test/reference_furuta.py) at the values the URDF reads back as, and those
values with parameters.yaml's. Prints one line per check and the worst relative differences.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))

from reference_furuta import mass_matrix, potential_energy_reference  # noqa: E402

from mb_estimation.config import load_config  # noqa: E402
from mb_estimation.io.parameter_files import read_parameters  # noqa: E402
from mb_estimation.io.urdf_files import calibrated_urdf  # noqa: E402

STATES = ([0.3, 0.0], [1.0, 0.7], [-2.0, 2.5], [0.0, 3.0])


def main() -> None:
    """Compare MuJoCo's reading of calibrated.urdf with the reference model."""
    import mujoco

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("results")
    options = parser.parse_args()
    config = load_config(options.config)
    _, values = read_parameters(Path(options.results) / "parameters.yaml")
    text = calibrated_urdf(config, values)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "calibrated.urdf"
        path.write_text(text)
        back_config = Path(folder) / "back.yaml"
        back_config.write_text(f"rig: furuta\nurdf: {{file: {path}}}\nparameters: {{K: 1.0}}\n")
        back = load_config(back_config)
    read_back = max(abs(back.parameters[name] - float(np.ravel(values[name])[0]))
                    / abs(float(np.ravel(values[name])[0]))
                    for name in ("J_Azz", "J_Byy", "b1", "b2", "m_A", "m_B", "l1", "lA", "l2")
                    if float(np.ravel(values[name])[0]) != 0.0)
    model = mujoco.MjModel.from_xml_string(text)
    gravity = float(back.parameters["gravity"])
    model.opt.gravity[:] = (0.0, 0.0, -gravity)
    data = mujoco.MjData(model)
    reference = {name: float(value) for name, value in back.parameters.items()
                 if not isinstance(value, tuple)}
    reference.update(J_shaft=0.0, tilt=[1.0, 0.0, 0.0, 0.0])
    joints = [config.recording.joints[joint] for joint in ("arm", "pendulum")]
    worst_mass = worst_gravity = 0.0
    for recorded in STATES:
        data.qpos[:], data.qvel[:] = recorded, 0.0
        mujoco.mj_forward(model, data)
        matrix = np.zeros((2, 2))
        mujoco.mj_fullM(model, data, matrix)
        theta = np.array([m.to_model(q) for m, q in zip(joints, recorded, strict=True)])
        signs = np.array([m.sign for m in joints])
        expected = mass_matrix(reference, theta) * np.outer(signs, signs)
        worst_mass = max(worst_mass, np.max(np.abs(matrix - expected)) / np.abs(expected).max())
        step = 1e-5  # the gravity torque: the potential's gradient in the recorded angles
        torque = np.array([(potential_energy_reference(reference, theta + step * signs[i] * unit)
                            - potential_energy_reference(reference, theta - step * signs[i]
                                                         * unit)) / (2 * step)
                           for i, unit in enumerate(np.eye(2))])
        scale = reference["m_B"] * gravity * reference["l2"]  # the largest the pendulum has
        worst_gravity = max(worst_gravity, np.max(np.abs(data.qfrc_bias - torque)) / scale)
    damping = model.dof_damping.tolist()
    print(f"MuJoCo {mujoco.__version__} loads {model.nbody - 1} moving bodies, joints "
          f"{[model.joint(i).name for i in range(model.njnt)]}")
    print(f"values read back from the URDF against parameters.yaml: worst relative "
          f"difference {read_back:.2g}")
    print(f"mass matrix against the reference model at {len(STATES)} states: worst relative "
          f"difference {worst_mass:.2g}")
    print(f"gravity torques against the reference model: worst relative difference "
          f"{worst_gravity:.2g} (central differences of its potential)")
    print(f"damping {damping} against b1, b2 = {back.parameters['b1']!r}, "
          f"{back.parameters['b2']!r}")


if __name__ == "__main__":
    main()
