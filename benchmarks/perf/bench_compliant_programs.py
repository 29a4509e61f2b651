"""Compile and run times of the compliant (SPOOK) model's programs, for comparing two trees.

Run pinned to one core, once per tree (``PYTHONPATH`` picks the tree)::

    PYTHONPATH=TREE taskset -c 0 python benchmarks/perf/bench_compliant_programs.py [CONFIG ...]

(default configurations: furuta_synthetic furuta).

Per configuration (its rig and values, compliant hinges as SPOOK steps them): a 512-step
rollout from a moving state under a sine input (``multibody.simulate``, h = 1e-3 s), and the
Jacobian of one step's velocities with respect to the state for 64 inputs at once
(``jacfwd`` under ``vmap``, as the compliant model's linearisations take it). Each is
compiled apart (``jax.jit(...).lower(...).compile()``, timed) and then run seven times (the
median). A checksum of each output shows whether two trees compute the same numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

from mb_estimation.config import load_config  # noqa: E402
from mb_estimation.multibody import simulate, spook_step, states_from_joints  # noqa: E402
from mb_estimation.numerics import configure_jax, jax  # noqa: E402
from mb_estimation.rigs import get_rig, parameter_arrays  # noqa: E402

jnp = jax.numpy
STEP_S = 1e-3


def _timed(program, arguments) -> tuple[float, float, float]:
    """Compile seconds, median run seconds of seven, and a checksum of the last output leaf."""
    started = time.perf_counter()
    compiled = program.lower(*arguments).compile()
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(*arguments))
    runs = []
    for _ in range(7):
        started = time.perf_counter()
        output = jax.block_until_ready(compiled(*arguments))
        runs.append(time.perf_counter() - started)
    return compile_s, statistics.median(runs), float(np.sum(jax.tree_util.tree_leaves(output)[-1]))


def main() -> None:
    """Compile and time both programs per configuration; print one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=["furuta_synthetic", "furuta"])
    args = parser.parse_args()
    configure_jax()
    import mb_estimation
    print(f"tree: {os.path.dirname(os.path.dirname(mb_estimation.__file__))}")
    for name in args.configs:
        config = load_config(name)
        system = get_rig(config.rig).build(parameter_arrays(config.parameters))
        state = states_from_joints(system, jnp.array([0.3, 2.0]), jnp.array([0.5, -1.0]))
        inputs = jnp.asarray(np.sin(np.arange(512) * 0.01)[:, None])
        rollout = jax.jit(lambda s, x, u: simulate(s, x, u, STEP_S))
        step_velocity = jax.jacfwd(lambda x, s, u: spook_step(s, x, u, STEP_S)[0].velocity)
        jacobians = jax.jit(jax.vmap(step_velocity, in_axes=(None, None, 0)))
        for label, program, arguments in (("rollout, 512 steps", rollout, (system, state, inputs)),
                                          ("step Jacobian, 64", jacobians,
                                           (state, system, inputs[:64]))):
            compile_s, run_s, checksum = _timed(program, arguments)
            print(f"{name:18s} {label:20s} compile {compile_s:5.2f} s  run {run_s * 1e3:7.2f} ms"
                  f"  checksum {checksum:.15e}")


if __name__ == "__main__":
    main()
