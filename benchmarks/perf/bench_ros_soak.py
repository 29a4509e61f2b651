"""The rclpy node on real ROS 2 for an hour at 1 kHz: memory, dropped windows, time per window.

Everything runs in a private network namespace holding only the loopback interface (entered
first thing; see test/loopback_namespace.py), with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``:
nothing leaves the machine. Two processes, as on a rig:

* ``mb-estimation rig-sim``: ``config/furuta_synthetic.yaml`` as written (step
  1e-4, compliance 1e-6, noise 1e-3 rad), the multisine scenario (restarted every period, the
  stamps running on), joint states and a std_msgs/Float64 voltage at 1 kHz in real time;
* ``mb-estimation node`` (``estimator_node``): J_Azz, J_Byy, b1, b2 from §4.7's
  start, windows of 5 s every 5 s on the consistent path at its 1 ms step (the config's node
  settings).

This process listens to ``/diagnostics`` over rclpy and, every ``--sample-s``, records the
node's RSS (``VmRSS``), its CPU time and the counters (windows done / accepted / rejected /
dropped, samples received, late voltages, the last window's solve time). At the end: the RSS
slope after ``--settle-minutes``, windows dropped, the distribution of the time per window.

    python benchmarks/perf/bench_ros_soak.py [--minutes 60] [--json FILE]

``--cache-dir`` (default: a fresh temporary folder, so the start-up is cold) is the node's
compile cache.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))

import loopback_namespace  # noqa: E402
from processes import Process, mb_estimation  # noqa: E402

FIT = ["--free", "J_Azz,J_Byy,b1,b2", "--set", "J_Azz=0.01,J_Byy=0.01,b1=1e-4,b2=1e-4"]
COUNTERS = ("windows_done", "windows_accepted", "windows_rejected", "windows_dropped",
            "joint_samples", "voltage_samples", "voltage_late", "message_errors", "time_jumps")


def _proc_status(pid: int) -> dict[str, float]:
    """RSS [MB] and CPU time [s] (user + system) of ``pid``."""
    rss_kb = 0
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {"rss_mb": rss_kb / 1024.0, "cpu_s": (int(fields[11]) + int(fields[12])) / ticks}


def run(args) -> dict:
    """Start the node and rig-sim, sample every ``args.sample_s``, summarise."""
    loopback_namespace.enter()
    import rclpy
    from ros_listener import Listener

    env = dict(os.environ, ROS_DOMAIN_ID=str(args.domain), MB_ESTIMATION_CACHE_DIR=args.cache_dir,
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=args.domain)
    listener = Listener(context)
    started = time.monotonic()
    node = Process(mb_estimation("node", "--config", "furuta_synthetic", *FIT), env)
    rig = None
    samples, window_times = [], []
    try:
        node.wait_for("mb_estimation node ready", 900)
        startup_s = time.monotonic() - started
        rig = Process(mb_estimation("rig-sim", "--config", "furuta_synthetic", "--scenario",
                                    "multisine", "--rate", "1000"), env)
        begun = time.monotonic()
        last_done = 0
        while time.monotonic() - begun < args.minutes * 60.0:
            time.sleep(0.5)
            done = listener.count("windows_done")
            if done > last_done:
                seconds = listener.value("last_window_s")
                if seconds:
                    window_times.append(float(seconds))
                last_done = done
            elapsed = time.monotonic() - begun
            if not samples or elapsed - samples[-1]["elapsed_s"] >= args.sample_s:
                if node.process.poll() is not None or rig.process.poll() is not None:
                    raise RuntimeError(f"a process ended:\n{node.tail()}\n{rig.tail()}")
                sample = {"elapsed_s": elapsed, **_proc_status(node.process.pid),
                          **{key: listener.count(key) for key in COUNTERS}}
                samples.append(sample)
                print(json.dumps(sample), flush=True)
    finally:
        if rig is not None:
            rig.stop()
        node.stop()
        listener.close()
        rclpy.try_shutdown(context=context)

    settled = [s for s in samples if s["elapsed_s"] >= args.settle_minutes * 60.0]
    slope = None
    if len(settled) >= 2:
        import numpy as np

        hours = np.array([s["elapsed_s"] for s in settled]) / 3600.0
        slope = float(np.polyfit(hours, [s["rss_mb"] for s in settled], 1)[0])
    last = samples[-1]
    expected_windows = int(args.minutes * 60.0 // 5.0)
    times = sorted(window_times)

    def quantile(q):
        return times[min(len(times) - 1, int(q * len(times)))] if times else None

    return {
        "minutes": args.minutes, "startup_s": startup_s,
        "samples": samples,
        "rss_first_mb": samples[0]["rss_mb"], "rss_last_mb": last["rss_mb"],
        "rss_slope_mb_per_hour_after_settle": slope, "settle_minutes": args.settle_minutes,
        "node_cpu_fraction": (last["cpu_s"] - samples[0]["cpu_s"])
        / max(last["elapsed_s"] - samples[0]["elapsed_s"], 1e-9),
        "windows_expected": expected_windows,
        **{key: last[key] for key in COUNTERS},
        "window_s_observed": len(times), "window_s_median": quantile(0.5),
        "window_s_p90": quantile(0.9), "window_s_max": times[-1] if times else None,
    }


def main() -> None:
    """Parse the arguments, run, print the summary (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--sample-s", type=float, default=60.0,
                        help="seconds between memory/counter samples (default 60)")
    parser.add_argument("--settle-minutes", type=float, default=5.0,
                        help="minutes left out of the RSS slope (default 5)")
    parser.add_argument("--domain", type=int, default=61, help="ROS domain id (default 61)")
    parser.add_argument("--cache-dir", default=None,
                        help="the node's compile cache (default: a fresh temporary folder)")
    parser.add_argument("--json", default=None, help="write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        args.cache_dir = args.cache_dir or scratch
        result = run(args)
    summary = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
