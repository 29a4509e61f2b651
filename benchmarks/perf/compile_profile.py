"""Where the test run's time goes: per test, JAX's tracing, lowering and compiling seconds.

A pytest plugin and its summary. JAX reports each program's tracing, lowering to StableHLO
and XLA compilation (``jax.monitoring`` events); the plugin adds them up per test (setup, call
and teardown, in that worker's process; the commands a test starts as subprocesses are not
seen) and writes one JSON line per test to ``$COMPILE_PROFILE_DIR/<worker>.jsonl``::

    COMPILE_PROFILE_DIR=/tmp/p PYTHONPATH=benchmarks/perf python -m pytest -q -p compile_profile
    python benchmarks/perf/compile_profile.py /tmp/p

The summary gives the totals, each worker's busy time (their difference is the run's tail),
the tests that took longest and the programs (by the name of the function compiled) that
took the most compile time.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

_EVENTS = {"jaxpr_trace_duration": "trace_s", "jaxpr_to_mlir_module_duration": "lower_s",
           "backend_compile_duration": "compile_s"}
_seconds: dict[str, float] = defaultdict(float)
_programs: dict[str, list[float]] = defaultdict(list)  # compile seconds per program name
_started: dict[str, float] = {}
_listening = False


def _listener(event: str, duration: float, **kwargs) -> None:
    name = _EVENTS.get(event.rsplit("/", 1)[-1])
    if name is not None:
        _seconds[name] += duration
    if name == "compile_s" and "fun_name" in kwargs:
        _programs[kwargs["fun_name"]].append(duration)


def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 (pytest's hook signature)
    """Before a test: listen to JAX's events (once per process) and start its clock."""
    global _listening
    if not _listening:
        import jax

        jax.monitoring.register_event_duration_secs_listener(_listener)
        _listening = True
    _seconds.clear()
    _programs.clear()
    _started[item.nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid, location):  # noqa: ARG001
    """After a test's teardown: append its line."""
    if nodeid not in _started:  # the controller under pytest -n: its workers write the lines
        return
    wall = time.monotonic() - _started.pop(nodeid)
    folder = Path(os.environ.get("COMPILE_PROFILE_DIR", "compile_profile"))
    folder.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(folder / f"{worker}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"test": nodeid, "wall_s": round(wall, 2),
                              **{k: round(v, 2) for k, v in _seconds.items()},
                              "programs": {k: [round(t, 2) for t in v]
                                           for k, v in _programs.items()}}) + "\n")


def summary(folder: Path, longest: int = 25) -> None:
    """Print the totals, each worker's busy time, the ``longest`` tests and programs.

    A program's compile time is summed over its compiles: each new shape or closure compiles
    it again.
    """
    rows, busy = [], {}
    for path in sorted(folder.glob("*.jsonl")):
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        busy[path.stem] = sum(row["wall_s"] for row in lines)
        rows += lines
    total = {key: sum(row.get(key, 0.0) for row in rows)
             for key in ("wall_s", "trace_s", "lower_s", "compile_s")}
    print(f"{len(rows)} tests: " + ", ".join(f"{k} {v:.0f}" for k, v in total.items()))
    print("busy per worker [s]: " + ", ".join(f"{k} {v:.0f}" for k, v in busy.items()))
    print("| wall [s] | compile [s] | trace + lower [s] | test |\n|---|---|---|---|")
    for row in sorted(rows, key=lambda row: -row["wall_s"])[:longest]:
        print(f"| {row['wall_s']:.0f} | {row.get('compile_s', 0.0):.0f} | "
              f"{row.get('trace_s', 0.0) + row.get('lower_s', 0.0):.0f} | {row['test']} |")
    programs: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        for name, seconds in row.get("programs", {}).items():
            programs[name] += seconds
    print("\n| compile [s] | compiles | program |\n|---|---|---|")
    for name, seconds in sorted(programs.items(), key=lambda item: -sum(item[1]))[:longest]:
        print(f"| {sum(seconds):.0f} | {len(seconds)} | {name} |")


if __name__ == "__main__":
    summary(Path(sys.argv[1] if len(sys.argv) > 1 else "compile_profile"))
