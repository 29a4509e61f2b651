"""Release of the synthetic Furuta pendulum against the rigid reduced-coordinate reference model.

``python benchmarks/studies/bench_release_reference.py``: for hinge settings (compliance ε,
damping τ), holonomic rows (the paper's (2.8) or drift-corrected) and steps h, the largest
joint-angle difference to ``test/reference_furuta.py`` up to 1.2, 1.3, 1.6 and 3 s, the
difference to the same setting at half the step over 3 s (convergence in h), and the energy
(kinetic, gravitational, elastic) lost from 1.2 s to 1.3 s, the first spin transient. Then the
work of the hinges' dampers in that transient, ``∫ Σ (τ/ε) ġ² dt``, for Table G.5's hinges
resolved in the step, and (``--compliant``, ~6 min more) the Table G.5 release against
``test/reference_compliant_furuta.py``, an independent continuous-time model of the same
compliant, damped hinges, at two tolerances.
Prints Markdown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "test"))

from reference_compliant_furuta import simulate_compliant  # noqa: E402
from reference_furuta import energy_reference, simulate_reference  # noqa: E402

from mb_estimation.config import builtin_config_path, load_config  # noqa: E402
from mb_estimation.multibody import energy  # noqa: E402
from mb_estimation.multibody.constraints import (  # noqa: E402
    constraint_curvature,
    holonomic_constraints,
)
from mb_estimation.numerics import jax  # noqa: E402
from mb_estimation.rigs import get_rig, parameter_arrays  # noqa: E402
from mb_estimation.simulation import simulate_recording  # noqa: E402

jnp = jax.numpy

RATE_HZ = 1000.0
CASES = [  # (ε, τ [s], drift-corrected rows, steps [s]); each step is compared with the next
    (1e-6, 0.02, False, (1e-4, 5e-5, 2.5e-5, 1.25e-5)),  # Table G.5, the paper's rows
    (1e-6, 0.02, True, (1e-4, 5e-5, 2.5e-5)),            # Table G.5, drift-corrected
    (1e-6, 0.0, False, (1e-4, 5e-5, 2.5e-5)),            # undamped
    (1e-8, 0.0, False, (1e-4, 5e-5, 2.5e-5)),            # near rigid
]


def _values(base, eps, tau):
    return dict(base, eps_lin1=eps, eps_rot1=eps, eps_lin2=eps, eps_rot2=eps, tau1=tau,
                tau2=tau)


def damper_work(values, step, rate_hz=20000.0, span_s=(1.2, 1.3)):
    """Energy lost and ``∫ Σ_rows (τ/ε) ġ² dt`` [J] over ``span_s``, from a run sampled finely."""
    rig = get_rig("furuta", None, True)
    run = simulate_recording(rig, values, "release", duration_s=span_s[1], dt=step,
                             rate_hz=rate_hz)
    system = rig.build(parameter_arrays(values))
    first, last = (int(round(t * rate_hz)) for t in span_s)
    states = jax.tree_util.tree_map(lambda a: a[first:last + 1], run.states)

    def rates(state):
        # v_k is the velocity of the step into q_k: G_k v_k is the rate half a step late, off
        # by ½ h κ; the step's own (midpoint) rate is G_k v_k - ½ h κ_k.
        _, jacobian = holonomic_constraints(system, state)
        curvature = jnp.concatenate([constraint_curvature(hinge, state)
                                     for hinge in system.hinges])
        return jacobian @ state.velocity.reshape(-1) - 0.5 * step * curvature

    rate = np.asarray(jax.vmap(rates)(states))
    weight = np.concatenate([[values["tau1"] / values["eps_lin1"]] * 3,
                             [values["tau1"] / values["eps_rot1"]] * 2,
                             [values["tau2"] / values["eps_lin2"]] * 3,
                             [values["tau2"] / values["eps_rot2"]] * 2])
    work = np.trapezoid(np.sum(weight * rate**2, axis=1), dx=1.0 / rate_hz)
    lost = float(energy(system, run.states[first]) - energy(system, run.states[last]))
    return lost, float(work)


def compliant_comparison(base, time_s) -> None:
    """Print the stepper's distance to the independent compliant model (Table G.5 release)."""
    references = {rtol: simulate_compliant(base, [0.0, np.pi - 0.03], time_s, rtol=rtol,
                                           atol=rtol * 1e-2)["theta"] for rtol in (1e-7, 1e-8)}
    reference = references[1e-8]
    spans = (1.2, 1.3, 1.6, 2.0, 2.5, 3.0)
    print("\n| rows | h [s] | max abs(Δθ) to the compliant reference, to "
          + " | ".join(f"{t:g} s" for t in spans) + " |")
    print("|---|---|" + "---|" * len(spans))
    for drift_correction, steps in ((True, (1e-4, 5e-5, 2.5e-5, 1.25e-5)), (False, (1e-4, 2.5e-5))):
        rig = get_rig("furuta", None, drift_correction)
        for step in steps:
            run = simulate_recording(rig, base, "release", duration_s=3.0, dt=step,
                                     rate_hz=RATE_HZ)
            error = np.max(np.abs(run.joint_angles - reference), axis=1)
            rows = "corrected" if drift_correction else "(2.8)"
            print(f"| {rows} | {step:g} | "
                  + " | ".join(f"{error[: int(t * RATE_HZ) + 1].max():.2e}" for t in spans) + " |")
    tolerance_effect = np.max(np.abs(references[1e-7] - reference))
    print(f"\ncompliant reference (Radau): rtol 1e-7 vs 1e-8 differ by {tolerance_effect:.1e} rad "
          "over 3 s")


