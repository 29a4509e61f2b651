"""What a recording of a new length costs: compilation and solve per length, in one process.

Run pinned to one core::

    taskset -c 0 python benchmarks/bench_lengths.py [--seconds 10,10.5,9,11]

A 12 s swing-up of ``config/furuta_synthetic.yaml`` (every compliance 1e-4) simulated at step
1e-3 and sampled at 1 kHz with 1e-3 rad noise, cut to each length and fitted on the h = 0.01
grid (J_Azz, J_Byy, b1, b2 free, 5 iterations at most), one length after the other in one
process: the first compiles everything, a later one only what its length bucket
(:func:`mb_estimation.estimation.recording_blocks.bucket_length`) has not compiled yet.
"""

from __future__ import annotations

import argparse

from mb_estimation.config import apply_overrides, load_config
from mb_estimation.estimation import EstimationProblem, SolverSettings, estimate
from mb_estimation.estimation.recording_blocks import bucket_length
from mb_estimation.rigs import get_rig
from mb_estimation.signals import Recording, prepare_recording
from mb_estimation.simulation import simulate_recording

FREE = ("J_Azz", "J_Byy", "b1", "b2")


def main() -> None:
    """Fit each length in turn and print its compilation and solve time."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", default="10,10.5,9,11", help="recording lengths [s]")
    args = parser.parse_args()
    truth = apply_overrides(load_config("furuta_synthetic"), compliance=1e-4)
    rig = get_rig("furuta")
    run = simulate_recording(rig, truth.parameters, "swingup", duration_s=12.0, dt=1e-3,
                             rate_hz=1000.0, noise_rad=1e-3)
    start = apply_overrides(truth, free=list(FREE), set_values={"J_Azz": 0.004, "b1": 8e-4})
    print("| recording [s] | grid steps | bucket | compile [s] | solve [s] |")
    print("|---|---|---|---|---|")
    for seconds in (float(text) for text in args.seconds.split(",")):
        count = int(round(seconds * 1000)) + 1
        recording = Recording("swing-up", run.time_s[:count], run.measured_angles[:count],
                              run.time_s[:count], run.inputs[:count])
        grid = prepare_recording(recording, 0.01, 10.0)
        problem = EstimationProblem(rig, start.parameters, FREE,
                                    {name: start.free[name].lower for name in FREE},
                                    {name: start.free[name].upper for name in FREE}, (grid,))
        result = estimate(problem, SolverSettings(max_iterations=5))
        print(f"| {seconds:g} | {grid.num_steps} | {bucket_length(grid.num_steps)} | "
              f"{result.compile_time_s:.2f} | {result.solve_time_s:.2f} |", flush=True)


if __name__ == "__main__":
    main()
