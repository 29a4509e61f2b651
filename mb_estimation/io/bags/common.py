"""What the bag reader and writer share: the Humble typestore, :class:`BagError`, metadata.

Pure Python until a bag is opened or written: ``rosbags`` is imported on first use.
"""

from __future__ import annotations

import functools
from typing import Any

from mb_estimation.errors import UserError
from mb_estimation.message_types import VOLTAGE_TYPES

__all__ = ["BagError", "METADATA_VERSION", "STORAGES", "VOLTAGE_TYPES", "humble_typestore"]

#: rosbag2 metadata version written (the newest one ROS 2 Humble can parse, see
#: :mod:`mb_estimation.io.bags.writer`).
METADATA_VERSION = 8

#: Storage identifiers accepted by :func:`~mb_estimation.io.bags.writer.write_rig_bag`.
STORAGES = ("sqlite3", "mcap")


class BagError(UserError):
    """A bag cannot be written or read; the message is one line naming the cause."""


@functools.lru_cache(maxsize=1)
def humble_typestore() -> Any:
    """The ROS 2 Humble typestore of ``rosbags`` (message definitions and type hashes)."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_HUMBLE)
