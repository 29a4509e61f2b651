"""A rig 170 times lighter than the paper's: κ read against the rig's inertia, or not.

Data: ``test/reference_furuta.py`` (the closed-form rigid Lagrangian, RK4 at 1e-4 s) with the
light rig of ``test/test_consistent.py`` (``LIGHT_RIG``: masses and lengths of the home-built
pendulum in ``shared/data``, inertias of its peer's own simulator; rest inertia 2.3e-4 kg m²
against the paper's 0.04), gravity 9.80665 m/s² (and so in the fit), K = 1 known, noise
1e-3 rad. Scenarios: ``release`` (θ2 = π − 0.03 from rest, 1 kHz) and ``impulse`` (0.43 N m for
2 ms from rest, 500 Hz: the experiment of the Humble bag ``impulse_response_de``). J_Azz,
J_Byy, b1, b2 free, started twice off (5e-5, 3e-5, 1e-4, 1e-4).

Each fit runs twice in the same process: ``scaled`` is the consistent path as it is (κ = 100 read
on a rig of 0.04 kg m² and scaled by (0.04 / I)², I the rest inertia); ``absolute`` is κ as it
was read before (method.kappa set to 100 (I / 0.04)², so that the per-step weight is the old
one). Printed: each estimate's relative error and, in parentheses, that error in its reported
std.

    python benchmarks/studies/bench_light_rig.py [--seconds 5] [--seeds 0,1,2]

``humble``: the peer's own simulator (Cazzolato & Prime's reduced Furuta model, 2011, RK4 at
2 ms, as written in its source) refitted to the first 2 s of the Humble impulse bag, and the
energy of the bag's own joint states under that fit:

    python benchmarks/studies/bench_light_rig.py humble
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test"))

from reference_furuta import simulate_reference  # noqa: E402
from test_consistent import FREE, LIGHT_RIG  # noqa: E402

from mb_estimation.assess import kept_fit  # noqa: E402
from mb_estimation.config import apply_overrides, load_config  # noqa: E402
from mb_estimation.estimation import KAPPA_REFERENCE_INERTIA  # noqa: E402
from mb_estimation.fitting import fit as fit_plan  # noqa: E402
from mb_estimation.setup import rig_of, set_up  # noqa: E402
from mb_estimation.signals import Recording  # noqa: E402

GRAVITY = 9.80665
START = {"J_Azz": 5e-5, "J_Byy": 3e-5, "b1": 1e-4, "b2": 1e-4}
NOISE_RAD = 1e-3
HUMBLE = Path(__file__).resolve().parents[3] / "shared" / "data" / "rosbag2-humble-furuta"


def truth():
    """The light rig's config (furuta_synthetic's frames and hinges, the light rig's values)."""
    return apply_overrides(load_config("furuta_synthetic"),
                           set_values={**LIGHT_RIG, "gravity": GRAVITY})


def recording(scenario: str, seconds: float, seed: int) -> Recording:
    """``scenario`` of the light rig from the rigid reference, with angle noise."""
    values = {name: (list(value) if name == "tilt" else float(value))
              for name, value in truth().parameters.items()}
    rate = 1000.0 if scenario == "release" else 500.0
    time_s = np.arange(int(round(seconds * rate)) + 1) / rate
    if scenario == "release":
        initial, voltage = (0.0, np.pi - 0.03), ([0.0], [0.0])
    else:
        initial, voltage = (0.0, 0.0), ([0.0, 0.002], [0.43, 0.0])
    run = simulate_reference(values, initial, (0.0, 0.0), time_s, voltage=voltage,
                             method="rk4", step=1e-4)
    angles = run["theta"] + NOISE_RAD * np.random.default_rng(seed).standard_normal(
        run["theta"].shape)
    inputs = np.interp(time_s, voltage[0], voltage[1], right=voltage[1][-1])
    inputs[time_s >= voltage[0][-1]] = voltage[1][-1]
    return Recording(f"{scenario} seed {seed}", time_s, angles, time_s, inputs[:, None])


def fit(recording_: Recording, kappa_mode: str):
    """The consistent path from ``START``, κ ``scaled`` (as it is) or ``absolute`` (before)."""
    config = apply_overrides(truth(), compliance=1e-8, free=list(FREE), set_values=START)
    if kappa_mode == "absolute":  # the per-step weight κ had before it was read per inertia
        inertia = rig_of(config).rest_inertia(config.parameters)
        config = apply_overrides(config, kappa=100.0 * (inertia / KAPPA_REFERENCE_INERTIA) ** 2)
    setup = set_up(config, [recording_])
    return kept_fit(setup, fit_plan(setup)).result


def light_rig(seconds: float, seeds: list[int]) -> None:
    """The table: both scenarios, every seed, both readings of κ."""
    values = truth().parameters
    print("| scenario | seed | κ | " + " | ".join(FREE) + " | iterations |")
    print("|---|---|---|" + "---|" * len(FREE) + "---|")
    for scenario in ("release", "impulse"):
        for seed in seeds:
            data = recording(scenario, seconds, seed)
            for mode in ("scaled", "absolute"):
                result = fit(data, mode)
                cells = []
                for name in FREE:
                    value, target = float(result.parameters[name]), float(values[name])
                    std = float(result.std[name][0])
                    error = value - target
                    sigmas = abs(error) / std if std > 0 else float("inf")
                    cells.append(f"{error / target:+.2%} ({sigmas:.1f})")
                print(f"| {scenario} | {seed} | {mode} | " + " | ".join(cells)
                      + f" | {result.iterations} |", flush=True)


