"""A run of the rigid simulation-error stage: its programs' compile time and cost per call.

Run pinned to one core, e.g.::

    taskset -c 0 python benchmarks/perf/bench_lanes.py [--steps 128] [--substeps 2]

The §4.7 rig on rigid hinges, J_Azz, J_Byy, b1, b2 free, dry friction dropped as the stage
drops it: ``rigid_chunk`` (the plain run of ``--steps`` grid steps of 1 ms, ``--substeps``
rigid steps each: a lane of the stage, a chunk of the replays) and
``rigid_lane_sensitivities`` (the Jacobians in the start state and the free values along the
states a run of ``--steps`` rigid steps stored: what the stage's linearisation adds to its
plain run of them), each compiled once and then called 20 times. Prints the compile time, the
program's HLO lines, the time per call and per rigid step.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mb_estimation.config import apply_overrides, load_config
from mb_estimation.estimation.shooting_segments import rigid_lane_sensitivities
from mb_estimation.multibody import without_dry_friction
from mb_estimation.multibody.joint_space import rigid_start
from mb_estimation.multibody.variational import rigid_chunk
from mb_estimation.numerics import COMPILER_OPTIONS, jax
from mb_estimation.rigs import built_system, parameter_arrays
from mb_estimation.setup import rig_of

FREE = ("J_Azz", "J_Byy", "b1", "b2")
CALLS = 20


def timed(name: str, function, arguments, steps: int) -> None:
    """Compile ``function(*arguments)``, call it :data:`CALLS` times; print the figures."""
    started = time.perf_counter()
    compiled = jax.jit(function).lower(*arguments).compile(COMPILER_OPTIONS)
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(*arguments))
    started = time.perf_counter()
    for _ in range(CALLS):
        jax.block_until_ready(compiled(*arguments))
    call_s = (time.perf_counter() - started) / CALLS
    print(f"{name}: compile {compile_s:.1f} s, {compiled.as_text().count(chr(10))} HLO lines, "
          f"{1e3 * call_s:.2f} ms a call, {1e6 * call_s / steps:.1f} µs a rigid step")


def main() -> None:
    """Time both programs for the options given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=128, help="grid steps of a run")
    parser.add_argument("--substeps", type=int, default=2, help="rigid steps per grid step")
    options = parser.parse_args()
    config = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    rig, frictionless = rig_of(config), (True, True)
    fixed = {name: np.asarray(value, dtype=np.float64)
             for name, value in config.parameters.items() if name not in FREE}
    values = np.array([float(config.parameters[name]) for name in FREE])
    system = without_dry_friction(built_system(rig, parameter_arrays(config.parameters)),
                                  frictionless)
    h, steps, locked = 1e-3 / options.substeps, options.steps, np.zeros(2)
    start = np.array([0.0, 0.1, 0.5, 0.2])
    state = rigid_start(system, start, locked)
    inputs = 0.2 * np.random.default_rng(0).standard_normal((steps, 1))
    timed("rigid_chunk", lambda *args: rigid_chunk(*args),
          ((np.asarray(h), np.asarray(options.substeps)), system, state, inputs, locked),
          steps * options.substeps)
    _, path = rigid_chunk((np.asarray(h), np.asarray(1)), system, state, inputs, locked)
    timed("rigid_lane_sensitivities",
          lambda *args: rigid_lane_sensitivities((rig, FREE, frictionless), *args),
          (np.asarray(h), fixed, values, start, np.zeros((4, 8)), np.asarray(1.0), state, path,
           inputs, locked), steps)


if __name__ == "__main__":
    main()