def main() -> None:
    """Print the comparison tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compliant", action="store_true",
                        help="also compare with the independent compliant-hinge model")
    compliant = parser.parse_args().compliant
    base = dict(load_config(builtin_config_path("furuta_synthetic")).parameters)
    time_s = np.arange(3001) / RATE_HZ
    reference = simulate_reference(base, [0.0, np.pi - 0.03], [0.0, 0.0], time_s)
    reference_loss = energy_reference(base, reference["theta"][1200], reference["dtheta"][1200]) \
        - energy_reference(base, reference["theta"][1300], reference["dtheta"][1300])
    print("| ε | τ [s] | rows | h [s] | max abs(Δθ) to rigid, to 1.2 s | 1.3 s | 1.6 s | 3 s "
          "| to the run at h/2, 3 s | energy lost 1.2→1.3 s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for eps, tau, drift_correction, steps in CASES:
        values = _values(base, eps, tau)
        rig = get_rig("furuta", None, drift_correction)
        system = rig.build(parameter_arrays(values))
        runs = [simulate_recording(rig, values, "release", duration_s=3.0, dt=step,
                                   rate_hz=RATE_HZ) for step in steps]
        for i, (step, run) in enumerate(zip(steps, runs, strict=True)):
            error = np.max(np.abs(run.joint_angles - reference["theta"]), axis=1)
            spans = [error[: int(t * RATE_HZ) + 1].max() for t in (1.2, 1.3, 1.6, 3.0)]
            halved = (f"{np.max(np.abs(run.joint_angles - runs[i + 1].joint_angles)):.1e}"
                      if i + 1 < len(runs) else "")
            lost = float(energy(system, run.states[1200]) - energy(system, run.states[1300]))
            rows = "corrected" if drift_correction else "(2.8)"
            print(f"| {eps:g} | {tau:g} | {rows} | {step:g} | "
                  + " | ".join(f"{e:.1e}" for e in spans) + f" | {halved} | {lost:.4f} J |")
    start_energy = energy_reference(base, reference["theta"][0], [0.0, 0.0])
    print(f"\nrigid reference: energy {start_energy:.3f} J, lost 1.2→1.3 s = "
          f"{reference_loss:.4f} J (viscous b1, b2); arm rate peak "
          f"{np.max(np.abs(reference['dtheta'][:, 0])):.1f} rad/s")
    lost, work = damper_work(base, 2.5e-5)
    print(f"\nTable G.5 hinges, corrected rows, h = 2.5e-5 s, sampled at 20 kHz, 1.2→1.3 s: "
          f"energy lost {lost:.4f} J; work of the hinge dampers {work:.4f} J; "
          f"lost minus damper work {lost - work:.4f} J (rigid reference: {reference_loss:.4f} J)")
    if compliant:
        compliant_comparison(base, time_s)


if __name__ == "__main__":
    main()
