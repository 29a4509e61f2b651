"""How much this machine's cores slow each other: plain arithmetic alone, then on every core.

    python benchmarks/perf/bench_cores.py [--rounds 3]

A Python loop of integer arithmetic (no memory traffic beyond a few registers' worth) timed on
core 0 alone, then on cores 0 and 1 at once, ``--rounds`` times. On two independent cores
the side-by-side times equal the lone one; on a machine whose cores share a physical core
or are throttled by the host, they do not. ``track``'s speed-up on two cores is bounded by
this and by what its programs share (cache, memory bandwidth).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

LOOP = 20_000_000


def work() -> float:
    """Seconds for :data:`LOOP` steps of a linear congruential generator."""
    started, x = time.perf_counter(), 0
    for _ in range(LOOP):
        x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    return time.perf_counter() - started


def on_cores(cores: list[int]) -> list[float]:
    """:func:`work` in one process per core, all at once; each one's seconds."""
    command = [sys.executable, __file__, "--one"]
    processes = [subprocess.Popen(["taskset", "-c", str(core), *command],
                                  stdout=subprocess.PIPE, text=True) for core in cores]
    return [float(process.communicate()[0]) for process in processes]


def main() -> None:
    """Alone, then side by side, --rounds times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(work())
        return
    cores = sorted(os.sched_getaffinity(0))
    for round_ in range(args.rounds):
        alone = on_cores(cores[:1])[0]
        together = on_cores(cores)
        print(f"round {round_ + 1}: alone {alone:.2f} s; on {len(cores)} cores at once "
              + ", ".join(f"{t:.2f}" for t in together) + " s "
              f"(slowest {max(together) / alone:.2f}× the lone one)", flush=True)


if __name__ == "__main__":
    main()
