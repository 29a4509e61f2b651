"""The node core's counters and latest values: what /diagnostics reports of it.

One :class:`NodeDiagnostics` per core: the core counts its windows, outputs and resets here,
its collaborators (the sample intake, the window worker) the samples and windows they drop;
the core reads it into a snapshot. Not locked itself: the core's lock guards it, held whenever
anything writes here.
"""

from __future__ import annotations

import collections


class NodeDiagnostics:
    """Counters (samples, windows, errors by kind) and the latest values (``last_*``, timings)."""

    def __init__(self) -> None:
        self.counters: collections.Counter = collections.Counter()
        self.latest: dict = {}

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``name``."""
        self.counters[name] += n

    def reject(self, kind: str, error: str) -> None:
        """Something dropped: counted under ``kind``, and ``error`` said."""
        self.counters[kind] += 1
        self.latest["last_error"] = error

    def message_error(self, what: str) -> None:
        """A message that could not be used (wrong type, undecodable): counted and told."""
        self.counters["message_errors"] += 1
        self.latest["last_error"] = what
