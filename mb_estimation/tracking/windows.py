"""Recordings cut into the node's windows, each fitted, the drift filter over them.

``mb-estimation track`` runs what the online node runs, offline and in parallel: each recording
is cut into windows of ``node.window_s`` every ``node.stride_s`` (:func:`cut_windows`, the
node's cut: a tenth of the window on each side, the input held at its start), each window is
judged and fitted by the node's rules (:func:`judge_window`: motion, jumps, convergence, cost,
excitation), and the accepted windows' estimates go through the drift filter
(:func:`mb_estimation.online.drift.track`) in the order of their stamps
(:func:`track_windows`). The windows are independent, so ``judge_window`` may run anywhere:
the caller passes the ``map`` that runs them (local worker processes, a cluster). No files,
no processes of its own.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from mb_estimation.config import Config
from mb_estimation.online.drift import DriftingEstimate
from mb_estimation.online.fusion import ParameterEstimate, fuse
from mb_estimation.online.intake import WINDOW_MARGIN_FRACTION
from mb_estimation.online.windows import (
    COVERAGE_TOLERANCE_S,
    counted_once,
    disagreeing,
    judged,
    new_data_s,
    result_estimate,
    with_window,
)
from mb_estimation.signals import Recording
from mb_estimation.stamps import NS_PER_S

__all__ = ["WORKER_DEATHS_ALLOWED", "WORKER_XLA_FLAGS", "TrackedWindow", "Tracking",
           "WindowToFit", "bounded_map", "cut_windows", "judge_window", "lost_window",
           "set_up_worker", "track_windows"]


@dataclass(frozen=True)
class WindowToFit:
    """One window of a recording: where it came from and its samples (times from its start)."""

    source: str  # the recording's name
    index: int  # 1, 2, ... within the recording
    start_s: float  # its start [s since the epoch] (the recording's stamps)
    recording: Recording


#: How an accepted window's reason says that it contradicts the fused estimate.
CONTRADICTS = "contradicts the fused estimate"


@dataclass(frozen=True)
class TrackedWindow:
    """A window's verdict: accepted (with its estimate) or why not, and its fit's time [s]."""

    source: str
    index: int
    end_s: float  # [s since the epoch]
    accepted: bool
    reason: str
    estimate: ParameterEstimate | None
    elapsed_s: float

    @property
    def contradicts(self) -> bool:
        """Accepted, its values contradict the fused ones before it (its reason says how)."""
        return CONTRADICTS in self.reason


@dataclass(frozen=True)
class Tracking:
    """What :func:`track_windows` found: every window, the drift after each accepted one.

    ``drift[k]`` belongs to the ``k``-th accepted window in time order; ``by_source`` holds
    each recording's accepted windows fused as a steady parameter (:func:`.fusion.fuse`).
    """

    windows: tuple[TrackedWindow, ...]
    drift: tuple[DriftingEstimate, ...]
    by_source: dict[str, ParameterEstimate]

    @property
    def accepted(self) -> tuple[TrackedWindow, ...]:
        """The accepted windows, in time order."""
        return tuple(w for w in self.windows if w.accepted)

    @property
    def contradicting(self) -> int:
        """How many accepted windows contradict the fused estimate before them."""
        return sum(window.contradicts for window in self.accepted)

    @property
    def final(self) -> DriftingEstimate | None:
        """The drift after the last accepted window (None when none was accepted)."""
        return self.drift[-1] if self.drift else None


def cut_windows(recording: Recording, window_s: float, stride_s: float) -> list[WindowToFit]:
    """The node's windows of ``recording``: ``window_s`` long, one every ``stride_s`` [s].

    Cut as the node cuts them (:meth:`.online.buffers.SampleRing.between`): the samples of
    the span, and the one just before its start and the one just after its end where they lie
    within a tenth of the window; the input held at the start counts from the start. Times
    from the window's start; no driver velocities (the node's windows carry none). The last
    window ends at or before the recording's last sample.
    """
    time_s = np.asarray(recording.time_s)
    input_time = np.asarray(recording.input_time_s)
    inputs = np.asarray(recording.inputs)
    start_ns = 0 if recording.start_ns is None else recording.start_ns
    margin = WINDOW_MARGIN_FRACTION * window_s
    windows = []
    start = float(time_s[0])
    while start + window_s <= time_s[-1] + COVERAGE_TOLERANCE_S:
        end = start + window_s
        joints = _between(time_s, start, end, margin)
        held = np.arange(len(input_time))[_between(input_time, start, end, None)]
        held = held[input_time[held] <= end]  # a held input needs nothing after the end
        piece = Recording(f"{recording.name} window {len(windows) + 1}",
                          time_s[joints] - start, recording.joint_angles[joints],
                          np.maximum(input_time[held] - start, 0.0), inputs[held])
        windows.append(WindowToFit(recording.name, len(windows) + 1,
                                   start_ns / NS_PER_S + start, piece))
        start += stride_s
    return windows


def _between(time_s: np.ndarray, start: float, end: float, margin: float | None) -> slice:
    """The node's ``between`` on sorted times.

    From the last sample at or before ``start`` to the first at or after ``end``, those two
    only within ``margin`` of the span when one is given.
    """
    first = max(int(np.searchsorted(time_s, start, side="right")) - 1, 0)
    last = min(int(np.searchsorted(time_s, end, side="left")) + 1, len(time_s))
    if margin is not None:
        first = max(first, int(np.searchsorted(time_s, start - margin, side="left")))
        last = min(last, int(np.searchsorted(time_s, end + margin, side="right")))
    return slice(first, max(last, first))


def judge_window(config: Config, window: WindowToFit) -> TrackedWindow:
    """Fit one window and judge it by the node's rules (a worker's job: pure, picklable)."""
    started = time.perf_counter()
    result, reason = judged(config, window.recording)
    estimate = result_estimate(result) if reason is None else None
    return TrackedWindow(window.source, window.index, window.start_s + config.node.window_s,
                         reason is None, reason or "accepted", estimate,
                         time.perf_counter() - started)


def lost_window(config: Config, window: WindowToFit, reason: str) -> TrackedWindow:
    """The verdict of a window that could not be fitted (``reason``): not accepted."""
    return TrackedWindow(window.source, window.index, window.start_s + config.node.window_s,
                         False, reason, None, 0.0)


def track_windows(config: Config, windows: Iterable[WindowToFit], *,
                  map: Callable[[Callable, Iterable], Iterable] = map,
                  progress: Callable[[TrackedWindow], None] | None = None) -> Tracking:
    """Judge every window (through ``map``), then run the drift filter over them in time order.

    ``map(function, windows)`` runs :func:`judge_window` with the config bound, in any order
    (the verdicts are sorted by their stamps); ``windows`` may be a generator that reads the
    recordings one by one, and a ``map`` that keeps a few windows in flight
    (:func:`bounded_map`) then holds no more of the logs than that. ``progress`` sees each
    verdict as it arrives. Unlike the node, each window starts from the config's values and
    has no time limit (its iteration limit holds), so that its verdict depends on the window
    alone, not on which worker ran it, when, or how busy the machine was. The drift settings
    are the node's (``node.drift_noise``, ``drift_prior``, ``drift_alarm_*``), scaled as the
    node scales them; an accepted window that contradicts the fused estimate is fused and its
    reason says so (:func:`~.online.windows.disagreeing`), as the node's diagnostics do.
    """
    method = dataclasses.replace(config.method, time_limit_s=math.inf)
    config = dataclasses.replace(config, method=method)
    verdicts = []
    for verdict in map(_Judge(config), windows):
        verdicts.append(verdict)
        if progress is not None:
            progress(verdict)
    verdicts.sort(key=lambda w: (w.end_s, w.source, w.index))
    drift, by_source, fused_end_s = [], {}, {}
    for position, verdict in enumerate(verdicts):
        if not verdict.accepted:
            continue
        contradiction = disagreeing(config, drift[-1] if drift else None, verdict.estimate,
                                    verdict.end_s)
        if contradiction is not None:  # fused all the same, as the node does: said
            verdicts[position] = dataclasses.replace(
                verdict, reason=f"{verdict.reason}; {CONTRADICTS}: {contradiction}")
        previous = fused_end_s.get(verdict.source)
        new_s = new_data_s(config, None if previous is None else verdict.end_s - previous)
        fused_end_s[verdict.source] = verdict.end_s
        drift.append(with_window(config, drift[-1] if drift else None, verdict.estimate,
                                 verdict.end_s, new_s))
        by_source[verdict.source] = fuse(by_source.get(verdict.source),
                                         counted_once(config, verdict.estimate, new_s))
    return Tracking(tuple(verdicts), tuple(drift), by_source)


class _Judge:
    """:func:`judge_window` with the config bound (picklable, for worker processes)."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self, window: WindowToFit) -> TrackedWindow:
        return judge_window(self.config, window)


