"""Joint mapping maths: model joint angles and rates as a recording holds them.

A rig joint is recorded as ``sign · θ + offset`` (the mappings are the
config's ``recording.joints``, :class:`mb_estimation.config.JointMapping`, taken here by their
``sign`` and ``offset`` only). Pure NumPy: ``mb-estimation simulate``, the node core and the
players share it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import numpy as np


class JointMappingLike(Protocol):
    """What this module reads of a joint mapping."""

    sign: int
    offset: float


def recorded_joint_states(mappings: Iterable[JointMappingLike], angles, rates):
    """Recorded positions and velocities ``[..., j]`` of model angles [rad] and rates [rad/s].

    ``sign · θ + offset`` and ``sign · θ̇`` per joint; ``mappings`` in the order of the last
    axis (the rig's joints).
    """
    mappings = tuple(mappings)
    signs = np.array([mapping.sign for mapping in mappings], dtype=np.float64)
    offsets = np.array([mapping.offset for mapping in mappings], dtype=np.float64)
    return (signs * np.asarray(angles, dtype=np.float64) + offsets,
            signs * np.asarray(rates, dtype=np.float64))
