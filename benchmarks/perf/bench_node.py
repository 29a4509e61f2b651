"""The online node's core with the real estimator: start-up, time per window, callbacks, a soak.

Run pinned to one core, e.g.::

    taskset -c 1 python benchmarks/perf/bench_node.py timing [--scenario multisine] [--json FILE]
    taskset -c 1 python benchmarks/perf/bench_node.py soak [--minutes 60] [--json FILE]

Both modes (``startup`` is ``timing``'s cached start, run as a subprocess) feed
:class:`mb_estimation.online.core.EstimatorCore` (no transport) from
:func:`mb_estimation.ros.players.rig_sim_messages`: ``config/furuta_synthetic.yaml``
simulated as written (step 1e-4, compliance 1e-6, noise 1e-3 rad; ``--data-compliance`` changes
the data's compliance), joint states and voltages at 1 kHz, simulated ``--chunk-s`` seconds at
a time (one continuous motion: each chunk starts where the last ended). The node estimates
J_Azz, J_Byy, b1, b2 from §4.7's start (``--free J_Azz,J_Byy,b1,b2 --set J_Azz=0.01,
J_Byy=0.01,b1=1e-4,b2=1e-4 --compliance 1e-4``), node settings as configured (windows of 5 s
every 5 s, the consistent path's node step h = 1 ms, one pending window). Messages are pushed
as fast as the callbacks take them (accelerated time) and the feeder waits for the worker where
said, so no window is dropped.
``timing`` simulates its whole run at once; ``soak`` in chunks of 300 s.

``timing``: start-up (constructing the core and ``start()``, whose warm-up compiles the solver
on a synthetic window) in this process with an empty compilation cache (a fresh temporary
directory), then again in a fresh process with that cache filled; then ``--windows`` windows
fed *sequentially* (the feeder waits until each window is estimated: callbacks and estimator
never share the core) and as many *overlapped* (the feeder only waits until the worker has taken
the window, so the estimator runs beside the callbacks on the same core, as on a one-core rig
computer). Per window: time (``WindowOutcome.elapsed_s``), LM iterations, acceptance, the
estimates; the fused estimate against the simulated values; the cost of every
``on_joint_state`` (the Kalman filter included) and ``on_voltage`` call.

``soak``: ``--minutes`` of input (default an hour: 3.6 M joint states and as many voltages, 720
windows) with the feeder overlapping the worker as above. Every simulated minute: RSS
(``VmRSS`` of ``/proc/self/status``; no tracemalloc, which would slow everything six-fold),
windows done/accepted/rejected/dropped, pending windows, buffered samples and buffer bytes, the
callbacks' cost. At the end: the start stamps of the windows against k × stride (drift), the
RSS slope after the warm-up [MB/hour]. ``--cache-dir`` (default ``$MB_ESTIMATION_CACHE_DIR``,
unset: none) keeps compiled code on disk between runs.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

_STARTED = time.perf_counter()
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

from mb_estimation.config import apply_overrides, load_config  # noqa: E402
from mb_estimation.numerics import (  # noqa: E402
    CACHE_ENVIRONMENT_VARIABLE,
    configure_jax,
    jax,
)
from mb_estimation.online.core import (  # noqa: E402
    EstimatorCore,
    NodeOutputs,
    estimate_window,
)
from mb_estimation.ros.players import (  # noqa: E402
    FLOAT64,
    JOINT_STATE,
    rig_sim_messages,
)

NS = 1_000_000_000
T0 = 1_700_000_000 * NS  # stamp of the first sample
RATE_HZ = 1000.0
FREE = ("J_Azz", "J_Byy", "b1", "b2")
INITIAL = {"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4}  # §4.7 (Table 1)
FIT_COMPLIANCE = 1e-4
SOAK_CHUNK_S = 300.0  # simulated seconds per chunk of the soak's stream


def configs(data_compliance: float | None):
    """``(truth, fit)``: the simulated rig and the node's estimation config."""
    base = load_config("furuta_synthetic")
    truth = base if data_compliance is None else apply_overrides(base,
                                                                 compliance=data_compliance)
    fit = apply_overrides(base, free=list(FREE), set_values=INITIAL, compliance=FIT_COMPLIANCE)
    return truth, fit


def enable_cache(directory: str | None) -> None:
    """Keep compiled code in ``directory`` (as the command line does); None: no disk cache."""
    if directory:
        os.environ[CACHE_ENVIRONMENT_VARIABLE] = str(directory)
        configure_jax()


