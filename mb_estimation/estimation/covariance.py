"""Linearised parameter covariance (§3.7, (3.26)-(3.32)) from the LM factorisation.

With the weights folded into the residuals (``r = W^{1/2} Δz``) and ``J = [J_χ J_x]``, the
states are eliminated by variable projection,

    T = (I - J_x (J_xᵀJ_x)⁻¹ J_xᵀ) J_χ            (3.32)

and the covariance of the estimated parameters is the sandwich

    Λ_χχ = (TᵀT)⁻¹ Tᵀ Ĉ T (TᵀT)⁻¹                 (3.31)

where ``Ĉ`` is the covariance of the (weighted) residuals estimated from the fit itself: the
sample covariances (3.26)/(3.27) of the observation rows and of the impulse rows, each shared by
all steps. ``(J_xᵀJ_x)⁻¹ J_xᵀJ_χ`` reuses the block-tridiagonal solve of the LM step at zero
damping, so ``T`` is formed block by block in linear time. Directions of χ that the data does
not determine at all (``TᵀT`` singular to working precision, like a rotation of ``tilt`` about
gravity) get an infinite standard deviation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mb_estimation.estimation.linear_algebra import Elimination, backward_solve
from mb_estimation.estimation.residuals import Linearization
from mb_estimation.numerics import jax
from mb_estimation.pseudo_inverse import (
    LOADING_THRESHOLD,
    informed,
    mark_undetermined,
    scaled_pseudo_inverse,
)

jnp = jax.numpy

@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class ProjectedBlocks:
    """One recording's share of ``TᵀT`` and of ``TᵀĈT`` (both ``[p, p]``)."""

    information: jax.Array
    middle: jax.Array


def projected_blocks(lin: Linearization, elimination: Elimination, num_impulse_rows: int,
                     impulse_covariance, observation_covariance) -> ProjectedBlocks:
    """``T_k = C_k - A_k Y_{k-1} - B_k Y_k`` with ``Y = (J_xᵀJ_x)⁻¹ J_xᵀJ_χ``; sums over k."""
    solved = backward_solve(elimination, elimination.coupling_solve)  # Y [n, s, p]
    previous = jnp.concatenate([jnp.zeros_like(solved[:1]), solved[:-1]])
    projected = (lin.parameters - jnp.einsum("kms,ksp->kmp", lin.previous, previous)
                 - jnp.einsum("kms,ksp->kmp", lin.current, solved))
    impulse, observation = projected[:, :num_impulse_rows], projected[:, num_impulse_rows:]
    middle = (jnp.einsum("kmp,mn,knq->pq", impulse, impulse_covariance, impulse)
              + jnp.einsum("kmp,mn,knq->pq", observation, observation_covariance, observation))
    return ProjectedBlocks(jnp.einsum("kmp,kmq->pq", projected, projected), middle)


def residual_covariances(residuals: list[np.ndarray], num_impulse_rows: int,
                         observed: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sample covariances (3.26)/(3.27) of the impulse rows and of the observed rows."""
    impulse = np.concatenate([r[:, :num_impulse_rows] for r in residuals])
    observation = np.concatenate([r[o > 0, num_impulse_rows:]
                                  for r, o in zip(residuals, observed, strict=False)])
    return (impulse.T @ impulse / max(len(impulse) - 1, 1),
            observation.T @ observation / max(len(observation) - 1, 1))


def parameter_covariance(information: np.ndarray, middle: np.ndarray) -> np.ndarray:
    """``Λ = (TᵀT)⁻¹ TᵀĈT (TᵀT)⁻¹`` (3.31), ``inf`` on the variance of undetermined directions.

    ``TᵀT`` is scaled to unit diagonal before its (pseudo-)inverse so that parameters of very
    different magnitude (inertias ~1e-3 kg m², gains ~1 N m/V) do not mask each other; an
    entry with no more information than the round-off of a zero
    (:func:`~mb_estimation.pseudo_inverse.informed`) is undetermined and left out of it.
    """
    size = len(information)
    if size == 0:
        return np.zeros((0, 0))
    if not (np.all(np.isfinite(information)) and np.all(np.isfinite(middle))):
        return np.diag(np.full(size, np.inf))
    determined = informed(np.diag(information))
    information = np.where(np.outer(determined, determined), information, 0.0)
    safe = np.where(determined, np.sqrt(np.abs(np.diag(information))), 1.0)
    inverse, _, loading = scaled_pseudo_inverse(information, safe)
    covariance = inverse @ middle @ inverse
    return mark_undetermined(covariance, ~determined | (loading > LOADING_THRESHOLD))


def gravity_frame(gravity) -> np.ndarray:
    """``[3, 3]`` orthonormal columns: a horizontal axis, the gravity direction, another one.

    For gravity near ``-y`` (every rig here) these are about ``x``, ``-y`` and ``z``: a tilt's
    tangent in this frame keeps the layout of its world components, with the rotation about
    gravity — which moves nothing and so is never observed — alone in the middle.
    """
    down = np.asarray(gravity, dtype=float) / np.linalg.norm(gravity)
    reference = np.eye(3)[0 if abs(down[0]) < 0.9 else 2]  # x, unless gravity lies along it
    first = reference - (reference @ down) * down
    first /= np.linalg.norm(first)
    return np.column_stack([first, down, np.cross(down, first)])


def parameter_std(information: np.ndarray, middle: np.ndarray, free, gravity) -> dict:
    """Standard deviations per free parameter, a tilt's in :func:`gravity_frame`.

    A rotation of ``tilt`` about gravity is not observable; in world components it mixes into
    all three, and (3.31) would leave every one undetermined (``inf``). Expressed in the
    gravity frame, the unobservable direction is the middle component alone (``inf``), and the
    two horizontal ones — how far gravity leans, about each axis [rad] — keep their std.
    ``free`` is the :class:`~mb_estimation.estimation.parameters.FreeParameters`.
    """
    rotation = np.eye(len(information))
    about_gravity = []
    for name, kind in zip(free.names, free.kinds, strict=True):
        if kind == "quaternion":
            part = free.slices[name]
            rotation[part, part] = gravity_frame(gravity)
            about_gravity.append(part.start + 1)
    information = rotation.T @ information @ rotation
    middle = rotation.T @ middle @ rotation
    # Zero by construction (gravity does not move): round-off must not pose as information.
    for matrix in (information, middle):
        matrix[about_gravity, :] = 0.0
        matrix[:, about_gravity] = 0.0
    covariance = parameter_covariance(information, middle)
    deviations = np.sqrt(np.diag(covariance))
    return {name: deviations[free.slices[name]] for name in free.names}
