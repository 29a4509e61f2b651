"""``mb-estimation track`` over an hour of a wearing rig: the rate found, no alarm without wear.

    python benchmarks/studies/bench_track.py [--recordings 6] [--duration 60] [--seeds 3]
                                             [--workers 1,2]

A rigid furuta_synthetic recorded ``--recordings`` times over one hour (``--duration`` s of
the multisine each, 1 kHz, 0.001 rad noise, evenly spread), its b1 rising 20 % over the hour
(linearly in time, within each recording too), tracked through the command line
(``track --free J_Azz,J_Byy,b1,b2``) with each worker count of ``--workers``: wall time,
peak memory of the largest worker process (or of this one with one worker), b1's rate against
the truth and the drift alarm. Then the same rig without wear for ``--seeds`` noise seeds:
the alarms raised (none expected).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import tempfile
import time
from pathlib import Path

import yaml

RISE = 0.2  # of b1 over the hour


def simulate(folder: Path, count: int, duration_s: float, seed: int, rise: float) -> list[str]:
    """``count`` recordings over an hour, b1 rising by ``rise``; the bags' paths.

    The truth is linear in time, within each recording too: ``b1 (1 + rise t / 1 h)`` from
    the first recording's start (the simulator's drift, moved every 512 samples).
    """
    from mb_estimation.api import SIMULATED_START_TIME_S, write_simulated_bag
    from mb_estimation.config import apply_overrides, load_config

    truth = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    b1 = float(truth.parameters["b1"])
    bags = []
    for k in range(count):
        hours = k / max(count - 1, 1)
        config = apply_overrides(truth, set_values={"b1": b1 * (1 + rise * hours)})
        bag = folder / f"seed{seed}_recording{k}"
        within = {"b1": (rise / (1 + rise * hours), 3600.0)} if rise else None
        write_simulated_bag(config, "multisine", bag, duration_s=duration_s + 0.5,
                            seed=100 * seed + k,
                            start_time_s=SIMULATED_START_TIME_S + 3600.0 * hours,
                            drifts=within)
        bags.append(str(bag))
    return bags


def track(bags: list[str], output: Path, workers: int) -> tuple[dict, float]:
    """The command line's track; its tracking.yaml and the wall time [s]."""
    from mb_estimation.cli import main

    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = main(["track", *bags, "--config", "furuta_synthetic", "--free",
                       "J_Azz,J_Byy,b1,b2", "--output", str(output), "--workers",
                       str(workers), "--quiet"])
    elapsed = time.perf_counter() - started
    assert status == 0, f"track exited with {status}"
    return yaml.safe_load((output / "tracking.yaml").read_text()), elapsed


def peak_mb(who: int) -> float:
    """Peak resident memory [MB] of this process or of its largest finished child."""
    return resource.getrusage(who).ru_maxrss / 1024.0


def main() -> None:
    """The wearing hour per worker count, then the steady hours."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", type=int, default=6)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--first-seed", type=int, default=1, help="of the steady rigs")
    parser.add_argument("--steady-only", action="store_true", help="skip the wearing rig")
    args = parser.parse_args()
    from mb_estimation.config import load_config
    from mb_estimation.numerics import configure_jax

    configure_jax()
    truth = RISE * float(load_config("furuta_synthetic").parameters["b1"])
    counts = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        if not args.steady_only:
            wearing(folder, args, counts, truth)
        alarmed = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            steady = simulate(folder, args.recordings, args.duration, seed, 0.0)
            summary, _ = track(steady, folder / f"steady{seed}", max(counts))
            rate = summary["parameters"]["b1"]
            alarmed.append(bool(summary["drift_alarm"]))
            print(f"steady seed {seed}: b1 rate {rate['rate_per_hour']:.3g} ± "
                  f"{rate['rate_std']:.2g} /h, alarm {summary['drift_alarm'] or 'none'}",
                  flush=True)
        print(f"without wear: {sum(alarmed)} of {len(alarmed)} seeds alarmed")


def wearing(folder: Path, args, counts: list[int], truth: float) -> None:
    """The wearing rig tracked with each worker count: a table row each."""
    bags = simulate(folder, args.recordings, args.duration, 0, RISE)
    print(f"{args.recordings} recordings of {args.duration:g} s over an hour, b1 +20 %: "
          f"true rate {truth:.3g} /h")
    print("| workers | wall [s] | peak memory [MB] | windows accepted | b1 rate [/h] | z "
          "| alarm |")
    print("|---|---|---|---|---|---|---|")
    for workers in counts:
        summary, elapsed = track(bags, folder / f"tracked{workers}", workers)
        memory = peak_mb(resource.RUSAGE_CHILDREN if workers > 1 else resource.RUSAGE_SELF)
        rate = summary["parameters"]["b1"]
        z = (rate["rate_per_hour"] - truth) / rate["rate_std"]
        alarm = ", ".join(summary["drift_alarm"]) or "none"
        print(f"| {workers} | {elapsed:.1f} | {memory:.0f} | {summary['accepted']} of "
              f"{summary['windows']} | {rate['rate_per_hour']:.3g} ± "
              f"{rate['rate_std']:.2g} | {z:+.2f} | {alarm} |", flush=True)


if __name__ == "__main__":
    main()