def rss_mb() -> float:
    """Resident set size of this process [MB] (``VmRSS``)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class InstrumentedCore(EstimatorCore):
    """The core, recording each window the worker processes in preallocated arrays.

    Fixed memory (``capacity`` windows), so that the soak's memory series measures the core.
    """

    def __init__(self, *args, capacity: int = 4096, keep_estimates: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.count = 0
        self.start_ns = np.zeros(capacity, dtype=np.int64)
        self.index = np.zeros(capacity, dtype=np.int64)
        self.taken_s = np.zeros(capacity)  # wall time the worker took the window [s]
        self.elapsed_s = np.zeros(capacity)
        self.iterations = np.full(capacity, -1, dtype=np.int64)
        self.compile_s = np.zeros(capacity)
        self.cost = np.full(capacity, np.nan)
        self.accepted = np.zeros(capacity, dtype=bool)
        self.estimates = np.full((capacity, len(FREE)), np.nan)
        self.reasons = collections.Counter()  # the reasons' first words (bounded)

    def process(self, window):
        taken = time.perf_counter()
        outcome = super().process(window)
        i = self.count
        if i < len(self.start_ns):
            self.start_ns[i], self.index[i], self.taken_s[i] = window.start_ns, window.index, \
                taken
            self.elapsed_s[i], self.accepted[i] = outcome.elapsed_s, outcome.accepted
            result = outcome.result
            if result is not None:
                self.iterations[i], self.cost[i] = result.iterations, result.cost
                self.compile_s[i] = result.compile_time_s
                self.estimates[i] = [float(np.ravel(result.parameters[n])[0]) for n in FREE]
        self.reasons[" ".join(outcome.reason.split()[:3])] += 1
        self.count += 1
        return outcome


def build_core(fit, *, capacity: int = 4096) -> tuple[InstrumentedCore, dict]:
    """Construct and start the core and wait for its warm-up; returns it and its timings [s]."""
    started = time.perf_counter()
    core = InstrumentedCore(fit, NodeOutputs(), estimator=estimate_window, capacity=capacity)
    constructed = time.perf_counter()
    core.start()  # returns at once; the worker compiles the solver first
    while core.diagnostics().get("warming_up"):
        time.sleep(0.01)
    done = time.perf_counter()
    diagnostics = core.diagnostics()
    return core, {"construct_s": constructed - started,
                  "warm_up_s": diagnostics.get("warm_up_s", 0.0),
                  "start_s": done - constructed, "startup_s": done - started,
                  "warm_up_error": diagnostics.get("warm_up_error")}


def wait(core: InstrumentedCore, *, done: int | None = None, timeout: float = 600.0) -> float:
    """Until no window is pending (and ``done`` windows are processed); returns the wait [s]."""
    started = time.perf_counter()
    while True:
        d = core.diagnostics()
        if d["pending_windows"] == 0 and (done is None or core.count >= done):
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"the worker did not finish within {timeout} s: {d}")
        time.sleep(0.001)


class Feeder:
    """Pushes a message stream into the core, timing every callback, waiting at window ends."""

    def __init__(self, core: InstrumentedCore, messages, *, samples: int, held=None) -> None:
        self.core = core
        self.messages = messages
        self.held = held  # a message taken from the stream but not fed yet
        self.joint_us = np.zeros(samples)  # reused per call of feed (fixed memory)
        self.voltage_us = np.zeros(samples)
        self.window_ns = int(round(core.settings.window_s * NS))
        self.stride_ns = int(round(core.settings.stride_s * NS))
        self.next_cut_ns = None
        self.joint_count = 0
        self.windows_cut = 0
        self.wait_s = 0.0

    def feed(self, joint_samples: int, *, sequential: bool) -> tuple[np.ndarray, np.ndarray]:
        """Feed ``joint_samples`` joint states (and their voltages); callback costs [µs]."""
        core, clock = self.core, time.perf_counter
        on_joint_state, on_voltage = core.on_joint_state, core.on_voltage
        fed = volts = 0
        joint_us, voltage_us = self.joint_us, self.voltage_us
        messages = self.messages
        while fed < joint_samples or volts < fed:
            if self.held is None:
                message = next(messages)
            else:
                message, self.held = self.held, None
            if message.kind == JOINT_STATE:
                if fed == joint_samples:  # the last one's voltage is in: keep this for later
                    self.held = message
                    break
                stamp = message.stamp_ns
                payload = message.payload
                started = clock()
                on_joint_state(stamp, payload.names, payload.positions)
                joint_us[fed] = (clock() - started) * 1e6
                fed += 1
                self.joint_count += 1
                if self.next_cut_ns is None:
                    self.next_cut_ns = stamp + self.window_ns
                elif stamp >= self.next_cut_ns:  # this sample closed a window
                    self.next_cut_ns += self.stride_ns
                    self.windows_cut += 1
                    self.wait_s += wait(core, done=self.windows_cut if sequential else None)
            elif message.kind == FLOAT64:
                started = clock()
                on_voltage(message.stamp_ns, message.payload)
                voltage_us[volts] = (clock() - started) * 1e6
                volts += 1
        return joint_us[:fed], voltage_us[:volts]


def summary(values) -> dict:
    """Median, p90, p99, max and mean of ``values``."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return {}
    return {"median": float(np.median(values)), "p90": float(np.percentile(values, 90)),
            "p99": float(np.percentile(values, 99)), "max": float(np.max(values)),
            "mean": float(np.mean(values)), "count": int(values.size)}


