"""Do the recordings of one calibration agree? Each one's own fit against the others'.

A calibration of several recordings fits one parameter set to all of them. Where the model
lacks something that differs between them (an operating point, a term the driver has), each
recording asks for other values, and the pooled std — computed as if they all told the same
story — hides it. Each recording's own estimate is read from its share of the pooled fit's
normal equations (:class:`RecordingShare`): one Gauss–Newton step from the pooled values on its
residuals alone, ``θ_r = θ̂ - (T_rᵀT_r)⁻¹ T_rᵀ r_r`` (a score test at the pooled values: no
refit). Per scalar parameter, the recordings that determine it are compared by Cochran's Q,

    Q = Σ_r (θ_r - θ̄)² / σ_r²,   θ̄ = Σ_r θ_r σ_r⁻² / Σ_r σ_r⁻²,

χ² with ``n - 1`` degrees of freedom where they agree. Where they do not, the pooled std is
scaled by ``√(Q / (n - 1))`` (the Particle Data Group's scale factor for inconsistent
measurements): the spread between the recordings becomes part of the std. The combinations the
pooled fit determines (``b1/K`` where K alone is open) are compared the same way
(:func:`ratio_agreements`), each recording's own combination to first order.

Pure NumPy and SciPy: no I/O, no JAX.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from mb_estimation.estimation.covariance import information_inverse, parameter_covariance
from mb_estimation.estimation.identifiability import NOT_DETERMINED_RELATIVE_STD

#: Recordings disagree on a parameter when Cochran's Q has a probability below this where
#: they agree (of the parameters compared on a rig the model follows, one in a thousand is
#: called inconsistent).
DISAGREEMENT_P = 1e-3


@dataclass(frozen=True)
class RecordingShare:
    """One recording's part of a fit's normal equations at the fitted values.

    In the tangent order of the fit's free parameters, in their units: ``information`` its
    ``TᵀT`` ``[p, p]``; ``middle`` its ``TᵀĈT`` (independent residuals); ``correlated_middle``
    the same with the residuals' correlation in time
    (:func:`~mb_estimation.estimation.covariance.correlated_middle`); ``score`` its
    ``Σ_k T_kᵀ r_k`` ``[p]`` (the recordings' scores add up to zero at the fitted values).
    """

    information: np.ndarray
    middle: np.ndarray
    correlated_middle: np.ndarray
    score: np.ndarray

    def own_fit(self, correlated: bool) -> tuple[np.ndarray, np.ndarray]:
        """This recording's own estimate, and that estimate's covariance.

        The estimate as a change of the pooled values ``[p]``; the covariance ``[p, p]``
        (``inf`` where it determines nothing; ``correlated``: with its residuals' correlation
        in time).
        """
        inverse, undetermined = information_inverse(self.information)
        change = np.where(undetermined, 0.0, -(inverse @ self.score))
        middle = self.correlated_middle if correlated else self.middle
        return change, parameter_covariance(self.information, middle)


@dataclass(frozen=True)
class Agreement:
    """How the recordings' own fits of one parameter agree (Cochran's Q).

    ``recordings``: those that determine it, each with its own ``values`` and ``std``;
    ``chi_square``: Q; ``dof``: their number less one.
    """

    name: str
    recordings: tuple[str, ...]
    values: tuple[float, ...]
    std: tuple[float, ...]
    chi_square: float
    dof: int

    @property
    def p_value(self) -> float:
        """The probability of a Q this large where the recordings agree."""
        return float(chi2.sf(self.chi_square, self.dof))

    @property
    def agree(self) -> bool:
        return self.p_value >= DISAGREEMENT_P

    @property
    def scale(self) -> float:
        """``√(Q / dof)``: what the pooled std is scaled by where they disagree (else 1)."""
        return 1.0 if self.agree else float(np.sqrt(self.chi_square / self.dof))

    def __str__(self) -> str:
        each = ", ".join(f"{value:.4g} ± {std:.2g} ({name})" for name, value, std in
                         zip(self.recordings, self.values, self.std, strict=True))
        return (f"{self.name}: {each}; χ² = {self.chi_square:.3g} on {self.dof} "
                f"(p = {self.p_value:.2g})")


def _compared(name: str, taking_part: Sequence[tuple[str, float, float]]) -> Agreement:
    """Cochran's Q of ``(recording, own value, own std)`` rows (two or more)."""
    recordings, estimates, deviations = (tuple(column) for column in zip(*taking_part,
                                                                         strict=True))
    weights = 1.0 / np.square(deviations)
    mean = float(np.sum(weights * estimates) / np.sum(weights))
    return Agreement(name, recordings, estimates, deviations,
                     float(np.sum(weights * np.square(np.subtract(estimates, mean)))),
                     len(taking_part) - 1)