#: A window in flight when its worker process dies is run again on a fresh pool; one that was
#: in flight at this many deaths is given up (its verdict says so), so that a window which
#: kills its worker (out of memory, say) does not end a month's run.
WORKER_DEATHS_ALLOWED = 3


def bounded_map(start_pool: Callable[[], concurrent.futures.Executor], in_flight: int,
                given_up: Callable[[object, str], object]
                ) -> Callable[[Callable, Iterable], Iterator]:
    """A ``map`` on a pool of ``start_pool()``: items taken lazily, ``in_flight`` at a time.

    Yields the results as they finish (any order). ``Executor.map`` would take every item at
    once: every window of every recording in memory. Where a worker process dies (the pool is
    broken), the items in flight run again on a new pool; an item in flight at
    :data:`WORKER_DEATHS_ALLOWED` deaths yields ``given_up(item, reason)`` instead. An
    exception raised by ``function`` itself ends the map.
    """
    def run(function: Callable, items: Iterable) -> Iterator:
        pool = _RestartingPool(start_pool, function, given_up)
        try:
            for item in items:
                pool.submit(item, 0)
                while len(pool.pending) >= in_flight:
                    yield from pool.collect()
            while pool.pending:
                yield from pool.collect()
        finally:
            pool.pool.shutdown(wait=True, cancel_futures=True)

    return run


