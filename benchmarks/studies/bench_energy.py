"""Energy drift and constraint violation of the frictionless, unactuated Furuta model.

``python benchmarks/studies/bench_energy.py [--step H]``: h = 1e-3 (or H), 20 s, table over hinge
compliance ε, damping τ, the paper's holonomic rows (2.8) or drift-corrected ones, and two
motions (a 0.6 rad swing with the arm turning at 1 rad/s; the release from upright). Energy is
:func:`mb_estimation.multibody.energy`: kinetic (with the motor shaft's ½ J_shaft θ̇1²),
gravitational and the hinges' elastic ½ gᵀε⁻¹g.
"""

from __future__ import annotations

import argparse

import numpy as np

from mb_estimation import multibody as mb
from mb_estimation.config import builtin_config_path, load_config
from mb_estimation.multibody.constraints import holonomic_constraints
from mb_estimation.multibody.stepper import spook_step
from mb_estimation.numerics import jax
from mb_estimation.rigs import get_rig, parameter_arrays

jnp = jax.numpy
DURATION_S = 20.0
MOTIONS = {"swing 0.6 rad": ((0.0, 0.6), (1.0, 0.0)),
           "release pi-0.03": ((0.0, np.pi - 0.03), (0.0, 0.0))}


def run(values, angles, rates, drift_correction, step_s=1e-3):
    """Simulate 20 s: max and final relative energy change, median and max violation ratio."""
    system = get_rig("furuta", None, drift_correction).build(parameter_arrays(values))
    initial = mb.states_from_joints(system, jnp.array(angles), jnp.array(rates))

    @jax.jit
    def simulate(system, initial):
        def step(state, _):
            nxt, solution = spook_step(system, state, jnp.zeros(1), step_s)
            violation, _ = holonomic_constraints(system, nxt)
            return nxt, (mb.energy(system, nxt), violation, solution.multipliers)
        return jax.lax.scan(step, initial, None, length=int(round(DURATION_S / step_s)))

    _, (energy, violation, multipliers) = simulate(system, initial)
    energy0 = float(mb.energy(system, initial))
    energy, violation, multipliers = map(np.asarray, (energy, violation, multipliers))
    # Hinge 2's translational rows: 5 violation rows per hinge; hinge 1 has 7 multiplier rows.
    gap = np.linalg.norm(violation[:, 5:8], axis=1)
    force = np.linalg.norm(multipliers[:, 7:10], axis=1) / step_s
    ratio = gap / (values["eps_lin2"] * force)
    return (np.max(np.abs(energy - energy0)) / abs(energy0), (energy[-1] - energy0) / abs(energy0),
            np.median(ratio), np.max(ratio))


def main() -> None:
    """Print the energy and violation table as Markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=float, default=1e-3, help="time step h [s]")
    step_s = parser.parse_args().step
    base = dict(load_config(builtin_config_path("furuta_synthetic")).parameters)
    base.update(b1=0.0, b2=0.0, mu1=0.0, mu2=0.0)
    print("| ε | τ [s] | rows | motion | max abs(ΔE)/E0 | final ΔE/E0 "
          "| violation/(ε F) median | max |")
    print("|---|---|---|---|---|---|---|---|")
    for eps, tau, drift_correction in [(1e-6, 0.02, False), (1e-6, 0.02, True),
                                       (1e-6, 2e-3, False), (1e-6, 2e-3, True),
                                       (1e-6, 1e-4, True), (1e-6, 0.0, False),
                                       (1e-4, 0.02, False), (1e-4, 0.02, True),
                                       (1e-4, 0.0, False)]:
        values = dict(base, eps_lin1=eps, eps_rot1=eps, eps_lin2=eps, eps_rot2=eps, tau1=tau,
                      tau2=tau)
        rows = "corrected" if drift_correction else "(2.8)"
        for name, (angles, rates) in MOTIONS.items():
            worst, final, median, peak = run(values, angles, rates, drift_correction, step_s)
            print(f"| {eps:g} | {tau:g} | {rows} | {name} | {worst:.2%} | {final:+.2%} "
                  f"| {median:.2f} | {peak:.1f} |")


if __name__ == "__main__":
    main()
