"""The free parameters χ: their layout in the tangent space, ⊞ updates and the box B (§3.1).

Scalars live in R; a quaternion parameter (``tilt``) lives on the unit sphere and is updated
like the rotational states, ``e ⊞ ψ = exp(ψ) ⋆ e`` with a 3-vector ψ (§3.4). The tangent vector
``δχ`` stacks the parameters in the order of :attr:`FreeParameters.names`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from mb_estimation import lie
from mb_estimation.numerics import jax
from mb_estimation.rigs.parameters import (
    RigSpec,
    tangent_labels,
    tangent_size,
    tangent_slices,
)

jnp = jax.numpy


@dataclass(frozen=True)
class FreeParameters:
    """Static layout of the free parameters: names, kinds and their slices of ``δχ``."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]  # "scalar" or "quaternion", per name

    @classmethod
    def of(cls, spec: RigSpec, names) -> FreeParameters:
        names = tuple(names)
        return cls(names, tuple(spec.parameter(name).kind for name in names))

    @property
    def sizes(self) -> tuple[int, ...]:
        """Tangent dimension per parameter (1, or 3 for a quaternion)."""
        return tuple(tangent_size(kind) for kind in self.kinds)

    @property
    def size(self) -> int:
        """Dimension of ``δχ``."""
        return sum(self.sizes)

    @property
    def slices(self) -> dict[str, slice]:
        """Each parameter's entries of ``δχ`` (:func:`tangent_slices`)."""
        return tangent_slices(self.names, self.kinds)

    @property
    def tangent_labels(self) -> tuple[str, ...]:
        """One label per entry of ``δχ``: the name, or ``name_rx/ry/rz`` for a quaternion."""
        return tangent_labels(self.names, self.kinds)


def parameters_boxplus(free: FreeParameters, values: Mapping[str, jax.Array], delta):
    """``χ ⊞ δχ``: scalars add, quaternions rotate by ``exp(δψ)`` and are renormalised."""
    out = dict(values)
    for name, kind in zip(free.names, free.kinds, strict=False):
        step = delta[free.slices[name]]
        if kind == "quaternion":
            out[name] = lie.quat_normalize(lie.boxplus(values[name], step))
        else:
            out[name] = values[name] + step[0]
    return out


def clip_to_box(free: FreeParameters, values: Mapping[str, jax.Array],
                lower: Mapping[str, float], upper: Mapping[str, float]) -> dict:
    """Scalars clipped to their box ``[lower, upper]``, quaternions unchanged.

    ``χ ⊞ δχ`` with ``δχ`` at a bound of :func:`tangent_bounds` lands on the box edge only up
    to round-off (``value + (lower - value)`` may be below ``lower``); the estimate must not
    leave the box, or writing and re-reading it would fail validation.
    """
    out = dict(values)
    for name, kind in zip(free.names, free.kinds, strict=False):
        if kind == "scalar":
            out[name] = jnp.clip(values[name], float(lower[name]), float(upper[name]))
    return out


def tangent_bounds(free: FreeParameters, values: Mapping[str, object], lower: Mapping[str, float],
                   upper: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on ``δχ`` keeping ``χ ⊞ δχ`` in the box; quaternion directions are unbounded."""
    low = np.full(free.size, -np.inf)
    high = np.full(free.size, np.inf)
    for name, kind in zip(free.names, free.kinds, strict=False):
        if kind == "scalar":
            index = free.slices[name].start
            value = float(values[name])
            low[index] = min(float(lower[name]) - value, 0.0)
            high[index] = max(float(upper[name]) - value, 0.0)
    return low, high
