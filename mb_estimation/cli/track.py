"""``mb-estimation track``: wear over logs, the node's windows fitted in parallel, drift tracked."""

from __future__ import annotations

import functools
import os
import sys

from mb_estimation.cli.common import (
    UserError,
    add_config_options,
    add_free_option,
    add_recordings_argument,
    check_bags,
    load_config,
)


def add_track(commands) -> None:
    """The track command and its options."""
    track = commands.add_parser(
        "track", help="parameter drift over logs: the node's windows, fitted in parallel",
        description="Cut the recordings into the node's windows (node.window_s every "
        "node.stride_s), fit and judge each as the online node does, in worker processes, and "
        "run the node's drift filter over the accepted ones in the order of their stamps. "
        "Writes windows.csv (each window's values, the fused values and their rates per hour), "
        "tracking.yaml (the last fused values with their rates, the drift alarm, each "
        "recording fused on its own) and report.html with drift.png (parameters and rates "
        "against time).")
    add_recordings_argument(track)
    add_config_options(track)
    add_free_option(track)
    track.add_argument("--output", required=True, metavar="DIR",
                       help="folder for windows.csv, tracking.yaml and report.html")
    track.add_argument("--window", type=float, metavar="S",
                       help="window length [s] (default: the config's node.window_s)")
    track.add_argument("--stride", type=float, metavar="S",
                       help="from one window's start to the next [s] (default: node.stride_s)")
    where = track.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, metavar="N",
                       help="worker processes (default: one per core)")
    where.add_argument("--cluster", metavar="ADDRESS",
                       help="run the windows on this Dask distributed scheduler (e.g. "
                       "tcp://10.0.0.5:8786) instead of local processes; its workers need "
                       "mb_estimation installed (the cluster extra)")
    track.add_argument("--quiet", action="store_true", help="no line per window")
    track.set_defaults(handler=track_command)


def track_command(args) -> int:
    """Read, cut, fit in parallel, track; a line per window, then the summary."""
    from mb_estimation.config.overrides import with_node_values
    from mb_estimation.io.files import writable_folder
    from mb_estimation.io.recordings import read_recording
    from mb_estimation.online.drift import alarms
    from mb_estimation.online.messages import parameter_matrix, rate_matrix
    from mb_estimation.online.windows import check_drift_names
    from mb_estimation.pseudo_inverse import std_text
    from mb_estimation.tracking import (
        bounded_map,
        cut_windows,
        lost_window,
        track_windows,
        write_tracking,
    )

    check_bags(args.bags)
    config = load_config(args)
    changes = {key: value for key, value in (("window_s", args.window),
                                             ("stride_s", args.stride)) if value is not None}
    if changes:  # the node's ring buffer, which track has none of, grows with them
        node = config.node
        changes["buffer_s"] = max(node.buffer_s, changes.get("window_s", node.window_s)
                                  + changes.get("stride_s", node.stride_s))
        config = with_node_values(config, changes, source="command line")
    check_drift_names(config)
    writable_folder(args.output)  # before hours of fitting, not after
    workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    unreadable, short = [], []  # recordings skipped: not read, shorter than a window
    spans: list[tuple[float, float, str]] = []  # each recording's [start, end] [s since epoch]

    def windows():  # one recording in memory at a time (and the windows in flight)
        for path in args.bags:
            try:
                recording = read_recording(path, config)
            except UserError as error:  # one unreadable log does not end a month's run
                unreadable.append(path)
                print(f"warning: {error} (skipped)", file=sys.stderr, flush=True)
                continue
            _warn_of_overlap(spans, recording, path)
            cut = cut_windows(recording, config.node.window_s, config.node.stride_s)
            if not cut:
                short.append(path)
                length = float(recording.time_s[-1] - recording.time_s[0])
                print(f"warning: {path} holds {length:.3g} s, less than one window of "
                      f"{config.node.window_s:g} s: nothing fitted from it (--window)",
                      file=sys.stderr, flush=True)
            yield from cut

    where = f"the cluster at {args.cluster}" if args.cluster is not None else \
        f"{workers} worker(s)"
    print(f"track: windows of {config.node.window_s:g} s every {config.node.stride_s:g} s "
          f"from {len(args.bags)} recording(s) on {where}", flush=True)

    def said(verdict):
        if not args.quiet:
            print(f"  {verdict.source} window {verdict.index}: {verdict.reason} "
                  f"({verdict.elapsed_s:.1f} s)", flush=True)

    if args.cluster is not None:
        with _cluster_client(args.cluster) as client:
            from mb_estimation.tracking.cluster import cluster_map

            threads = sum(client.nthreads().values())
            tracking = track_windows(config, windows(), progress=said,
                                     map=cluster_map(client, max(2 * threads, 2)))
    else:  # processes even for one: the same numbers whatever the count (set_up_worker)
        tracking = track_windows(config, windows(), progress=said, map=bounded_map(
            lambda: _worker_pool(workers), 2 * workers, functools.partial(lost_window, config)))
    if not tracking.windows:
        raise UserError("no recording could be read" if len(unreadable) == len(args.bags) else
                        f"no window of {config.node.window_s:g} s fits in the recordings")
    write_tracking(args.output, config, tracking)
    final = tracking.final
    contradicting = tracking.contradicting
    print(f"{len(tracking.accepted)} of {len(tracking.windows)} windows accepted"
          + (f"; {len(unreadable) + len(short)} recording(s) skipped" if unreadable or short
             else "")
          + (f"; {contradicting} contradict{'s' if contradicting == 1 else ''} the fused "
             "estimate (their reason in windows.csv: "
             "the rig changed, or the model misses something it does)" if contradicting
             else ""))
    if final is None:
        print("no window accepted: nothing tracked", file=sys.stderr)
        return 1
    labels, fused = parameter_matrix(final.estimate)
    rates = rate_matrix(final)[1]
    for k, label in enumerate(labels):
        print(f"  {label}: {fused[0, k]:.6g} ± {std_text(fused[1, k])}, rate "
              f"{rates[0, k]:+.4g} ± {std_text(rates[1, k])} per hour")
    alarmed = alarms(final, config.node.drift_alarm_s)
    waiting = [f"{label} for {final.time_s - since:.0f} s" for label, since in zip(
        final.estimate.labels, final.exceeding_since_s, strict=True)
        if label not in alarmed and since == since]  # NaN: not beyond its threshold
    print(f"drift alarm: {', '.join(alarmed) if alarmed else 'none'}" + (
        f" (beyond {config.node.drift_alarm_std:g} std, not yet for node.drift_alarm_s "
        f"{config.node.drift_alarm_s:g} s: {', '.join(waiting)})" if waiting else ""))
    print(f"wrote {args.output}/windows.csv, tracking.yaml, report.html")
    return 0