def _determines(value: float, std: float) -> bool:
    """Whether a recording's own fit determines a value: as the identifiability reads it."""
    return bool(np.isfinite(std) and 0.0 < std <= NOT_DETERMINED_RELATIVE_STD * abs(value))


def agreements(values: Mapping[str, float], rows: Mapping[str, int], names: Sequence[str],
               shares: Sequence[RecordingShare], correlated: bool,
               silent: Sequence[Collection[str]] | None = None,
               bounds: Mapping[str, tuple[float, float]] | None = None
               ) -> tuple[Agreement, ...]:
    """Per scalar parameter, the :class:`Agreement` of the recordings that determine it.

    ``values``: the pooled ones; ``rows``: each one's tangent row; ``names``, ``shares``: the
    recordings'. None for a parameter fewer than two recordings determine. ``correlated``:
    compare with the std that include each recording's residuals' correlation in time (the
    calibration's std do, where its model does not follow the data). ``silent``: per
    recording, the parameters it says nothing of whatever its own fit reads (those of a joint
    it holds still: what its held-joint residuals carry is the holding hand's, not the rig's).
    ``bounds``: per parameter ``(lower, upper)``: an own fit outside them determines nothing
    (its one step from the pooled values left the values the parameter can take, so the
    linearisation it reads holds no longer: a recording pulling on what it cannot separate).
    """
    own = [share.own_fit(correlated) for share in shares]
    silent = [frozenset()] * len(names) if silent is None else silent
    found = []
    for name, value in values.items():
        row = rows[name]
        lower, upper = (bounds or {}).get(name, (-np.inf, np.inf))
        taking_part = []
        for recording, (change, covariance), quiet in zip(names, own, silent, strict=True):
            if name in quiet:
                continue
            estimate, std = value + float(change[row]), float(np.sqrt(covariance[row, row]))
            if lower <= estimate <= upper and _determines(estimate, std):
                taking_part.append((recording, estimate, std))
        if len(taking_part) >= 2:
            found.append(_compared(name, taking_part))
    return tuple(found)


def ratio_agreements(ratios: Sequence[tuple[str, str, str, float]],
                     values: Mapping[str, float], rows: Mapping[str, int],
                     names: Sequence[str], shares: Sequence[RecordingShare], correlated: bool,
                     silent: Sequence[Collection[str]] | None = None
                     ) -> tuple[Agreement, ...]:
    """As :func:`agreements`, for combinations ``numerator / denominator**power``.

    ``ratios``: ``(name, numerator, denominator, power)``; ``values``: the pooled values as
    the combination reads them (an inertia with the fixed rest it adds to). Each recording's
    own combination and its std from its own fit (first order: the relative variance
    ``V_nn/n² + p² V_dd/d² - 2p V_nd/(n d)``).
    """
    own = [share.own_fit(correlated) for share in shares]
    silent = [frozenset()] * len(names) if silent is None else silent
    found = []
    for name, numerator, denominator, power in ratios:
        top, bottom = rows[numerator], rows[denominator]
        taking_part = []
        for recording, (change, covariance), quiet in zip(names, own, silent, strict=True):
            if numerator in quiet or denominator in quiet:
                continue
            upper = values[numerator] + float(change[top])
            lower = values[denominator] + float(change[bottom])
            if upper <= 0.0 or lower <= 0.0:
                continue
            ratio = upper / lower**power
            relative = (covariance[top, top] / upper**2
                        + power**2 * covariance[bottom, bottom] / lower**2
                        - 2.0 * power * covariance[top, bottom] / (upper * lower))
            std = ratio * float(np.sqrt(max(relative, 0.0)))
            if _determines(ratio, std):
                taking_part.append((recording, ratio, std))
        if len(taking_part) >= 2:
            found.append(_compared(name, taking_part))
    return tuple(found)
