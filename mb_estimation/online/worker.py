"""The node core's background thread: one window at a time, never on the callbacks' path.

:class:`WindowWorker` owns the queue of windows waiting for the estimator and the thread that
takes them in turn. The callbacks put windows in (:meth:`WindowWorker.put`, under the core's
lock: it never blocks; when the queue is full the oldest window is dropped and counted); the
thread hands each to the core's ``run`` (estimate, judge, fuse, publish), after the core's
``warm_up`` when there is one. Nothing here knows what a window holds.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from mb_estimation.online.diagnostics import NodeDiagnostics
from mb_estimation.online.windows import Window

#: How often an idle worker checks that the main thread still runs [s]: the worker is not a
#: daemon (:meth:`WindowWorker.start`), so it leaves by itself once the program has ended.
EXIT_POLL_S = 0.5


class WindowWorker:
    """A bounded queue of windows and the thread that runs ``run(window)`` on each, in order.

    ``lock``: the core's lock, which guards the queue (the callbacks hold it when they
    :meth:`put`); ``capacity``: how many windows may wait; ``diagnostics``: where dropped
    windows are counted; ``warm_up``: run first on the thread, when given.
    """

    def __init__(self, lock: threading.Lock, capacity: int, diagnostics: NodeDiagnostics,
                 run: Callable[[Window], None], warm_up: Callable[[], None] | None = None
                 ) -> None:
        self.pending: collections.deque[Window] = collections.deque()
        self._capacity = capacity
        self._diagnostics = diagnostics
        self._run = run
        self._warm_up = warm_up
        self._wake = threading.Condition(lock)
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._working = False  # on a window or the warm-up

    def put(self, window: Window) -> None:
        """Queue ``window`` (the lock held); the oldest waiting one is dropped when full."""
        if len(self.pending) >= self._capacity:
            self.pending.popleft()
            self._diagnostics.count("windows_dropped")
        self.pending.append(window)
        self._wake.notify()

    def start(self) -> None:
        """Start the thread (it warms up first, then takes windows); returns at once."""
        if self.running:
            raise RuntimeError("the estimator worker is still running (stop() timed out)")
        self._stopping = False
        # Not a daemon: the interpreter waits for it at exit, since leaving XLA compiling (the
        # warm-up, a first window) while the interpreter shuts down crashes the process.
        self._thread = threading.Thread(target=self._loop, name="mb_estimation-worker")
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop after the window (or warm-up) in hand; the waiting ones are dropped."""
        with self._wake:
            self._stopping = True
            self.pending.clear()
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self._thread = None

    @property
    def running(self) -> bool:
        """Whether the thread was started and has not been stopped."""
        return self._thread is not None

    @property
    def busy(self) -> bool:
        """Whether the thread is warming up or on a window (or did not stop in time)."""
        thread = self._thread
        return thread is not None and thread.is_alive() and (self._working or self._stopping)

    def _loop(self) -> None:
        if self._warm_up is not None:
            self._working = True
            self._warm_up()
        while True:
            with self._wake:
                self._working = False
                while not self.pending and not self._stopping:
                    if not threading.main_thread().is_alive():  # the interpreter is exiting
                        return
                    self._wake.wait(EXIT_POLL_S)
                if self._stopping:
                    return
                window = self.pending.popleft()
                self._working = True
            self._run(window)
