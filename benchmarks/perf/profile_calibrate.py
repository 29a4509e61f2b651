"""Where one calibration's time goes: its stages, and each program's compiling.

Runs ``calibrate`` in this process on the 8 s rigid reference case of ``bench_vs_mujoco.py``
(or on ``--bag``; the case's bag is written into ``--work`` once and read again there), with
the compile cache it is given (``MB_ESTIMATION_CACHE_DIR``: a fresh folder for a cold start,
the same one again for a warm start), and prints:

* the seconds of each step of the way through (imports, reading, set-up, the fit, the checks,
  the results and the report);
* JAX's tracing, lowering and XLA compiling in all (``jax.monitoring``'s events);
* per program (by the function compiled): how often it was built or loaded and the seconds
  that took (tracing, lowering and compiling, or loading the stored one).

Pinned to one core, e.g.::

    MB_ESTIMATION_CACHE_DIR=$(mktemp -d) taskset -c 0 python benchmarks/perf/profile_calibrate.py
        [--case release|multisine] [--duration 8] [--bag DIR] [--work DIR]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.perf_counter()

import mb_estimation.api as api  # noqa: E402  (timed: the imports are part of the way)
import mb_estimation.report  # noqa: E402
from mb_estimation import compiled  # noqa: E402
from mb_estimation.config import apply_overrides, load_config  # noqa: E402
from mb_estimation.numerics import configure_jax, jax  # noqa: E402

IMPORTED = time.perf_counter()
REPO = Path(__file__).resolve().parents[2]
STEPS = ("read_recordings", "set_up", "fit", "assess", "write_results", "write_report")
JAX_EVENTS = {"jaxpr_trace_duration": "tracing", "jaxpr_to_mlir_module_duration": "lowering",
              "backend_compile_duration": "XLA compiling"}


def timed(table: dict, name: str, function):
    """``function`` adding its seconds to ``table[name]`` (and counting its calls)."""
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            table[name][0] += 1
            table[name][1] += time.perf_counter() - started
    return wrapper


def main() -> None:
    """Calibrate once, timing its steps and programs; print where the time went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="multisine", choices=("release", "multisine"))
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of data")
    parser.add_argument("--bag", help="calibrate this recording instead (furuta_synthetic)")
    parser.add_argument("--work", help="folder for the bag and the output (default: temporary)")
    options = parser.parse_args()
    work = Path(options.work or tempfile.mkdtemp(prefix="profile_calibrate_"))
    bag = options.bag
    if bag is None:
        sys.path.insert(0, str(REPO / "benchmarks" / "studies"))
        from reference_cases import _reference_bag
        written = work / options.case  # a bag an earlier run wrote there is read again
        bag = written if written.exists() else _reference_bag(work, options.case,
                                                              options.duration)

    events = collections.defaultdict(float)
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, duration, **_: events.__setitem__(
            event.rsplit("/", 1)[-1], events[event.rsplit("/", 1)[-1]] + duration))
    steps = collections.defaultdict(lambda: [0, 0.0])
    programs = collections.defaultdict(lambda: [0, 0.0])
    for name in STEPS:  # calibrate imports write_report from the report package as it runs
        module = mb_estimation.report if name == "write_report" else api
        setattr(module, name, timed(steps, name, getattr(module, name)))
    building = compiled.compiled_program
    compiled.compiled_program = lambda function, static, args: timed(
        programs, getattr(function, "__qualname__", repr(function)), building)(
        function, static, args)

    configure_jax()
    config = apply_overrides(load_config("furuta_synthetic"), hinges="rigid",
                             free=["J_Azz", "J_Byy", "b1", "b2"],
                             set_values={"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4})
    started = time.perf_counter()
    api.calibrate(config, [bag], work / "output", progress=lambda event: None)
    finished = time.perf_counter()

    print(f"imports {IMPORTED - STARTED:.2f} s, calibrate {finished - started:.2f} s, "
          f"in all {finished - STARTED:.2f} s")
    for name in STEPS:
        print(f"  {name:16s} {steps[name][1]:6.2f} s")
    for event, label in JAX_EVENTS.items():
        print(f"{label}: {events.get(event, 0.0):.2f} s")
    print("programs (built or loaded, seconds):")
    for name, (count, seconds) in sorted(programs.items(), key=lambda item: -item[1][1]):
        print(f"  {seconds:6.2f} s {count:3d}x  {name}")


if __name__ == "__main__":
    main()
