"""The rclpy node under a broken driver: memory, what it publishes, how it stops.

    python benchmarks/perf/bench_hostile_node.py [--seconds 60] [--seeds 0,1,2] [--signal INT]

For each seed: starts ``mb-estimation node --config config/furuta_synthetic.yaml
--free J_Azz,J_Byy``, waits until it is ready, then publishes the
hostile stream of ``test/hostile_driver.py`` (1 kHz joint states, about half malformed; a
voltage every tenth, mostly bad) for ``--seconds``, sampling the node's resident memory every
0.5 s; then sends the signal and times the exit. Prints one row per seed: the largest resident
memory, joint states sent, non-finite numbers published, the node's counters of each fault,
exit status and seconds to exit, and whether its output holds a traceback. A node whose memory
passes ``--kill-above-gb`` (default 4) is killed and reported so. Runs in a loopback-only
network namespace (``test/loopback_namespace.py``): nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test"))

import loopback_namespace  # noqa: E402

NAMESPACE_ERROR = loopback_namespace.enter()  # before any thread starts


def run(seed: int, seconds: float, stop_signal: int, kill_above: float, domain: int,
        cache_dir: str) -> dict:
    """One node under the hostile stream for ``seconds``; what was measured."""
    from hostile_driver import COUNTERS, Session, node_environment, resident_bytes
    from processes import Process, mb_estimation

    node = Process(mb_estimation("node", "--config", "config/furuta_synthetic.yaml",
                                 "--free", "J_Azz,J_Byy"),
                   node_environment(domain, cache_dir))
    session = None
    peak, killed = 0, None
    try:
        node.wait_for("mb_estimation node ready", 300)
        session = Session(domain, seed)
        session.driver.start()
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            peak = max(peak, resident_bytes(node.process.pid))
            if peak > kill_above:
                killed = time.monotonic() - started
                node.process.kill()
                break
            time.sleep(0.5)
        session.driver.stop()
        time.sleep(1.5)  # the last diagnostics
        signalled = time.monotonic()
        node.process.send_signal(stop_signal)
        try:
            status = node.process.wait(30)
        except Exception:
            node.process.kill()
            status = f"killed after 30 s ({node.process.wait()})"
        exit_s = time.monotonic() - signalled
    finally:
        if session is not None:
            session.close()
        node.stop()
    diagnostics = session.watch.diagnostics
    return {"seed": seed, "peak_gb": peak / 1e9, "killed_at_s": killed,
            "sent": session.driver.sent, "non_finite": len(session.watch.non_finite),
            "counted": {name: diagnostics.get(counter, "0") for name, counter in COUNTERS.items()},
            "windows": f"{diagnostics.get('windows_accepted', '0')} accepted / "
                       f"{diagnostics.get('windows_rejected', '0')} rejected",
            "status": status, "exit_s": exit_s,
            "traceback": any("Traceback" in line for line in node.lines)}


def main() -> None:
    """Each seed in turn; a Markdown table and the counters."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--signal", choices=("INT", "TERM"), default="INT")
    parser.add_argument("--kill-above-gb", type=float, default=4.0)
    parser.add_argument("--domain", type=int, default=71)
    args = parser.parse_args()
    if NAMESPACE_ERROR is not None:
        sys.exit(f"no loopback-only network namespace: {NAMESPACE_ERROR}")
    stop_signal = getattr(signal, f"SIG{args.signal}")
    with tempfile.TemporaryDirectory() as cache_dir:
        rows = [run(int(seed), args.seconds, stop_signal, args.kill_above_gb * 1e9,
                    args.domain, cache_dir) for seed in args.seeds.split(",")]
    print(f"| seed | peak RSS [GB] | joint states sent | non-finite published | windows | "
          f"SIG{args.signal}: exit, time [s] | traceback |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        peak = f"{row['peak_gb']:.2f}" + (f" (killed at {row['killed_at_s']:.0f} s)"
                                           if row["killed_at_s"] is not None else "")
        print(f"| {row['seed']} | {peak} | {row['sent']} | {row['non_finite']} | "
              f"{row['windows']} | {row['status']}, {row['exit_s']:.1f} | {row['traceback']} |")
    print()
    for row in rows:
        print(f"seed {row['seed']} counted: " + ", ".join(f"{name} {value}" for name, value
                                                          in row["counted"].items()))


if __name__ == "__main__":
    main()