def _cluster_client(address: str):
    """A Dask distributed client of the scheduler at ``address`` (UserError without Dask)."""
    try:
        from distributed import Client
    except ImportError as error:
        raise UserError("--cluster needs Dask distributed: pip install "
                        "'mb-estimation[cluster]' (or distributed)") from error
    try:
        client = Client(address, timeout="30s")
    except ValueError as error:  # e.g. no port
        raise UserError(f"--cluster {address}: not a scheduler's address "
                        f"({' '.join(str(error).split())}): give HOST:PORT, e.g. "
                        "tcp://127.0.0.1:8786") from error
    except OSError as error:
        raise UserError(f"--cluster {address}: no Dask scheduler reached "
                        f"({' '.join(str(error).split())})") from error
    if not client.scheduler_info().get("workers"):
        print(f"track: waiting for a worker to join the scheduler at {address}", flush=True)
    return client


def _warn_of_overlap(spans: list, recording, path) -> None:
    """Warn where ``recording`` overlaps one read before (``spans``; it is added to them).

    A clock reset, or simulated bags that share a start: the drift filter would take their
    windows as of one time.
    """
    if recording.start_ns is None:
        return
    start = recording.start_ns * 1e-9 + float(recording.time_s[0])
    end = recording.start_ns * 1e-9 + float(recording.time_s[-1])
    for other_start, other_end, other in spans:
        if start < other_end and other_start < end:
            print(f"warning: {path} overlaps {other} in time: the drift filter takes their "
                  "windows as of one time (their rates then say nothing); check the recordings' "
                  "clocks", file=sys.stderr, flush=True)
            break
    spans.append((start, end, path))


def _worker_pool(workers: int):
    """Worker processes (spawned, not forked), each set up by ``set_up_worker``, started now."""
    import concurrent.futures
    import multiprocessing

    from mb_estimation.tracking.windows import set_up_worker

    pool = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=multiprocessing.get_context("spawn"), initializer=set_up_worker)
    for _ in range(workers):  # every worker started now: set up while a recording is read
        pool.submit(int)
    return pool
