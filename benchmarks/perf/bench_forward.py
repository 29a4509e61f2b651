"""Forward simulation speed of the Furuta model (SPOOK, h = 1e-3) on one CPU core.

Run pinned to one core, e.g.::

    taskset -c 0 python benchmarks/perf/bench_forward.py [--steps 20000] [--json out.json]

Reports compilation separately from execution and, in the same run, the alternative a user might
write first: the same jitted step driven from a Python loop (one dispatch per step), and the
scanned rollout with drift-corrected holonomic rows (``drift_correction: true``).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

import numpy as np  # noqa: E402

from mb_estimation import multibody as mb  # noqa: E402
from mb_estimation.config import builtin_config_path, load_config  # noqa: E402
from mb_estimation.numerics import jax  # noqa: E402
from mb_estimation.rigs import get_rig, parameter_arrays  # noqa: E402

jnp = jax.numpy
STEP = 1e-3


def main() -> None:
    """Time the scanned rollout and the per-step Python loop; print (and save) the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()

    values = dict(load_config(builtin_config_path("furuta_synthetic")).parameters)
    values.update(mu1=1e-3, mu2=1e-3)  # dry friction active: the full box-LCP path
    system = get_rig("furuta").build(parameter_arrays(values))
    initial = mb.states_from_joints(system, jnp.array([0.0, 2.0]), jnp.array([1.0, 0.0]))
    inputs = jnp.asarray(0.2 * np.sin(np.arange(args.steps) * STEP * 3.0))[:, None]

    scan = jax.jit(lambda s, x, u: mb.simulate(s, x, u, STEP))

    def timed_scan(system):
        """Compile time and median run time [s] of the scanned rollout."""
        started = time.perf_counter()
        jax.block_until_ready(scan(system, initial, inputs))
        compile_s = time.perf_counter() - started
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            jax.block_until_ready(scan(system, initial, inputs))
            times.append(time.perf_counter() - started)
        return compile_s, float(np.median(times))

    compile_s, scan_s = timed_scan(system)
    corrected_compile_s, corrected_s = timed_scan(
        get_rig("furuta", None, True).build(parameter_arrays(values)))

    step = jax.jit(lambda s, x, u: mb.spook_step(s, x, u, STEP)[0])
    state = step(system, initial, inputs[0])
    loop_steps = min(args.steps, 2000)
    started = time.perf_counter()
    for k in range(loop_steps):
        state = step(system, state, inputs[k])
    jax.block_until_ready(state)
    loop_s = (time.perf_counter() - started) * args.steps / loop_steps

    result = {
        "steps": args.steps,
        "compile_s": compile_s,
        "scan_s": scan_s,
        "scan_steps_per_s": args.steps / scan_s,
        "python_loop_steps_per_s": args.steps / loop_s,
        "speedup_vs_python_loop": loop_s / scan_s,
        "real_time_factor_h1e-3": args.steps * STEP / scan_s,
        "drift_corrected_compile_s": corrected_compile_s,
        "drift_corrected_scan_steps_per_s": args.steps / corrected_s,
        "drift_corrected_slowdown": corrected_s / scan_s,
    }
    for key, value in result.items():
        print(f"{key:>28}: {value:.4g}" if isinstance(value, float) else f"{key:>28}: {value}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
