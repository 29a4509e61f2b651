"""The shooting fit's normal equations: the segments' start states eliminated, the box kept.

One linearisation of the multiple-shooting fit (:mod:`~mb_estimation.estimation.shooting`)
gives the Jacobian of every segment's residuals in its own start state and in the free values;
its normal equations serve every damped step (the Schur complement over the segments, the
parameters' box by the exact box QP), the covariance, and the estimate of the values' error
from the simulator's step (:func:`step_bias_of`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from mb_estimation.estimation.linear_algebra import solve_box_qp


@dataclass(frozen=True)
class NormalEquations:
    """Gauss–Newton normal equations of one linearisation, the segments' states apart.

    ``jac_state [S, R, n]`` (each segment's residuals in its own start state) and ``jac_values
    [S, R, p]`` (in the scaled free values); the products are formed once and serve every
    damping and every residual taken with this Jacobian.
    """

    jac_state: np.ndarray
    jac_values: np.ndarray
    h_ss: np.ndarray  # [S, n, n]
    h_sv: np.ndarray  # [S, n, p]
    h_vv: np.ndarray  # [p, p]

    @classmethod
    def of(cls, jac_state: np.ndarray, jac_values: np.ndarray) -> NormalEquations:
        return cls(jac_state, jac_values, np.einsum("sri,srj->sij", jac_state, jac_state),
                   np.einsum("sri,srj->sij", jac_state, jac_values),
                   np.einsum("sri,srj->ij", jac_values, jac_values))

    def step(self, damping: float, residual, starts, values, scale, lower, upper):
        """The damped step's new ``(starts, values)``, ``‖δ‖`` and the model's cost.

        In the scaled parameters (as the Jacobian). The segments eliminated (Schur
        complement); Marquardt's damping ``damping · diag``; the parameters kept in their box
        by the exact box QP. Raises ``LinAlgError`` when the damped system is singular.
        """
        g_s, g_v = self.gradient(residual)
        diagonal = np.einsum("sii->si", self.h_ss)
        largest = np.max(diagonal, axis=1, keepdims=True)
        # a start direction no residual depends on (a locked joint's) stays where it is
        flat = np.where(diagonal <= 1e-12 * largest, largest, 0.0)
        damped = self.h_ss + (damping * diagonal + flat)[:, :, None] * np.eye(diagonal.shape[-1])
        inverse = np.linalg.inv(damped)
        schur = (self.h_vv + damping * np.diag(self.parameter_curvature)
                 - np.einsum("sji,sjk,skl->il", self.h_sv, inverse, self.h_sv))
        reduced_gradient = g_v - np.einsum("sji,sjk,sk->i", self.h_sv, inverse, g_s)
        step = solve_box_qp(schur, reduced_gradient, np.minimum((lower - values) / scale, 0.0),
                            np.maximum((upper - values) / scale, 0.0))
        state_step = -np.einsum("sij,sj->si", inverse, g_s + self.h_sv @ step)
        model = (residual + np.einsum("sri,si->sr", self.jac_state, state_step)
                 + np.einsum("sri,i->sr", self.jac_values, step))
        return ((starts + state_step, np.clip(values + step * scale, lower, upper)),
                float(np.sqrt(np.sum(state_step ** 2) + np.sum(step ** 2))),
                float(np.sum(model ** 2)))

    def gradient(self, residual) -> tuple[np.ndarray, np.ndarray]:
        """``Jᵀr``: per segment in its start state ``[S, n]``, and in the values ``[p]``."""
        return (np.einsum("sri,sr->si", self.jac_state, residual),
                np.einsum("sri,sr->i", self.jac_values, residual))

    def gradient_norm(self, residual, values, scale, lower, upper) -> float:
        """``‖Jᵀr‖`` with the parameter part projected on the box (no push out of it)."""
        g_s, g_v = self.gradient(residual)
        g_v = np.where((values <= lower) & (g_v > 0) | (values >= upper) & (g_v < 0), 0.0, g_v)
        return float(np.sqrt(np.sum(g_s ** 2) + np.sum(g_v ** 2)))

    @functools.cached_property
    def parameter_curvature(self) -> np.ndarray:
        """Each parameter's curvature with the segment states free to follow (floored).

        The diagonal of :meth:`parameter_information`: what Marquardt's damping scales. The
        diagonal of ``JᵀJ`` would damp a parameter that the states partly mimic far too much.
        """
        diagonal = np.diag(self.parameter_information)
        return np.maximum(diagonal, 1e-12 * np.max(np.diag(self.h_vv), initial=0.0))

    @functools.cached_property
    def parameter_information(self) -> np.ndarray:
        """``JᵀJ`` of the (scaled) values with the segment states eliminated, undamped."""
        return self.h_vv - np.einsum("sji,sjk,skl->il", self.h_sv, np.linalg.pinv(self.h_ss),
                                     self.h_sv)


def step_bias_of(normal: NormalEquations, residual, finer_residual, starts, values, scale, lower,
               upper, names) -> dict[str, float] | None:
    """The fitted ``values``' error from the simulator's step, by Richardson extrapolation.

    The simulator is second order, so the residuals at step 0 are about ``r_h + (4/3)(r_{h/2}
    - r_h)`` (``residual`` at the fit's step h, ``finer_residual`` at h/2, both at the fitted
    point); one Gauss–Newton step on them from the fit (the segments' starts eliminated, the
    values kept in their box) moves the values to their step-0 estimate. Returns the values
    minus that estimate; None where the step cannot be taken.
    """
    limit = residual + (finer_residual - residual) * (4.0 / 3.0)
    try:
        (_, extrapolated), _, _ = normal.step(0.0, limit, starts, values, scale, lower, upper)
    except np.linalg.LinAlgError:
        return None
    return dict(zip(names, (values - extrapolated).tolist(), strict=True))
