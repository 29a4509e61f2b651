"""Peak memory of one solve of the swing-up problem.

Run once per length, each in its own process (the peak resident size is per process)::

    taskset -c 0 python benchmarks/perf/bench_memory.py 10
    taskset -c 0 python benchmarks/perf/bench_memory.py 100

The problem of ``bench_estimator.py`` (the swing-up, h = 0.01, 13 parameter dimensions, the
paper's settings) with SECONDS of data: simulated, solved once (compiling) and once more; the
process's peak RSS (``resource.getrusage``) after each stage.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

import bench_estimator  # noqa: E402  (the problem and the paper's settings)

from mb_estimation.estimation import estimate  # noqa: E402


def peak_rss_mb() -> float:
    """The process's peak resident set size so far [MB] (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    """Print the peak RSS after the problem, the compiling solve and a second solve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seconds", nargs="?", type=float, default=100.0,
                        help="recording length [s] (default 100)")
    seconds = parser.parse_args().seconds
    problem = bench_estimator.swingup_problem(seconds)
    after_problem = peak_rss_mb()
    estimate(problem, bench_estimator.SETTINGS)
    after_first = peak_rss_mb()
    started = time.perf_counter()
    result = estimate(problem, bench_estimator.SETTINGS)
    solve_s = time.perf_counter() - started
    print(f"{seconds:g} s ({problem.recordings[0].num_steps} steps): peak RSS "
          f"{after_problem:.0f} MB after the problem, {after_first:.0f} MB after the first "
          f"(compiling) solve, {peak_rss_mb():.0f} MB after the second; solve {solve_s:.2f} s, "
          f"{result.iterations} iterations")


if __name__ == "__main__":
    main()
