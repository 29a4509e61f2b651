"""Linearised parameter covariance (§3.7, (3.26)-(3.32)) from the LM factorisation.

With the weights folded into the residuals (``r = W^{1/2} Δz``) and ``J = [J_χ J_x]``, the
states are eliminated by variable projection,

    T = (I - J_x (J_xᵀJ_x)⁻¹ J_xᵀ) J_χ            (3.32)

and the covariance of the estimated parameters is the sandwich

    Λ_χχ = (TᵀT)⁻¹ Tᵀ Ĉ T (TᵀT)⁻¹                 (3.31)

where ``Ĉ`` is the covariance of the (weighted) residuals estimated from the fit itself: the
sample covariances (3.26)/(3.27) of the observation rows and of the impulse rows, each shared by
all steps. Where the model does not follow the data, the residuals carry its error and stay
correlated from step to step; :func:`correlated_middle` then replaces ``TᵀĈT`` by the
projected scores' summed covariance over the residuals' correlation time (Newey and West,
1987), so the std include what the model's error moves the parameters by.
``(J_xᵀJ_x)⁻¹ J_xᵀJ_χ`` reuses the block-tridiagonal solve of the LM step at zero
damping, so ``T`` is formed block by block in linear time. Directions of χ that the data does
not determine at all (``TᵀT`` singular to working precision, like a rotation of ``tilt`` about
gravity) get an infinite standard deviation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mb_estimation.estimation.linear_algebra import Elimination, backward_solve
from mb_estimation.estimation.residuals import Linearization
from mb_estimation.numerics import jax, pytree_dataclass
from mb_estimation.pseudo_inverse import (
    LOADING_THRESHOLD,
    informed,
    mark_undetermined,
    scaled_pseudo_inverse,
)

jnp = jax.numpy

@pytree_dataclass
@dataclass(frozen=True)
class ProjectedBlocks:
    """One recording's share of ``TᵀT`` and of ``TᵀĈT`` (both ``[p, p]``), and its scores.

    ``scores [n, p]``: each step's ``T_kᵀ r_k`` (for :func:`correlated_middle`).
    """

    information: jax.Array
    middle: jax.Array
    scores: jax.Array


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
    return ProjectedBlocks(jnp.einsum("kmp,kmq->pq", projected, projected), middle,
                           jnp.einsum("kmp,km->kp", projected, lin.residuals))


def residual_covariances(residuals: list[np.ndarray], num_impulse_rows: int,
                         observed: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sample covariances (3.26)/(3.27) of the impulse rows and of the observed rows."""
    impulse = np.concatenate([r[:, :num_impulse_rows] for r in residuals])
    observation = np.concatenate([r[o > 0, num_impulse_rows:]
                                  for r, o in zip(residuals, observed, strict=False)])
    return (impulse.T @ impulse / max(len(impulse) - 1, 1),
            observation.T @ observation / max(len(observation) - 1, 1))


@dataclass(frozen=True)
class CorrelatedCovariance:
    """A fit's parameter covariance with the residuals' correlation in time (model error).

    ``covariance``: as the fit's (same rows), with :func:`correlated_middle`; ``std``: per free
    parameter, in its unit; ``correlation_s``: the longest time the residuals stayed positively
    correlated over [s] (:func:`correlation_lags`, the window of the correlated middle).
    """

    covariance: np.ndarray
    std: dict
    correlation_s: float


def correlation_lags(residuals: np.ndarray) -> int:
    """How many samples the residuals stay positively correlated over: the first zero [samples].

    ``residuals [N, m]`` in time order; the first lag at which the autocorrelation of a
    column is no longer positive, the largest over the columns that are not all zero (at
    least 1). White residuals give 1; a model error that lasts gives its duration.
    """
    residuals = np.asarray(residuals, dtype=np.float64)
    count = len(residuals)
    lags = 1
    for column in residuals.T:
        centred = column - column.mean()
        power = np.abs(np.fft.rfft(centred, 2 * count)) ** 2
        autocovariance = np.fft.irfft(power, 2 * count)[:count]
        if autocovariance[0] <= 0.0:
            continue
        not_positive = np.flatnonzero(autocovariance[1:] <= 0.0)
        lags = max(lags, int(not_positive[0]) + 1 if len(not_positive) else count - 1)
    return lags


def correlated_middle(scores: np.ndarray, lags: int) -> np.ndarray:
    """``Σ_l (1 - |l|/(L+1)) Σ_t s_t s_{t+l}ᵀ`` over ``|l| ≤ L``: (3.31)'s middle, correlated.

    Newey and West's (1987) estimate of the scores' summed covariance with Bartlett weights,
    ``scores [N, p]`` (each step's ``T_kᵀ r_k``) in time order, ``lags`` = L. Computed as the
    sums of the scores over every window of ``L + 1`` samples (the series padded with ``L``
    zeros at both ends), their outer products added and divided by ``L + 1``: each pair of
    samples ``l`` apart lies in ``L + 1 - l`` windows. With ``L = 0`` it is ``Σ_t s_t s_tᵀ``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    padded = np.pad(scores, ((lags, lags), (0, 0)))
    running = np.concatenate([np.zeros((1, scores.shape[1])), np.cumsum(padded, axis=0)])
    windows = running[lags + 1:] - running[:-lags - 1]
    return windows.T @ windows / (lags + 1)


def information_inverse(information: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(TᵀT)⁺`` and the mask of the entries it leaves undetermined.

    ``TᵀT`` is scaled to unit diagonal before its (pseudo-)inverse so that parameters of very
    different magnitude (inertias ~1e-3 kg m², gains ~1 N m/V) do not mask each other; an
    entry with no more information than the round-off of a zero
    (:func:`~mb_estimation.pseudo_inverse.informed`) is undetermined and left out of it.
    """
    determined = informed(np.diag(information))
    information = np.where(np.outer(determined, determined), information, 0.0)
    safe = np.where(determined, np.sqrt(np.abs(np.diag(information))), 1.0)
    inverse, _, loading = scaled_pseudo_inverse(information, safe)
    return inverse, ~determined | (loading > LOADING_THRESHOLD)


def parameter_covariance(information: np.ndarray, middle: np.ndarray) -> np.ndarray:
    """``Λ = (TᵀT)⁻¹ TᵀĈT (TᵀT)⁻¹`` (3.31), ``inf`` on the variance of undetermined directions.

    The inverse is :func:`information_inverse`'s.
    """
    size = len(information)
    if size == 0:
        return np.zeros((0, 0))
    if not (np.all(np.isfinite(information)) and np.all(np.isfinite(middle))):
        return np.diag(np.full(size, np.inf))
    inverse, undetermined = information_inverse(information)
    return mark_undetermined(inverse @ middle @ inverse, undetermined)


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
