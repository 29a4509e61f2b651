"""What the bag reader and writer share: the Humble typestore and :class:`BagError`.

Pure Python until a bag is opened or written: ``rosbags`` is imported on first use.
"""

from __future__ import annotations

import functools
from typing import Any

from mb_estimation.errors import UserError

__all__ = ["BagError", "humble_typestore"]


class BagError(UserError):
    """A bag cannot be written or read; the message is one line naming the cause."""


@functools.lru_cache(maxsize=1)
def humble_typestore() -> Any:
    """The ROS 2 Humble typestore of ``rosbags`` (message definitions and type hashes)."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)
