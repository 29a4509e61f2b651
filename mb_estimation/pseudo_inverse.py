"""Pseudo-inverse of a symmetric positive semidefinite matrix, scaled first (numpy only).

Shared by the estimator's parameter covariance (:mod:`mb_estimation.estimation.covariance`) and
the node's information fusion (:mod:`mb_estimation.online.fusion`), which must agree on what
"not determined" means. Scaling to unit diagonal first keeps entries of very different magnitude
(inertias ~1e-3 kg m², gains ~1 N m/V) from masking each other.
"""

from __future__ import annotations

import numpy as np

# Eigenvalues of the scaled matrix below this fraction of the largest one count as zero.
SINGULAR_THRESHOLD = 1e-12
# An entry whose squared loading on the dropped (null) directions exceeds this is not determined.
LOADING_THRESHOLD = 1e-6
# A diagonal entry of an information matrix below this fraction of the largest is the round-off
# of a zero: its Jacobian column is under 1e-15 of the largest, float64's resolution (an arm's
# inertia about an axis it never turns about: 1e-59 against 5e2). Scaled to unit diagonal, such
# noise would pose as information and could hide a determined neighbour.
ROUND_OFF_INFORMATION = 1e-30


def informed(diagonal: np.ndarray) -> np.ndarray:
    """Per entry of an information matrix's ``diagonal``: more than the round-off of a zero."""
    diagonal = np.asarray(diagonal, dtype=np.float64)
    largest = float(diagonal.max()) if diagonal.size else 0.0
    return diagonal > ROUND_OFF_INFORMATION * max(largest, 0.0)


def scaled_pseudo_inverse(matrix: np.ndarray, scale: np.ndarray):
    """Pseudo-inverse of ``matrix`` computed on ``D⁻¹ matrix D⁻¹``, ``D = diag(scale)``.

    Returns ``(inverse, eigenvalues, loading)``: the pseudo-inverse (in the original units), the
    eigenvalues of the scaled matrix, and per row the squared loading on the dropped directions
    (eigenvalues at or below ``SINGULAR_THRESHOLD`` times the largest).
    """
    outer = np.outer(scale, scale)
    scaled = matrix / outer
    eigenvalues, vectors = np.linalg.eigh(0.5 * (scaled + scaled.T))
    keep = eigenvalues > SINGULAR_THRESHOLD * max(float(eigenvalues.max()), 0.0)
    inverse = (vectors[:, keep] / eigenvalues[keep]) @ vectors[:, keep].T / outer
    loading = (vectors[:, ~keep] ** 2).sum(axis=1)
    return inverse, eigenvalues, loading


def mark_undetermined(covariance: np.ndarray, undetermined: np.ndarray) -> np.ndarray:
    """Mark entries the data does not determine, in place: ``inf`` variance, 0 elsewhere.

    The estimator's convention for an undetermined tangent entry (boolean mask ``undetermined``
    ``[p]``): ``inf`` on its diagonal and zeros elsewhere in its row and column of the
    covariance ``[p, p]``. Returns ``covariance``.
    """
    covariance[undetermined, :] = 0.0
    covariance[:, undetermined] = 0.0
    covariance[undetermined, undetermined] = np.inf
    return covariance


def std_text(std: float) -> str:
    """A standard deviation as printed: two digits, or ``not determined`` where it is marked so.

    Marked: infinite or NaN (:func:`mark_undetermined`), or negative (the messages' mark).
    """
    return f"{std:.2g}" if np.isfinite(std) and std >= 0 else "not determined"
