"""Node start-up over rclpy: cold (empty compile cache) and cached.

    taskset -c 1 python benchmarks/perf/bench_node_startup.py [--config furuta_synthetic]

Starts ``mb-estimation node --config C`` until its ready line, first with an empty compile
cache, then again with the cache the first start filled; prints the wall time to the compiling
line (configured; the solver compiles from then on), to the ready line (compiled and
subscribed: windows are estimated as they fill) and the warm-up the node reports. Runs in a
loopback-only network namespace (``test/loopback_namespace.py``): nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))

import loopback_namespace  # noqa: E402


def start(config: str, env: dict) -> tuple[float, float, float]:
    """Seconds to the compiling line and to the ready line, and the warm-up the node reports."""
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "mb_estimation.cli", "node", "--config", config], env=env,
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    compiling = float("nan")
    try:
        for line in process.stdout:
            if "compiling the solver" in line and math.isnan(compiling):
                compiling = time.monotonic() - started
            if "ready" in line:
                elapsed = time.monotonic() - started
                warm_up = re.search(r"compiled in ([0-9.]+) s", line)
                return compiling, elapsed, float(warm_up.group(1)) if warm_up else float("nan")
        raise RuntimeError(f"the node exited with {process.wait()} before it was ready")
    finally:
        process.terminate()
        process.wait(60)


def main() -> None:
    """Cold then cached, as a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/furuta_synthetic.yaml")
    args = parser.parse_args()
    reason = loopback_namespace.enter()
    if reason is not None:
        raise SystemExit(f"no loopback-only network namespace ({reason}): not starting rclpy")

    cache = Path(tempfile.mkdtemp())
    env = dict(os.environ, MB_ESTIMATION_CACHE_DIR=str(cache), ROS_DOMAIN_ID="97")
    print("| compiling, cold [s] | ready, cold [s] | ready, cached [s] | "
          "warm-up (cold / cached) [s] |")
    print("|---|---|---|---|")
    (compiling, cold, cold_warm_up), (_, cached, cached_warm_up) = (
        start(args.config, env) for _ in range(2))
    print(f"| {compiling:.1f} | {cold:.1f} | {cached:.1f} | "
          f"{cold_warm_up:.1f} / {cached_warm_up:.1f} |", flush=True)
    shutil.rmtree(cache)


if __name__ == "__main__":
    main()
