"""Time stamps: ``builtin_interfaces/Time`` (seconds, nanoseconds) and integer nanoseconds.

Pure Python (no JAX, no middleware), so the rclpy node, the players, the bags and the node core
share one conversion without importing each other.
"""

from __future__ import annotations

NS_PER_S = 1_000_000_000


def stamp_to_ns(stamp) -> int:
    """Nanoseconds since the epoch of a ``builtin_interfaces/Time`` (exact integer).

    Any object with ``sec`` and ``nanosec`` (rclpy's message, a bag's).
    """
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def sec_nanosec(ns) -> tuple[int, int]:
    """``(sec, nanosec)`` of a time in nanoseconds, as a ``builtin_interfaces/Time`` holds it.

    ``nanosec`` in [0, 1e9); a time before the epoch has a negative ``sec`` (as ROS writes
    it); a float is rounded to the nearest nanosecond. Raises :class:`OverflowError` when
    ``sec`` does not fit in an int32.
    """
    ns = round(ns)
    sec, nanosec = divmod(ns, NS_PER_S)
    if not -(2**31) <= sec < 2**31:
        raise OverflowError(f"time {ns} ns does not fit builtin_interfaces/Time (int32 seconds)")
    return sec, nanosec
