"""A rosbag2 bag's message stream: :func:`bag_messages` (``mb-estimation replay``).

The bag's JointState, Float64 and Float64MultiArray messages as :class:`TimedMessage`, in
receive (log) time order, read through :mod:`mb_estimation.io.bags`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from mb_estimation.ros.players.messages import (
    FLOAT64,
    JOINT_STATE,
    KIND_BY_ROS_TYPE,
    JointStatePayload,
    TimedMessage,
)
from mb_estimation.stamps import stamp_to_ns


def bag_messages(
    path: str | Path, *, loop: bool = False, topics: Iterable[str] | None = None
) -> Iterator[TimedMessage]:
    """Messages of a rosbag2 bag's JointState, Float64 and Float64MultiArray topics.

    In receive (log) time order, as ``ros2 bag play`` sends them.  ``stamp_ns`` is the
    message's own header stamp for joint states and the receive time for the header-less types;
    ``receive_ns`` is always the receive time (what :func:`play` paces by).  Topics of other types
    are skipped.  With ``loop=True`` the bag is replayed from its start again after its end, for
    ever: stamps and receive times then jump back, as with ``ros2 bag play --loop``.

    Args:
        path: Bag directory or ``.db3``/``.mcap`` file.
        loop: Replay for ever.
        topics: Only these topics (leading slash optional if unique); default all of the three
            types.

    Returns:
        An iterator of :class:`TimedMessage`.  The bag is checked at once (:class:`BagError`
        if it is not a bag, a topic is missing or of another type, or it holds no message to
        play); it is read lazily, one pass at a time.

    """
    from mb_estimation.io.bags import BagError, read_bag_summary, resolve_topic

    summary = read_bag_summary(path)
    if topics is None:
        selected = [name for name, topic in summary.topics.items()
                    if topic.msgtype in KIND_BY_ROS_TYPE]
    else:
        selected = []
        for name in ([topics] if isinstance(topics, str) else topics):
            name = resolve_topic(summary, name)
            if summary.topics[name].msgtype not in KIND_BY_ROS_TYPE:
                raise BagError(f"topic {name!r} in bag {summary.path} has type "
                               f"{summary.topics[name].msgtype}; expected one of "
                               f"{', '.join(KIND_BY_ROS_TYPE)}")
            selected.append(name)
    if sum(summary.topics[name].message_count for name in selected) == 0:
        raise BagError(f"bag {summary.path} has no JointState, Float64 or Float64MultiArray "
                       f"messages to play: {summary.describe()}")
    return _bag_stream(summary.path, set(selected), loop)


def bag_topics(path: str | Path) -> dict[str, str]:
    """The topics :func:`bag_messages` plays from a bag, and their message kinds.

    For a player to create its publishers (and wait for subscribers) before the first message.
    """
    from mb_estimation.io.bags import read_bag_summary

    summary = read_bag_summary(path)
    return {name: KIND_BY_ROS_TYPE[topic.msgtype] for name, topic in summary.topics.items()
            if topic.msgtype in KIND_BY_ROS_TYPE and topic.message_count}


def _bag_stream(path: Path, topics: set[str], loop: bool) -> Iterator[TimedMessage]:
    while True:
        yield from _bag_pass(path, topics)
        if not loop:
            return


def _bag_pass(path: Path, topics: set[str]) -> Iterator[TimedMessage]:
    from mb_estimation.errors import first_line
    from mb_estimation.io.bags import BagError, OpenBag

    with OpenBag(path) as reader:
        conns = [conn for conn in reader.connections
                 if conn.topic in topics and conn.msgtype in KIND_BY_ROS_TYPE]
        messages = reader.messages(connections=conns)
        while True:
            try:
                conn, log_time, raw = next(messages)
                msg = reader.deserialize(raw, conn.msgtype)
                timed = _from_bag_message(conn.topic, KIND_BY_ROS_TYPE[conn.msgtype],
                                          int(log_time), msg)
            except StopIteration:
                return
            except Exception as exc:
                raise BagError(f"cannot read bag {path}: {first_line(exc)}") from None
            yield timed


def _from_bag_message(topic: str, kind: str, log_time: int, msg: Any) -> TimedMessage:
    if kind == JOINT_STATE:
        stamp = stamp_to_ns(msg.header.stamp)
        payload = JointStatePayload(
            tuple(msg.name),
            np.asarray(msg.position, dtype=np.float64),
            np.asarray(msg.velocity, dtype=np.float64),
            np.asarray(msg.effort, dtype=np.float64),
        )
        return TimedMessage(stamp, topic, kind, payload, log_time)
    if kind == FLOAT64:
        return TimedMessage(log_time, topic, kind, float(msg.data), log_time)
    return TimedMessage(log_time, topic, kind, tuple(float(x) for x in msg.data), log_time)
