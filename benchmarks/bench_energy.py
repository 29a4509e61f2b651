"""Energy drift and constraint violation of the frictionless, unactuated Furuta model.

``python benchmarks/bench_energy.py``: h = 1e-3, 20 s, table over hinge compliance ε, damping τ
and two motions (a 0.6 rad swing with the arm turning at 1 rad/s; the release from upright).
Energy is :func:`mb_estimation.multibody.energy` (it includes the motor shaft's ½ J_shaft θ̇1²).
"""

from __future__ import annotations

import numpy as np

from mb_estimation import multibody as mb
from mb_estimation.io.config import builtin_config_path, load_config
from mb_estimation.multibody.constraints import holonomic_constraints
from mb_estimation.multibody.stepper import spook_step
from mb_estimation.numerics import jax
from mb_estimation.rigs import get_rig, parameter_arrays

jnp = jax.numpy
STEP = 1e-3
STEPS = 20000
MOTIONS = {"swing 0.6 rad": ((0.0, 0.6), (1.0, 0.0)),
           "release pi-0.03": ((0.0, np.pi - 0.03), (0.0, 0.0))}


def run(values, angles, rates):
    """Simulate 20 s: max and final relative energy change, median and max violation ratio."""
    system = get_rig("furuta").build(parameter_arrays(values))
    initial = mb.states_from_joints(system, jnp.array(angles), jnp.array(rates))

    @jax.jit
    def simulate(system, initial):
        def step(state, _):
            nxt, solution = spook_step(system, state, jnp.zeros(1), STEP)
            violation, _ = holonomic_constraints(system, nxt)
            return nxt, (mb.energy(system, nxt), violation, solution.multipliers)
        return jax.lax.scan(step, initial, None, length=STEPS)

    _, (energy, violation, multipliers) = simulate(system, initial)
    energy0 = float(mb.energy(system, initial))
    energy, violation, multipliers = map(np.asarray, (energy, violation, multipliers))
    gap = np.linalg.norm(violation[:, 7:10], axis=1)  # hinge 2, translational rows
    force = np.linalg.norm(multipliers[:, 7:10], axis=1) / STEP
    ratio = gap / (values["eps_lin2"] * force)
    return (np.max(np.abs(energy - energy0)) / abs(energy0), (energy[-1] - energy0) / abs(energy0),
            np.median(ratio), np.max(ratio))


def main() -> None:
    """Print the energy and violation table as Markdown."""
    base = dict(load_config(builtin_config_path("furuta_synthetic")).parameters)
    base.update(b1=0.0, b2=0.0, mu1=0.0, mu2=0.0)
    print("| ε | τ [s] | motion | max abs(ΔE)/E0 | final ΔE/E0 | violation/(ε F) median | max |")
    print("|---|---|---|---|---|---|---|")
    for eps, tau in [(1e-6, 0.02), (1e-6, 2e-3), (1e-6, 0.0), (1e-4, 0.02), (1e-4, 0.0)]:
        values = dict(base, eps_lin1=eps, eps_rot1=eps, eps_lin2=eps, eps_rot2=eps, tau1=tau,
                      tau2=tau)
        for name, (angles, rates) in MOTIONS.items():
            worst, final, median, peak = run(values, angles, rates)
            print(f"| {eps:g} | {tau:g} | {name} | {worst:.2%} | {final:+.2%} | {median:.2f} "
                  f"| {peak:.1f} |")


if __name__ == "__main__":
    main()
