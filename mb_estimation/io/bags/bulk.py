"""A topic's messages decoded at once, where they all share the first message's byte layout.

The messages of one topic usually differ only in their numbers: the same joint names, the same
array lengths, the same frame id. Their CDR bytes then have one length and differ only where
the numbers lie. rosbags decodes one message at a time (a Python call and an object per
message, which adds up over hours of joint states at 1 kHz); here rosbags decodes the first
message, rosbags itself says where each wanted number lies (the first message serialised again
with that field's bytes inverted: the bytes that change are the field's), and where every
message's other bytes equal the first one's, the numbers of all messages are read as NumPy
views of their bytes. Where they do not (a joint renamed, an array that changes length, a
frame id that varies, a serialiser that pads differently), :func:`fixed_layout` says so and
the caller decodes message by message as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["fixed_layout"]


def fixed_layout(typestore: Any, msgtype: str, raws: Sequence[bytes], first: Any,
                 fields: Mapping[str, tuple[tuple[str, ...], str]]
                 ) -> dict[str, np.ndarray] | None:
    """Each field's values in every message, or None where the messages' layouts differ.

    ``raws``: the messages' CDR bytes; ``first``: ``raws[0]`` decoded by rosbags;
    ``fields``: name → (attribute path, little-endian NumPy dtype of its elements), e.g.
    ``{"sec": (("header", "stamp", "sec"), "<i4"), "position": (("position",), "<f8")}``, each
    a number or an array of numbers. Returns name → ``[n, *shape of the first's value]``.
    """
    base = np.frombuffer(bytes(typestore.serialize_cdr(first, msgtype)), np.uint8)
    if any(len(raw) != base.size for raw in raws) or bytes(raws[0]) != base.tobytes():
        return None
    static = np.ones(base.size, dtype=bool)
    spans = {}
    for name, (path, dtype) in fields.items():
        value = np.asarray(_attribute(first, path), dtype=dtype)
        marked = _replaced(first, path, _inverted(_attribute(first, path), value))
        serialised = np.frombuffer(bytes(typestore.serialize_cdr(marked, msgtype)), np.uint8)
        if serialised.size != base.size:
            return None
        changed = np.flatnonzero(serialised != base)
        if changed.size != value.nbytes or (changed.size and
                                            changed[-1] - changed[0] + 1 != changed.size):
            return None  # not one contiguous span of the value's bytes (a NaN made canonical)
        static[changed] = False
        spans[name] = (int(changed[0]) if changed.size else 0, value.shape, value.dtype)
    block = np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), base.size)
    if not np.array_equal(block[:, static], np.broadcast_to(base[static], (len(raws),
                                                                         int(static.sum())))):
        return None
    return {name: np.ascontiguousarray(block[:, start:start + dtype.itemsize * int(
                np.prod(shape))]).view(dtype).reshape(len(raws), *shape)
            for name, (start, shape, dtype) in spans.items()}


def _attribute(message: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        message = getattr(message, name)
    return message


def _replaced(message: Any, path: tuple[str, ...], value: Any) -> Any:
    """``message`` with the attribute at ``path`` set to ``value`` (messages are dataclasses)."""
    if not path:
        return value
    inner = _replaced(getattr(message, path[0]), path[1:], value)
    return dataclasses.replace(message, **{path[0]: inner})


def _inverted(original: Any, value: np.ndarray) -> Any:
    """``value`` with every bit inverted, as the message holds it (an array, or a Python number)."""
    unsigned = np.dtype(f"<u{value.dtype.itemsize}")
    flipped = np.invert(value.view(unsigned) if value.ndim else value.reshape(1).view(unsigned))
    flipped = flipped.view(value.dtype)
    if isinstance(original, np.ndarray):
        return flipped
    return flipped[0].item()
