"""Where one solve's time goes, against its floor.

Run pinned to one core::

    taskset -c 0 python benchmarks/perf/bench_floor.py [--seconds 10]

The problem of ``bench_estimator.py`` (the swing-up, h = 0.01, 13 parameter dimensions, the
paper's settings). After a compiling call, five timed calls; for the fastest, every compiled
program's run time (synchronised, so device work is charged to its program) per function, and
the rest — the host's glue — as the difference. The floor is one linearisation (residual and
Jacobian blocks of every step, then ``JᵀJ``) and one block-tridiagonal solve with its
back-substitution, each program timed alone from the same run.
"""

from __future__ import annotations

import argparse
import collections
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

import bench_estimator  # noqa: E402  (the problem and the paper's settings)

from mb_estimation import compiled  # noqa: E402
from mb_estimation.estimation import estimate  # noqa: E402
from mb_estimation.numerics import jax  # noqa: E402


def timed_programs():
    """Make every compiled program's run synchronised and timed; returns the two counters."""
    spent, calls = collections.Counter(), collections.Counter()
    run = compiled.Compiler.__call__

    def call(self, function, static, *args):
        started = time.perf_counter()
        out = jax.block_until_ready(run(self, function, static, *args))
        name = getattr(function, "__name__", repr(function))
        spent[name] += time.perf_counter() - started
        calls[name] += 1
        return out

    compiled.Compiler.__call__ = call
    return spent, calls


def main() -> None:
    """Print the table of programs and the floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="recording length [s]")
    args = parser.parse_args()
    spent, calls = timed_programs()
    problem = bench_estimator.swingup_problem(args.seconds)
    estimate(problem, bench_estimator.SETTINGS)  # compile
    best = None
    for _ in range(5):
        spent.clear()
        calls.clear()
        started = time.perf_counter()
        result = estimate(problem, bench_estimator.SETTINGS)
        total = time.perf_counter() - started
        if best is None or total < best[0]:
            best = (total, dict(spent), dict(calls), result.iterations)
    total, spent_s, count, iterations = best
    programs = sum(spent_s.values())
    per_call = {name: spent_s[name] / count[name] for name in spent_s}
    # transition_jacobians runs once per chunk: a linearisation is all the chunks of one pass
    linearizations = count["normal_equations"]
    linearization = (spent_s["transition_jacobians"] + spent_s["first_jacobians"]
                     + spent_s["normal_equations"]) / linearizations
    solve = per_call["eliminate_states"] + per_call["trial_states"]
    floor = linearization + solve
    print(f"{problem.recordings[0].num_steps} steps, {iterations} iterations, "
          f"{linearizations} linearisations: total {total:.3f} s, programs {programs:.3f} s, "
          f"host glue {total - programs:.3f} s")
    print(f"floor: one linearisation {1e3 * linearization:.1f} ms + one solve "
          f"{1e3 * solve:.1f} ms = {1e3 * floor:.1f} ms; per iteration "
          f"{1e3 * total / max(iterations, 1):.1f} ms = "
          f"{total / max(iterations, 1) / floor:.2f} × the floor")
    print("| program | total [ms] | calls | per call [ms] |")
    print("|---|---|---|---|")
    for name in sorted(spent_s, key=spent_s.get, reverse=True):
        print(f"| {name} | {1e3 * spent_s[name]:.1f} | {count[name]} | "
              f"{1e3 * per_call[name]:.2f} |")
    print(f"| (host glue) | {1e3 * (total - programs):.1f} | | |")


if __name__ == "__main__":
    main()
