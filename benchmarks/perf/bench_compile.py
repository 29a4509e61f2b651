"""Where a cold (and a cached) start's compilation goes, program by program.

Run pinned to one core, each in its own process::

    taskset -c 0 python benchmarks/perf/bench_compile.py               # cold: no disk cache
    taskset -c 0 python benchmarks/perf/bench_compile.py --cache DIR   # twice: fill, then read
    taskset -c 0 python benchmarks/perf/bench_compile.py --levels      # the Jacobian program
                                                                       # at LLVM levels 2, 1, 0
    taskset -c 0 python benchmarks/perf/bench_compile.py --formulation joint   # rigid-limit fit
    taskset -c 0 python benchmarks/perf/bench_compile.py --node [CONFIG]       # node's warm-up

The problem of ``bench_estimator.py`` (the 10 s swing-up, h = 0.01, 13 parameter dimensions).
Every program the solve compiles is traced, lowered and compiled apart and timed; the table
gives each one's seconds, its optimized HLO size in lines (what XLA's code generation works
through), the solve's ``compile_time_s`` and the median of three solves after compilation.
``--levels`` compiles the transition Jacobian program of one 256-step chunk at
``xla_backend_optimization_level`` 2 (XLA's default), 1 and 0 and times a call of each (the
median of 20): compilation against run time.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

import bench_estimator  # noqa: E402  (the problem and the paper's settings)
import numpy as np  # noqa: E402

from mb_estimation import compiled  # noqa: E402
from mb_estimation.estimation import estimate  # noqa: E402
from mb_estimation.numerics import (  # noqa: E402
    CACHE_ENVIRONMENT_VARIABLE,
    COMPILER_OPTIONS,
    compiler_options,
    configure_jax,
    jax,
)


def compile_table(solve) -> None:
    """``solve()`` once, compiling every program apart; one row per program, then 3 solves."""
    rows = []

    def call(self, function, static, *args):
        key = compiled.program_key(function, static, args)
        executable = compiled._PROGRAMS.get(key)
        if executable is None:
            bound = function if static is None else functools.partial(function, static)
            started = time.perf_counter()
            traced = jax.jit(bound).trace(*args)
            lowered = traced.lower()
            lowered_at = time.perf_counter()
            executable = lowered.compile(compiler_options(function))
            done = time.perf_counter()
            rows.append((getattr(function, "__name__", repr(function)), lowered_at - started,
                         done - lowered_at, executable.as_text().count("\n")))
            self.seconds += done - started
            compiled._PROGRAMS[key] = executable
        return executable(*args)

    compiled.Compiler.__call__ = call
    started = time.perf_counter()
    result = solve()
    first = time.perf_counter() - started
    again = []
    for _ in range(3):  # the same solve, compiled: what every later fit of this shape costs
        started = time.perf_counter()
        solve()
        again.append(time.perf_counter() - started)
    print(f"first solve {first:.2f} s, compile_time_s {result.compile_time_s:.2f} s, "
          f"{result.iterations} iterations; after compilation {np.median(again):.2f} s a solve")
    print("| program | trace + lower [s] | compile [s] | optimized HLO [lines] |")
    print("|---|---|---|---|")
    for name, lowering, compiling, lines in rows:
        print(f"| {name} | {lowering:.2f} | {compiling:.2f} | {lines} |")


def level_table(problem) -> None:
    """The transition Jacobian program of one chunk at LLVM optimisation levels 2, 1, 0."""
    from mb_estimation.estimation.formulations import formulation_named
    from mb_estimation.estimation.parameters import FreeParameters
    from mb_estimation.estimation.recording_blocks import CHUNK_TRANSITIONS
    from mb_estimation.estimation.residuals import ModelStructure, transition_jacobians
    from mb_estimation.estimation.solver import states_from_angles
    from mb_estimation.rigs import parameter_arrays

    grid = problem.recordings[0]
    structure = ModelStructure(problem.rig, FreeParameters.of(problem.rig.spec, problem.free),
                               formulation_named(problem.formulation))
    values = parameter_arrays(problem.parameters)
    fixed = {k: v for k, v in values.items() if k not in structure.free.names}
    free_values = {k: values[k] for k in structure.free.names}
    states = states_from_angles(structure, fixed, free_values, grid.filtered_angles, grid.dt)
    n = CHUNK_TRANSITIONS
    args = (fixed, free_values, jax.tree_util.tree_map(lambda a: a[:n], states),
            jax.tree_util.tree_map(lambda a: a[1:n + 1], states), grid.inputs[:n],
            grid.measured_angles[1:n + 1], grid.observed[1:n + 1], np.asarray(grid.dt),
            np.asarray(10.0), grid.locked_mask)
    lowered = jax.jit(functools.partial(transition_jacobians, structure)).lower(*args)
    print("| LLVM level | compile [s] | run per chunk [ms] |")
    print("|---|---|---|")
    for level in (2, 1, 0):
        started = time.perf_counter()
        executable = lowered.compile({**COMPILER_OPTIONS, "xla_backend_optimization_level": level})
        compiling = time.perf_counter() - started
        jax.block_until_ready(executable(*args))
        runs = []
        for _ in range(20):
            started = time.perf_counter()
            jax.block_until_ready(executable(*args))
            runs.append(time.perf_counter() - started)
        print(f"| {level} | {compiling:.2f} | {1e3 * np.median(runs):.2f} |")


def main() -> None:
    """Print the table asked for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", metavar="DIR", help="persistent compile cache (default: off)")
    parser.add_argument("--levels", action="store_true",
                        help="the Jacobian program at LLVM optimisation levels 2, 1, 0")
    parser.add_argument("--formulation", choices=("maximal", "joint"), default="maximal",
                        help="the paper's maximal coordinates (default) or the rigid limit in "
                             "joint coordinates (calibrate's first fit)")
    parser.add_argument("--node", nargs="?", const="furuta_synthetic", metavar="CONFIG",
                        help="instead: the node's window estimate as its warm-up runs it, on "
                             "CONFIG (default furuta_synthetic, then with J_Azz, J_Byy, b1, b2 "
                             "free; a 5 s window)")
    args = parser.parse_args()
    os.environ[CACHE_ENVIRONMENT_VARIABLE] = args.cache or ""
    configure_jax()
    if args.node:
        compile_table(node_window(args.node))
        return
    problem = dataclasses.replace(bench_estimator.swingup_problem(10.0),
                                  formulation=args.formulation)
    if args.levels:
        level_table(problem)
    else:
        compile_table(lambda: estimate(problem, bench_estimator.SETTINGS))


def node_window(name: str):
    """The node's estimate of its warm-up window on config ``name``: what a cold start compiles."""
    from mb_estimation.config import apply_overrides, load_config
    from mb_estimation.online.core import EstimatorCore
    from mb_estimation.online.windows import estimate_window

    config = load_config(name)
    if name == "furuta_synthetic":
        config = apply_overrides(config, free=["J_Azz", "J_Byy", "b1", "b2"])
    windows = []
    core = EstimatorCore(config, estimator=lambda c, r: windows.append((c, r)))
    core.warm_up()  # hands the synthetic window to the estimator above
    return lambda: estimate_window(*windows[0])


if __name__ == "__main__":
    main()
