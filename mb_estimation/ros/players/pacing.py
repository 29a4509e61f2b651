"""Pacing a stream in real time: :func:`play` hands each message to a sink when it is due.

Scaled by a rate, or as fast as possible; :class:`PlayStats` says how late it was.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mb_estimation.ros.players.messages import TimedMessage
from mb_estimation.stamps import NS_PER_S

#: Longest single sleep of :func:`play` (so that ``stop`` is noticed within this time) [s].
MAX_SLEEP_S = 0.1


@dataclass
class PlayStats:
    """What :func:`play` did.

    Lateness is how long after its scheduled time a message went to the sink [s] (0 in the
    as-fast-as-possible mode, where nothing is scheduled).  ``stream_s`` is the stream time
    covered (sum of the forward steps of the pacing times), ``wall_s`` the clock time from the
    first message to the end of the play, ``rewinds`` the number of backward steps of the pacing
    time (loop wraps of a bag).  ``stopped`` is True when ``stop`` ended the play early.
    """

    messages: int = 0
    by_topic: dict[str, int] = field(default_factory=dict)
    stream_s: float = 0.0
    wall_s: float = 0.0
    max_lateness_s: float = 0.0
    mean_lateness_s: float = 0.0
    rewinds: int = 0
    stopped: bool = False


def play(
    messages: Iterable[TimedMessage],
    sink: Callable[[TimedMessage], Any],
    *,
    rate: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
    stop: Any = None,
) -> PlayStats:
    """Call ``sink(message)`` for each message, paced in real time scaled by ``rate``.

    Message ``k`` is due at ``t0 + T_k / rate``, where ``t0`` is the ``clock()`` reading when
    the first message arrived and ``T_k`` the stream time from the first message to message
    ``k``: the sum of the forward steps of :attr:`TimedMessage.pacing_ns` (a backward step,
    e.g. a loop wrap, counts as no time).  Every message is scheduled against ``t0``, never by
    sleeping the gap since the previous one, so time lost in the sink or in the producer does not
    accumulate: late messages go out at once and the schedule catches up.  ``rate`` 2 plays twice
    as fast; ``rate`` 0 or ``inf`` as fast as possible (no sleeping at all).

    Args:
        messages: The stream (e.g. :func:`rig_sim_messages`, :func:`bag_messages`).
        sink: Called with every message, in order (its exceptions end the play).
        rate: Speed factor, >= 0.
        clock: Monotonic clock [s].
        sleep: Sleep function [s] (sleeps at most :data:`MAX_SLEEP_S` at a time).
        stop: Optional object with ``is_set()`` (e.g. ``threading.Event``): the play ends,
            with ``stopped=True``, when it is set.

    Returns:
        A :class:`PlayStats`.

    """
    rate = float(rate)
    if math.isnan(rate) or rate < 0:
        raise ValueError(f"rate must be >= 0 (0 or inf: as fast as possible), got {rate}")
    paced = 0 < rate < math.inf
    stats = PlayStats()
    by_topic: Counter[str] = Counter()
    start = 0.0
    previous: int | None = None
    stream_ns = 0
    lateness_sum = 0.0
    for message in messages:
        if stop is not None and stop.is_set():
            stats.stopped = True
            break
        t = message.pacing_ns
        if previous is None:
            start = clock()
        elif t > previous:
            stream_ns += t - previous
        elif t < previous:
            stats.rewinds += 1
        previous = t
        if paced:
            due = start + stream_ns / NS_PER_S / rate
            now = clock()
            while now < due:
                if stop is not None and stop.is_set():
                    stats.stopped = True
                    break
                sleep(min(due - now, MAX_SLEEP_S))
                now = clock()
            if stats.stopped:
                break
            lateness = now - due
            lateness_sum += lateness
            stats.max_lateness_s = max(stats.max_lateness_s, lateness)
        sink(message)
        stats.messages += 1
        by_topic[message.topic] += 1
    if stats.messages:
        stats.wall_s = clock() - start
        stats.mean_lateness_s = lateness_sum / stats.messages
    stats.stream_s = stream_ns / NS_PER_S
    stats.by_topic = dict(by_topic)
    return stats