def machine_info() -> dict:
    """Where the numbers come from."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = None
    return {"platform": platform.platform(), "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "affinity": cores, "python": sys.version.split()[0],
            "jax": jax.__version__, "numpy": np.__version__,
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


# --- modes -----------------------------------------------------------------------------------


def run_startup(args) -> dict:
    """Start-up only (run in a fresh process by ``timing`` to time a filled cache)."""
    enable_cache(args.cache_dir)
    _, fit = configs(args.data_compliance)
    imported = time.perf_counter() - _STARTED
    core, startup = build_core(fit)
    core.stop()
    startup["import_s"] = imported
    return startup


def run_timing(args) -> dict:
    """Start-up, then sequential and overlapped windows; prints a summary."""
    cache = args.cache_dir or tempfile.mkdtemp(prefix="bench_node_cache_")
    try:
        return _run_timing(args, cache)
    finally:
        if not args.cache_dir:
            shutil.rmtree(cache, ignore_errors=True)


def _run_timing(args, cache: str) -> dict:
    cache_was_empty = not os.listdir(cache)
    enable_cache(cache)
    truth, fit = configs(args.data_compliance)
    imported = time.perf_counter() - _STARTED
    core, startup = build_core(fit)
    startup.update(import_s=imported, cache_dir=cache, cache_was_empty=cache_was_empty)
    print(f"start-up ({'empty' if cache_was_empty else 'filled'} compilation cache {cache}): "
          f"construct {startup['construct_s']:.3f} s, start() {startup['start_s']:.2f} s "
          f"(warm-up {startup['warm_up_s']:.2f} s); imports before it {imported:.1f} s")
    if startup["warm_up_error"]:
        print(f"  warm-up error: {startup['warm_up_error']}")

    window_samples = int(round(core.settings.stride_s * RATE_HZ))
    if args.chunk_s is None:  # one simulation for the whole run
        args.chunk_s = 2 * args.windows * core.settings.stride_s + core.settings.window_s
    started = time.perf_counter()
    messages = rig_sim_messages(truth, args.scenario, duration_s=None, rate_hz=RATE_HZ,
                                start_ns=T0, chunk_s=args.chunk_s)
    first = next(messages)  # simulates (and compiles) the first chunk
    simulation_s = time.perf_counter() - started
    total = 2 * args.windows * window_samples + 1
    feeder = Feeder(core, messages, samples=total, held=first)
    phases = {}
    try:
        for phase in ("sequential", "overlapped"):
            before = core.count
            # the first call also feeds the sample that closes the first window
            samples = args.windows * window_samples + (1 if phase == "sequential" else 0)
            wall = time.perf_counter()
            joint_us, voltage_us = feeder.feed(samples, sequential=phase == "sequential")
            joint_us, voltage_us = joint_us.copy(), voltage_us.copy()
            wait(core, done=feeder.windows_cut)
            wall = time.perf_counter() - wall
            windows = slice(before, core.count)
            phases[phase] = {
                "windows": core.count - before, "wall_s": wall,
                "window_s": summary(core.elapsed_s[windows]),
                "iterations": summary(core.iterations[windows]),
                "accepted": int(np.sum(core.accepted[windows])),
                "compile_s_max": float(np.max(core.compile_s[windows])),
                "joint_state_us": summary(joint_us), "voltage_us": summary(voltage_us),
                "real_time_factor": samples / RATE_HZ / wall,
            }
    finally:
        core.stop()
    d = core.diagnostics()
    fused = core.fused
    fused_table = {}
    if fused is not None:
        std = np.sqrt(np.diag(fused.covariance))
        for i, name in enumerate(FREE):
            value = float(np.ravel(fused.values[name])[0])
            true = float(np.ravel(truth.parameters[name])[0])
            fused_table[name] = {"fused": value, "std": float(std[i]), "simulated": true,
                                 "initial": INITIAL[name],
                                 "relative_error": (value - true) / true}
    n = core.count
    windows = [{"index": int(core.index[i]), "start_s": (int(core.start_ns[i]) - T0) / NS,
                "elapsed_s": float(core.elapsed_s[i]), "iterations": int(core.iterations[i]),
                "cost": float(core.cost[i]), "accepted": bool(core.accepted[i]),
                "compile_s": float(core.compile_s[i]),
                **{name: float(core.estimates[i, j]) for j, name in enumerate(FREE)}}
               for i in range(n)]

    print(f"scenario {args.scenario}, data compliance "
          f"{args.data_compliance or 'as configured (1e-6)'}, chunks of {args.chunk_s:g} s; "
          f"first chunk simulated in {simulation_s:.1f} s")
    print(f"{'window':>6} {'start [s]':>9} {'time [s]':>9} {'its':>4} {'cost':>10} "
          f"{'ok':>3} " + " ".join(f"{name:>10}" for name in FREE))
    for w in windows:
        print(f"{w['index']:6d} {w['start_s']:9.1f} {w['elapsed_s']:9.3f} {w['iterations']:4d} "
              f"{w['cost']:10.3g} {'y' if w['accepted'] else 'n':>3} "
              + " ".join(f"{w[name]:10.4g}" for name in FREE))
    for phase, numbers in phases.items():
        t, j, v = numbers["window_s"], numbers["joint_state_us"], numbers["voltage_us"]
        print(f"{phase}: {numbers['windows']} windows, accepted {numbers['accepted']}, time per "
              f"window median {t['median']:.3f} s, p90 {t['p90']:.3f} s, max {t['max']:.3f} s; "
              f"LM iterations median {numbers['iterations']['median']:.0f}, max "
              f"{numbers['iterations']['max']:.0f}; {numbers['real_time_factor']:.1f}x real "
              "time")
        print(f"  on_joint_state [µs]: median {j['median']:.1f}, p99 {j['p99']:.1f}, max "
              f"{j['max']:.0f}; on_voltage [µs]: median {v['median']:.1f}, p99 {v['p99']:.1f}, "
              f"max {v['max']:.0f}")
    print(f"{'fused':>8} {'value':>11} {'std':>10} {'simulated':>10} {'initial':>9} "
          f"{'rel. error':>10}")
    for name, row in fused_table.items():
        print(f"{name:>8} {row['fused']:11.5g} {row['std']:10.3g} {row['simulated']:10.4g} "
              f"{row['initial']:9.3g} {row['relative_error']:+10.1%}")
    print(f"diagnostics: done {d['windows_done']}, accepted {d['windows_accepted']}, rejected "
          f"{d['windows_rejected']}, dropped {d['windows_dropped']}, fused windows "
          f"{d['fused_windows']}, max callback {d['max_callback_s'] * 1e3:.2f} ms; reasons "
          f"{dict(core.reasons)}")

    # start-up again in a fresh process, now with the cache filled
    command = [sys.executable, os.path.abspath(__file__), "startup", "--cache-dir", cache]
    if args.data_compliance is not None:
        command += ["--data-compliance", str(args.data_compliance)]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(command + ["--json", out.name], check=True, stdout=subprocess.DEVNULL)
        warm_startup = json.load(open(out.name))
    print(f"start-up in a fresh process with the filled cache: construct "
          f"{warm_startup['construct_s']:.3f} s, start() {warm_startup['start_s']:.2f} s "
          f"(imports before it {warm_startup['import_s']:.1f} s)")
    return {"mode": "timing", "scenario": args.scenario, "chunk_s": args.chunk_s,
            "data_compliance": args.data_compliance, "startup_empty_cache": startup,
            "startup_filled_cache": warm_startup, "simulation_first_chunk_s": simulation_s,
            "phases": phases, "fused": fused_table, "windows": windows,
            "diagnostics": {k: v for k, v in d.items() if isinstance(v, (int, float, str))},
            "reasons": dict(core.reasons), "machine": machine_info()}


def run_soak(args) -> dict:
    """``--minutes`` of 1 kHz input, overlapped with the worker; a row per simulated minute."""
    enable_cache(args.cache_dir)
    truth, fit = configs(args.data_compliance)
    per_minute = int(round(60 * RATE_HZ))
    stride_s = fit.node.stride_s
    windows_expected = int(round(args.minutes * 60 / stride_s))
    core, startup = build_core(fit, capacity=windows_expected + 16)
    print(f"start-up {startup['startup_s']:.1f} s (warm-up {startup['warm_up_s']:.1f} s; "
          f"cache {args.cache_dir or 'none'})")
    messages = rig_sim_messages(truth, args.scenario, duration_s=None, rate_hz=RATE_HZ,
                                start_ns=T0, chunk_s=args.chunk_s)
    feeder = Feeder(core, messages, samples=per_minute + 1)
    rows = []
    print(f"{'min':>4} {'wall [s]':>9} {'RSS [MB]':>9} {'done':>5} {'acc':>5} {'drop':>4} "
          f"{'pend':>4} {'buffered':>8} {'buf [MB]':>8} {'win med [s]':>10} {'win max [s]':>11} "
          f"{'js p50 [µs]':>11} {'js p99':>7} {'js max':>7}")
    started = time.perf_counter()
    try:
        for minute in range(1, args.minutes + 1):
            before = core.count
            samples = per_minute + (1 if minute == 1 else 0)
            joint_us, _ = feeder.feed(samples, sequential=False)
            d = core.diagnostics()
            done = slice(before, core.count)
            elapsed = core.elapsed_s[done]
            row = {"minute": minute, "wall_s": time.perf_counter() - started, "rss_mb": rss_mb(),
                   "windows_done": d["windows_done"], "accepted": d["windows_accepted"],
                   "rejected": d["windows_rejected"], "dropped": d["windows_dropped"],
                   "pending": d["pending_windows"], "buffered_samples": d["buffered_samples"],
                   "buffer_bytes": d["buffer_bytes"],
                   "window_median_s": float(np.median(elapsed)) if elapsed.size else None,
                   "window_max_s": float(np.max(elapsed)) if elapsed.size else None,
                   "joint_state_p50_us": float(np.median(joint_us)),
                   "joint_state_p99_us": float(np.percentile(joint_us, 99)),
                   "joint_state_max_us": float(np.max(joint_us))}
            rows.append(row)
            print(f"{minute:4d} {row['wall_s']:9.1f} {row['rss_mb']:9.1f} {row['windows_done']:5d} "
                  f"{row['accepted']:5d} {row['dropped']:4d} {row['pending']:4d} "
                  f"{row['buffered_samples']:8d} {row['buffer_bytes'] / 1e6:8.2f} "
                  f"{row['window_median_s'] or 0:10.3f} {row['window_max_s'] or 0:11.3f} "
                  f"{row['joint_state_p50_us']:11.1f} {row['joint_state_p99_us']:7.1f} "
                  f"{row['joint_state_max_us']:7.0f}", flush=True)
        wait(core, done=feeder.windows_cut)
    finally:
        core.stop()
    wall = time.perf_counter() - started
    d = core.diagnostics()
    n = core.count
    stride_ns = int(round(stride_s * NS))
    offsets = core.start_ns[:n] - core.start_ns[0]
    drift_ns = offsets - np.arange(n, dtype=np.int64) * stride_ns
    minutes = np.array([r["minute"] for r in rows], dtype=float)
    rss = np.array([r["rss_mb"] for r in rows])
    after = minutes > max(args.warm_minutes, 0)
    slope = float(np.polyfit(minutes[after], rss[after], 1)[0] * 60) if after.sum() >= 2 \
        else float("nan")
    result = {
        "mode": "soak", "scenario": args.scenario, "chunk_s": args.chunk_s,
        "minutes": args.minutes, "joint_samples": feeder.joint_count, "wall_s": wall,
        "wait_for_worker_s": feeder.wait_s, "startup": startup,
        "windows_expected": windows_expected, "windows_processed": n,
        "windows_done": d["windows_done"], "windows_accepted": d["windows_accepted"],
        "windows_rejected": d["windows_rejected"], "windows_dropped": d["windows_dropped"],
        "start_stamps_first_ns": int(core.start_ns[0]) if n else None,
        "start_stamps_max_abs_drift_ns": int(np.max(np.abs(drift_ns))) if n else None,
        "start_stamps_consecutive": bool(np.all(core.index[:n] == np.arange(1, n + 1))),
        "window_s": summary(core.elapsed_s[:n]), "iterations": summary(core.iterations[:n]),
        "compile_s_max_after_first": float(np.max(core.compile_s[1:n])) if n > 1 else None,
        "rss_slope_mb_per_hour": slope, "rss_first_mb": float(rss[0]),
        "rss_after_warm_up_mb": float(rss[after][0]) if after.any() else None,
        "rss_last_mb": float(rss[-1]), "rss_max_mb": float(np.max(rss)),
        "buffer_bytes": sorted({r["buffer_bytes"] for r in rows}),
        "reasons": dict(core.reasons),
        "estimates_accepted_median": {
            name: float(np.nanmedian(core.estimates[:n][core.accepted[:n], j]))
            for j, name in enumerate(FREE)} if np.any(core.accepted[:n]) else {},
        "fused": {name: float(np.ravel(core.fused.values[name])[0]) for name in FREE}
        if core.fused is not None else {},
        "diagnostics": {k: v for k, v in d.items() if isinstance(v, (int, float, str))},
        "per_minute": rows, "machine": machine_info()}
    print(f"{args.minutes} simulated minutes ({feeder.joint_count} joint states) in {wall:.0f} s "
          f"wall ({args.minutes * 60 / wall:.1f}x real time; {feeder.wait_s:.0f} s waiting for "
          "the worker)")
    print(f"windows: {n} processed of {windows_expected}, accepted {d['windows_accepted']}, "
          f"rejected {d['windows_rejected']}, dropped {d['windows_dropped']}; reasons "
          f"{dict(core.reasons)}")
    print(f"window start stamps: max |start_k - start_0 - k × {stride_s:g} s| = "
          f"{result['start_stamps_max_abs_drift_ns']} ns over {n} windows")
    print(f"time per window: median {result['window_s']['median']:.3f} s, p90 "
          f"{result['window_s']['p90']:.3f} s, max {result['window_s']['max']:.3f} s")
    print(f"LM iterations per window: median {result['iterations']['median']:.0f}, max "
          f"{result['iterations']['max']:.0f}")
    print(f"RSS: {rss[0]:.1f} MB after minute 1, {result['rss_after_warm_up_mb']} MB after "
          f"minute {args.warm_minutes + 1}, {rss[-1]:.1f} MB at the end (max {np.max(rss):.1f}); "
          f"slope after minute {args.warm_minutes}: {slope:+.2f} MB/hour")
    return result


def main() -> None:
    """Parse the mode and its options, run it, print and save the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("timing", "soak", "startup"),
                        help="timing, soak, or startup (start-up only, used by timing)")
    parser.add_argument("--scenario", default="multisine",
                        help="simulated scenario: multisine (default) or swingup, ...")
    parser.add_argument("--chunk-s", type=float, default=None,
                        help="length of one simulation of the stream [s]; default: timing the "
                             "whole run (one simulation), soak 300")
    parser.add_argument("--data-compliance", type=float, default=None,
                        help="compliance of the simulated data (default: the config's 1e-6)")
    parser.add_argument("--windows", type=int, default=12,
                        help="timing: windows per phase (default 12)")
    parser.add_argument("--minutes", type=int, default=60,
                        help="soak: simulated minutes of input (default 60)")
    parser.add_argument("--warm-minutes", type=int, default=5,
                        help="soak: minutes left out of the RSS slope (default 5)")
    parser.add_argument("--cache-dir", default=None,
                        help="compilation cache; timing: default a fresh temporary directory; "
                             "soak: default $MB_ESTIMATION_CACHE_DIR, unset: none")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    if args.mode == "soak" and args.cache_dir is None:
        args.cache_dir = os.environ.get("MB_ESTIMATION_CACHE_DIR") or None
    if args.chunk_s is None:
        args.chunk_s = SOAK_CHUNK_S if args.mode == "soak" else None
    runner = {"timing": run_timing, "soak": run_soak, "startup": run_startup}[args.mode]
    result = runner(args)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
