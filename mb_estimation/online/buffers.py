"""Bounded ring buffers of time-stamped samples for the online node.

Memory is fixed at construction: appending to a full buffer overwrites the oldest sample.
Appends are O(width) and never allocate, so they are safe in a subscription callback.
"""

from __future__ import annotations

import bisect
import collections

import numpy as np


class SampleRing:
    """The newest ``capacity`` samples ``(stamp [ns], values [width])``, in arrival order.

    The caller appends in time order (the node drops late samples before they get here).
    """

    def __init__(self, capacity: int, width: int) -> None:
        if capacity < 1 or width < 1:
            raise ValueError(f"capacity and width must be positive, got {capacity}, {width}")
        self._stamps = np.zeros(capacity, dtype=np.int64)
        self._values = np.zeros((capacity, width), dtype=np.float64)
        self._end = 0  # position after the newest sample (modulo capacity)
        self._size = 0  # samples held
        self.capacity = capacity

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        """Memory held by the samples [bytes] (constant)."""
        return self._stamps.nbytes + self._values.nbytes

    def append(self, stamp_ns: int, values) -> None:
        """Add one sample, overwriting the oldest when full."""
        index = self._end % self.capacity
        self._stamps[index] = stamp_ns
        self._values[index] = values
        self._end += 1
        self._size = min(self._size + 1, self.capacity)

    def clear(self) -> None:
        """Forget every sample (memory is kept)."""
        self._end = self._size = 0

    def drop_after(self, stamp_ns: int) -> None:
        """Forget the samples stamped later than ``stamp_ns`` (the newest ones)."""
        stamps, _ = self.ordered()
        newer = len(stamps) - int(np.searchsorted(stamps, stamp_ns, side="right"))
        self._end -= newer
        self._size -= newer

    @property
    def last_stamp_ns(self) -> int | None:
        """Stamp of the newest sample, None when empty."""
        return None if self._size == 0 else int(self._stamps[(self._end - 1) % self.capacity])

    @property
    def last_values(self) -> np.ndarray | None:
        """Values of the newest sample (a copy), None when empty."""
        return None if self._size == 0 else self._values[(self._end - 1) % self.capacity].copy()

    def ordered(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of all held samples, oldest first: ``(stamps [m], values [m, width])``."""
        index = (self._end - self._size + np.arange(self._size)) % self.capacity
        return self._stamps[index].copy(), self._values[index].copy()

    def between(self, start_ns: int, end_ns: int,
                margin_ns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Samples from the last one at or before ``start_ns`` to the first at or after ``end_ns``.

        The samples just outside the interval are included so that the interval is covered
        when there are samples on both sides (interpolation and a held input need them), but
        only those within ``margin_ns`` of it when a margin is given: a neighbour stamped far
        away (a stamp glitch) never stretches what is returned. Only the samples returned are
        copied (binary search over the ring), so a window is cheap to cut.
        """
        oldest = self._end - self._size

        def stamp(i):
            return self._stamps[(oldest + i) % self.capacity]

        held = range(self._size)
        first = max(bisect.bisect_right(held, start_ns, key=stamp) - 1, 0)
        last = min(bisect.bisect_left(held, end_ns, key=stamp) + 1, self._size)
        if margin_ns is not None:
            first = max(first, bisect.bisect_left(held, start_ns - margin_ns, key=stamp))
            last = min(last, bisect.bisect_right(held, end_ns + margin_ns, key=stamp))
        index = (oldest + np.arange(first, max(last, first))) % self.capacity
        return self._stamps[index].copy(), self._values[index].copy()


class PublicationOrder:
    """Stamps header-less voltages with the joint state published nearest to each of them.

    A transport delivers each topic in order but not the two topics in order to each other (an
    rclpy executor takes one message from each ready subscription in turn), so "the newest joint
    state received" can be one sample off. With the publishers' source timestamps [ns] the
    pairing is exact: a voltage published between joint states k and k+1 takes the header stamp
    of the one published nearer to it (k's on a tie), whichever of them arrives first. A
    controller answers joint state k at once (k's stamp); a bag that stores the input and the
    joint state of one instant under one time, the input first, is played with the input just
    before k+1 (k+1's stamp, as ``calibrate`` reads that bag; k's put the input one sample
    early); an input published late in the interval acts mostly in the next. The first
    voltage (at start, after a reset or a time jump) takes k's stamp wherever it falls, so
    that the input is known from the first joint state on. A voltage is held until a joint
    state published after it arrives; one published before every joint state still held here
    takes the first joint state's stamp (as at start-up). Both queues hold at most
    ``capacity`` entries.
    """

    def __init__(self, capacity: int) -> None:
        self._joints: collections.deque[tuple[int, int]] = collections.deque(maxlen=capacity)
        self._held: collections.deque[tuple[int, float]] = collections.deque(maxlen=capacity)
        self._placed = False  # a voltage placed since the start (or the last time base)

    def joint_state(self, source_ns: int, stamp_ns: int) -> list[tuple[int, float]]:
        """Note an accepted joint state; returns the held voltages it places ``(stamp, value)``."""
        first = not self._joints
        self._joints.append((source_ns, stamp_ns))
        placed = []
        while self._held and self._held[0][0] < source_ns:
            voltage_source, value = self._held.popleft()
            stamp = self._stamp_before(voltage_source)
            if stamp is None and first:
                stamp = stamp_ns
            if stamp is not None:
                placed.append((stamp, value))
                self._placed = True
        return placed

    def voltage(self, source_ns: int, value: float) -> tuple[int, float] | None:
        """A voltage: ``(stamp, value)`` if it can be placed now, else ``None`` (held)."""
        if self._joints and self._joints[-1][0] > source_ns:
            stamp = self._stamp_before(source_ns)
            self._placed = True
            return (self._joints[0][1] if stamp is None else stamp), value
        self._held.append((source_ns, value))
        return None

    def forget_joint_states(self) -> None:
        """After a reset or a time jump: the stamps seen so far are of another time base."""
        self._joints.clear()
        self._placed = False

    def _stamp_before(self, source_ns: int) -> int | None:
        after = None  # the joint state published next after the voltage: (source, stamp)
        for joint_source, stamp in reversed(self._joints):
            if joint_source <= source_ns:
                if (self._placed and after is not None
                        and after[0] - source_ns < source_ns - joint_source):
                    return after[1]
                return stamp
            after = (joint_source, stamp)
        return None
