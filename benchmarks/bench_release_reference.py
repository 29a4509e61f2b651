"""Release of the synthetic Furuta pendulum against the rigid reduced-coordinate reference model.

``python benchmarks/bench_release_reference.py``: for several hinge settings (compliance ε,
damping τ) and steps h, the largest joint-angle difference to ``test/reference_furuta.py`` up to
1.2 s, 1.3 s, 1.6 s and 3 s, and the energy the model loses from 1.2 s to 1.3 s (the first spin
transient, arm at ~38 rad/s). Prints a Markdown table.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from reference_furuta import energy_reference, simulate_reference  # noqa: E402

from mb_estimation.io.config import builtin_config_path, load_config  # noqa: E402
from mb_estimation.multibody import energy  # noqa: E402
from mb_estimation.rigs import get_rig, parameter_arrays  # noqa: E402
from mb_estimation.simulation import simulate_recording  # noqa: E402

RATE_HZ = 1000.0
CASES = [  # (ε, τ [s], h [s])
    (1e-6, 0.02, 1e-4),  # Table G.5
    (1e-6, 0.02, 2.5e-5),
    (1e-6, 0.0, 1e-4),
    (1e-8, 1e-3, 5e-5),
]


def main() -> None:
    """Print the comparison table."""
    base = dict(load_config(builtin_config_path("furuta_synthetic")).parameters)
    rig = get_rig("furuta")
    time_s = np.arange(3001) / RATE_HZ
    reference = simulate_reference(base, [0.0, np.pi - 0.03], [0.0, 0.0], time_s)
    reference_loss = energy_reference(base, reference["theta"][1200], reference["dtheta"][1200]) \
        - energy_reference(base, reference["theta"][1300], reference["dtheta"][1300])
    print("| ε | τ [s] | h [s] | max abs(Δθ) to 1.2 s | to 1.3 s | to 1.6 s | to 3 s "
          "| energy lost 1.2→1.3 s |")
    print("|---|---|---|---|---|---|---|---|")
    for eps, tau, step in CASES:
        values = dict(base, eps_lin1=eps, eps_rot1=eps, eps_lin2=eps, eps_rot2=eps, tau1=tau,
                      tau2=tau)
        run = simulate_recording(rig, values, "release", duration_s=3.0, dt=step, rate_hz=RATE_HZ)
        error = np.max(np.abs(run.joint_angles - reference["theta"]), axis=1)
        system = rig.build(parameter_arrays(values))
        lost = float(energy(system, run.states[1200]) - energy(system, run.states[1300]))
        spans = [error[: int(t * RATE_HZ) + 1].max() for t in (1.2, 1.3, 1.6, 3.0)]
        print(f"| {eps:g} | {tau:g} | {step:g} | " + " | ".join(f"{e:.1e}" for e in spans)
              + f" | {lost:.3g} J of {float(energy(system, run.states[0])):.3g} J |")
    print(f"\nrigid reference: energy lost 1.2→1.3 s = {reference_loss:.1e} J; "
          f"arm rate peak {np.max(np.abs(reference['dtheta'][:, 0])):.1f} rad/s")


if __name__ == "__main__":
    main()
