"""``track``'s windows on a Dask and a Ray local cluster, side by side: the engine chosen by this.

    RAY_USAGE_STATS_ENABLED=0 unshare -rn sh -c 'ip link set lo up && exec python \
        benchmarks/perf/bench_cluster.py BAG [BAG ...] [--engines dask,ray,local] [--rounds 2]'

Needs ``distributed`` (the ``cluster`` extra) and, for Ray, ``ray`` (benchmark only, not a
dependency). Run it in a loopback-only network namespace as above: both engines listen on
127.0.0.1 only here, and Ray's usage report is switched off, but the namespace makes sure
nothing leaves the machine. The recordings are read and cut in this process, as ``track``
does; each engine then runs every window with two single-threaded worker processes, XLA on
one thread each (``tracking.set_up_worker``), the compile cache shared, ``--rounds`` times on
the same cluster (the first round includes each worker's start: imports and programs). Per
engine: the cluster's start, each round's wall time, and whether the verdicts equal the local
pool's to the last bit.
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import numpy as np

from mb_estimation.api import read_recordings
from mb_estimation.config import apply_overrides, load_config
from mb_estimation.numerics import configure_jax
from mb_estimation.tracking import bounded_map, cut_windows, lost_window, track_windows

FREE = ["J_Azz", "J_Byy", "b1", "b2"]
WORKERS = 2


def numbers(tracking) -> list:
    """Each window's verdict and values, for comparing runs exactly."""
    return [(w.source, w.index, w.accepted, None if w.estimate is None else tuple(
        float(v[0]) for v in w.estimate.values.values())) for w in tracking.windows]


def on_local_pool(config, windows):
    """``track``'s own local pool (worker processes started once per round)."""
    import concurrent.futures
    import multiprocessing

    from mb_estimation.tracking.windows import set_up_worker

    def pool():
        return concurrent.futures.ProcessPoolExecutor(
            WORKERS, mp_context=multiprocessing.get_context("spawn"),
            initializer=set_up_worker)

    return lambda: track_windows(config, windows, map=bounded_map(
        pool, 2 * WORKERS, functools.partial(lost_window, config)))


def on_dask(config, windows):
    """A Dask LocalCluster on 127.0.0.1: the map ``track --cluster`` uses."""
    import distributed

    from mb_estimation.tracking.cluster import cluster_map

    cluster = distributed.LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster)
    return lambda: track_windows(config, windows, map=cluster_map(client, 2 * WORKERS))


def _ray_judge(judge, window):
    """``track_windows``' judge of one window in a Ray worker, set up before its first."""
    from mb_estimation.tracking.windows import set_up_worker

    if not os.environ.get("MB_ESTIMATION_WORKER_SET_UP"):
        set_up_worker()
        os.environ["MB_ESTIMATION_WORKER_SET_UP"] = "1"
    return judge(window)


def on_ray(config, windows):
    """Ray on this machine (127.0.0.1, no dashboard): tasks, at most 2 per worker in flight."""
    import ray

    from mb_estimation.tracking.windows import WORKER_XLA_FLAGS

    ray.init(num_cpus=WORKERS, include_dashboard=False, _node_ip_address="127.0.0.1",
             object_store_memory=500 * 2**20, log_to_driver=False,
             runtime_env={"env_vars": {"XLA_FLAGS": WORKER_XLA_FLAGS}})
    task = ray.remote(num_cpus=1, max_retries=3)(_ray_judge)

    def ray_map(judge, items):
        judge = ray.put(judge)  # the config once, not with every window
        pending = []
        for item in items:
            pending.append(task.remote(judge, item))
            if len(pending) >= 2 * WORKERS:
                done, pending = ray.wait(pending, num_returns=1)
                yield from ray.get(done)
        yield from ray.get(pending)

    return lambda: track_windows(config, windows, map=ray_map)


def main() -> None:
    """Read and cut once, then each engine: start, rounds, equality with the local pool."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bags", nargs="+")
    parser.add_argument("--engines", default="local,dask,ray")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    configure_jax()
    config = apply_overrides(load_config("furuta_synthetic"), free=FREE)
    windows = [w for r in read_recordings(config, args.bags)
               for w in cut_windows(r, config.node.window_s, config.node.stride_s)]
    print(f"{len(windows)} windows of {config.node.window_s:g} s from {len(args.bags)} "
          f"recordings; {WORKERS} workers each", flush=True)
    reference = None
    for engine in args.engines.split(","):
        started = time.perf_counter()
        run = {"local": on_local_pool, "dask": on_dask, "ray": on_ray}[engine](config, windows)
        start_s = time.perf_counter() - started
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            tracking = run()
            times.append(time.perf_counter() - started)
        found = numbers(tracking)
        reference = reference or found
        same = found == reference
        rate = tracking.final.rates[FREE.index("b1")]
        print(f"{engine}: cluster start {start_s:.1f} s; rounds "
              + ", ".join(f"{t:.1f}" for t in times) + f" s; b1 rate {rate:.4g} /h; "
              f"verdicts {'equal to' if same else 'DIFFERENT from'} the first engine's",
              flush=True)
        assert np.isfinite(rate)


if __name__ == "__main__":
    main()