def _peer_derivative(state, p, torque):
    """The peer simulator's right-hand side, as its source writes it (Cazzolato & Prime).

    ``p = (J0_hat, J2_hat, c = m2 L1 l2, d = m2 l2 g, b1, b2)``; θ2 = 0 hangs. Its θ̈2 carries
    ``−½ sin 2θ2 (J0 J2 + (J2 sin θ2)²) θ̇1²``, where Lagrange's equations give ``+``.
    """
    j0, j2, c, d, b1, b2 = p
    _, th2, w1, w2 = state
    s, co, s2 = np.sin(th2), np.cos(th2), np.sin(2 * th2)
    n1 = (-j2 * b1 * w1 + c * co * b2 * w2 - j2 ** 2 * s2 * w1 * w2
          - 0.5 * j2 * c * co * s2 * w1 ** 2 + j2 * c * s * w2 ** 2 + j2 * torque
          + 0.5 * c * d * s2)
    n2 = (c * co * b1 * w1 - b2 * (j0 + j2 * s ** 2) * w2 + c * j2 * co * s2 * w1 * w2
          - 0.5 * s2 * (j0 * j2 + (j2 * s) ** 2) * w1 ** 2 - 0.5 * c ** 2 * s2 * w2 ** 2
          - c * co * torque - d * s * (j0 + j2 * s ** 2))
    denominator = j0 * j2 + (j2 * s) ** 2 - (c * co) ** 2
    return np.array([w1, w2, n1 / denominator, n2 / denominator])


def _peer_run(p, steps: int, dt: float = 0.002) -> np.ndarray:
    state, out = np.zeros(4), [np.zeros(4)]
    for k in range(steps - 1):
        torque = 0.43 if k == 0 else 0.0
        k1 = _peer_derivative(state, p, torque)
        k2 = _peer_derivative(state + dt / 2 * k1, p, torque)
        k3 = _peer_derivative(state + dt / 2 * k2, p, torque)
        k4 = _peer_derivative(state + dt * k3, p, torque)
        state = state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(state)
    return np.array(out)


def humble() -> None:
    """The peer simulator refitted to its impulse bag, and the bag's energy under it."""
    from scipy.optimize import least_squares

    from mb_estimation.io.bags import read_joint_states

    joints = read_joint_states(HUMBLE / "impulse_response_de", "joint_states")
    angles, rates = joints.positions, joints.velocities
    steps = 1000
    m1, m2, l1, l2, L1 = 0.040466, 0.009801, 0.05415, 0.096608, 0.093525
    guess = np.array([2.4e-5 + m1 * l1 ** 2 + m2 * L1 ** 2, 1.5e-5 + m2 * l2 ** 2, m2 * L1 * l2,
                      m2 * l2 * GRAVITY, 1e-5, 1e-5])

    def residual(scale):
        return (_peer_run(guess * scale, steps)[:, :2] - angles[:steps]).ravel()

    solution = least_squares(residual, np.ones(6), xtol=1e-15, ftol=1e-15, gtol=1e-15)
    p = guess * solution.x
    print(f"peer equations refitted to the first {steps * 0.002:g} s: max angle error "
          f"{np.abs(residual(solution.x)).max():.1e} rad")
    print(f"  J0_hat {p[0]:.6g}  J2_hat {p[1]:.6g}"
          f"  m2 L1 l2 / published {p[2] / (m2 * L1 * l2):.9f}"
          f"  m2 l2 g / (published, g = {GRAVITY}) {p[3] / (m2 * l2 * GRAVITY):.9f}"
          f"  b1 {p[4]:.3g}  b2 {p[5]:.6g}")
    j0, j2, c, d = p[:4]
    s, co = np.sin(angles[:, 1]), np.cos(angles[:, 1])
    w1, w2 = rates[:, 0], rates[:, 1]
    energy = 0.5 * (j0 + j2 * s ** 2) * w1 ** 2 + c * co * w1 * w2 + 0.5 * j2 * w2 ** 2 - d * co
    rises = np.diff(energy)[1:] > 1e-12  # after the impulse's own step
    print(f"  energy of the bag's states (b1 ≈ 0, b2 > 0: it can only fall): rises in "
          f"{rises.sum()} of {rises.size} steps, range {np.ptp(energy[1:]):.3g} J")


def main() -> None:
    """Run the part asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", nargs="?", default="light", choices=("light", "humble"))
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--seeds", default="0", help="noise seeds, e.g. 0,1,2")
    args = parser.parse_args()
    if args.part == "humble":
        humble()
    else:
        light_rig(args.seconds, [int(s) for s in args.seeds.split(",")])


if __name__ == "__main__":
    main()