class _RestartingPool:
    """The pool of :func:`bounded_map`: the items in flight, run again where a worker died."""

    def __init__(self, start_pool, function, given_up) -> None:
        self.start_pool, self.function, self.given_up = start_pool, function, given_up
        self.pool = start_pool()
        self.pending: dict = {}  # future -> (item, deaths it was in flight at)
        self.finished: list = []  # results found while restarting, not yet yielded

    def submit(self, item, deaths: int) -> None:
        try:
            self.pending[self.pool.submit(self.function, item)] = (item, deaths)
        except concurrent.futures.BrokenExecutor:  # a worker died since the last look
            self._restart()
            self.pending[self.pool.submit(self.function, item)] = (item, deaths)

    def collect(self) -> list:
        """The results of the items that finish next (it waits for one at least)."""
        done, _ = concurrent.futures.wait(self.pending,
                                          return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            if not isinstance(future.exception(), concurrent.futures.BrokenExecutor):
                del self.pending[future]
                self.finished.append(future.result())  # raises what the function raised
        if any(future in self.pending for future in done):
            self._restart()
        finished, self.finished = self.finished, []
        return finished

    def _restart(self) -> None:
        """A new pool; every item in flight on the broken one run again, or given up."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.pool = self.start_pool()
        in_flight, self.pending = self.pending, {}
        for future, (item, deaths) in in_flight.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                self.finished.append(future.result())  # finished before the worker died
            elif deaths + 1 >= WORKER_DEATHS_ALLOWED:
                self.finished.append(self.given_up(item, f"its worker process died "
                                                         f"{deaths + 1} times"))
            else:
                self.pending[self.pool.submit(self.function, item)] = (item, deaths + 1)


#: XLA on one thread in a worker: the workers are the parallelism, and multi-threaded kernels
#: in several workers contend for the same cores. The numbers then differ from a
#: multi-threaded process by round-off.
WORKER_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def set_up_worker() -> None:
    """Set a worker process up before its first window: XLA on one thread, JAX as the CLI.

    :data:`WORKER_XLA_FLAGS` join ``XLA_FLAGS`` (read when XLA first computes, so before
    any window), then :func:`mb_estimation.numerics.configure_jax` (the compile cache).
    """
    import os

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {WORKER_XLA_FLAGS}".strip()
    from mb_estimation.numerics import configure_jax

    configure_jax()
