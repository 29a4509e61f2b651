"""One lane of the simulation-error stage: its programs' compile time and cost per call.

Run pinned to one core, e.g.::

    taskset -c 0 python benchmarks/perf/bench_lanes.py [--steps 128] [--batch 1] [--substeps 2]

The §4.7 rig on rigid hinges, J_Azz, J_Byy, b1, b2 free, dry friction dropped as the stage
drops it: ``segments_residuals`` (a plain simulation of ``--batch`` lanes of ``--steps`` grid
steps of 1 ms, ``--substeps`` rigid steps each) and ``linearize_segments`` (the same with the
Jacobians in the lanes' start states and the free values), each compiled once and then called
20 times. Prints the compile time, the program's HLO lines, the time per call and per lane
step.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mb_estimation.config import apply_overrides, load_config
from mb_estimation.estimation.shooting_segments import linearize_segments, segments_residuals
from mb_estimation.numerics import jax, jit
from mb_estimation.setup import rig_of

FREE = ("J_Azz", "J_Byy", "b1", "b2")
CALLS = 20


def main() -> None:
    """Time both programs for the options given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=128, help="grid steps per lane")
    parser.add_argument("--batch", type=int, default=1, help="lanes per call")
    parser.add_argument("--substeps", type=int, default=2, help="rigid steps per grid step")
    options = parser.parse_args()
    config = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    fixed = {name: jax.numpy.asarray(value, dtype=jax.numpy.float64)
             for name, value in config.parameters.items() if name not in FREE}
    static = (rig_of(config), FREE, (True, True), True)
    step = (np.asarray(1e-3 / options.substeps), np.asarray(options.substeps))
    values = np.array([float(config.parameters[name]) for name in FREE])
    batch, steps = options.batch, options.steps
    arguments = (np.tile([0.0, 0.1, 0.5, 0.2], (batch, 1)), values,
                 np.zeros((batch, steps + 1, 2)), np.ones((batch, steps + 1)),
                 0.2 * np.random.default_rng(0).standard_normal((batch, steps, 1)),
                 np.zeros((batch, 2)))
    for function in (segments_residuals, linearize_segments):
        program = jit(lambda *args, f=function: f(static, step, fixed, *args))
        started = time.perf_counter()
        compiled = program.lower(*arguments).compile()
        compile_s = time.perf_counter() - started
        jax.block_until_ready(compiled(*arguments))
        started = time.perf_counter()
        for _ in range(CALLS):
            jax.block_until_ready(compiled(*arguments))
        call_s = (time.perf_counter() - started) / CALLS
        print(f"{function.__name__}: compile {compile_s:.1f} s, "
              f"{compiled.as_text().count(chr(10))} HLO lines, {1e3 * call_s:.2f} ms a call, "
              f"{1e6 * call_s / (batch * steps * options.substeps):.1f} µs a lane step")


if __name__ == "__main__":
    main()
