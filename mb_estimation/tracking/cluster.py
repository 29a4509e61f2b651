"""``track --cluster``: the windows on a Dask distributed cluster (the ``cluster`` extra).

Dask distributed because this workload is a bag of independent tasks of a second or two, each
needing a warm JAX process: Dask's workers are long-lived processes (each compiles once, from
the compile cache on its disk), its scheduler reruns the tasks of a worker that is lost (a
killed or crashed process; ``distributed.scheduler.allowed-failures`` times), and a scheduler
is one command on any machine (``dask scheduler``, ``dask worker ADDRESS``) or one line
on a batch cluster (dask-jobqueue). Each worker sets JAX up as the command line does when it
starts (:class:`JaxSetUp`: XLA on one thread, the compile cache), also one started to
replace a lost one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from distributed import Client, WorkerPlugin, as_completed

__all__ = ["JaxSetUp", "cluster_map"]

#: Tries to register the workers' set-up where a worker is lost while it is broadcast (one
#: killed as the run starts: the scheduler keeps the plugin, the broadcast fails).
REGISTER_TRIES = 3


class JaxSetUp(WorkerPlugin):
    """Set every worker up as it starts (:func:`.windows.set_up_worker`)."""

    name = "mb_estimation-jax"

    def setup(self, worker) -> None:
        from mb_estimation.tracking.windows import set_up_worker

        set_up_worker()


def cluster_map(client: Client, in_flight: int) -> Callable[[Callable, Iterable], Iterator]:
    """A ``map`` over ``client``'s workers: items taken lazily, at most ``in_flight`` queued.

    Yields the results as they finish (any order).
    """
    for attempt in range(REGISTER_TRIES):
        try:
            client.register_plugin(JaxSetUp())
            break
        except OSError:  # CommClosedError: a worker lost during the broadcast
            if attempt == REGISTER_TRIES - 1:
                raise

    def run(function: Callable, items: Iterable) -> Iterator:
        finished = as_completed()
        for item in items:
            finished.add(client.submit(function, item, pure=False))
            if finished.count() >= in_flight:
                yield next(finished).result()
        for future in finished:
            yield future.result()

    return run
