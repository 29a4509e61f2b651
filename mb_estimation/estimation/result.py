"""The result of one estimation: everything a caller needs, nothing internal."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mb_estimation.estimation.agreement import RecordingShare
    from mb_estimation.estimation.covariance import CorrelatedCovariance


class FitStatus(str, enum.Enum):
    """How a solve stopped; compares equal to (and prints as) its lower-case name."""

    GRADIENT = "gradient"  # converged: the projected gradient below its tolerance
    STEP = "step"  # converged: the step below its tolerance
    COST = "cost"  # converged: a step from a fresh linearisation gains below its tolerance
    NO_PROGRESS = "no_progress"  # no damping gives a decrease
    MAX_ITERATIONS = "max_iterations"  # the iteration limit, before any tolerance
    TIME_LIMIT = "time_limit"  # the solve-time limit, before any tolerance

    def __str__(self) -> str:
        return self.value

    @property
    def converged(self) -> bool:
        return self in (FitStatus.GRADIENT, FitStatus.STEP, FitStatus.COST)

    @property
    def description(self) -> str:
        """What the status means, in words (the start of a result's message)."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    FitStatus.GRADIENT: "converged: gradient norm below tolerance",
    FitStatus.STEP: "converged: step below tolerance",
    FitStatus.COST: "converged: a step from a fresh linearisation lowers the cost below its "
                    "tolerance",
    FitStatus.NO_PROGRESS: "stopped: no damping gives a decrease (a local minimum to working "
                           "precision, or a poorly scaled problem)",
    FitStatus.MAX_ITERATIONS: "stopped at the iteration limit",  # before a tolerance was met
    FitStatus.TIME_LIMIT: "stopped at the time limit",
}


@dataclass(frozen=True)
class IterationRecord:
    """One accepted Levenberg–Marquardt iterate (iteration 0 is the initial guess).

    ``cost`` and its parts are mean squared errors per time step; ``parameters`` holds the
    free parameter values; ``damping`` is α after the iteration; ``elapsed_s`` is wall time
    since the solve started (compilation included); ``dt`` is the step of the fit [s].
    """

    iteration: int
    cost: float
    observation_mse: float
    impulse_mse: float
    parameters: dict[str, np.ndarray]
    damping: float
    gradient_norm: float
    step_norm: float
    elapsed_s: float
    dt: float = float("nan")


@dataclass(frozen=True)
class RecordingEstimate:
    """Estimated (shadow) states of one recording on its grid.

    ``time_s [n]``; ``joint_angles [n, n_joints]`` [rad] (multi-turn) and ``joint_rates``
    [rad/s] of the estimated states; body states as ``position [n, nb, 3]`` [m],
    ``orientation [n, nb, 4]``, ``linear_velocity`` [m/s], ``angular_velocity`` [rad/s];
    ``observation_mse``/``impulse_mse`` of this recording.
    """

    name: str
    time_s: np.ndarray
    joint_angles: np.ndarray
    joint_rates: np.ndarray
    position: np.ndarray
    orientation: np.ndarray
    linear_velocity: np.ndarray
    angular_velocity: np.ndarray
    observation_mse: float
    impulse_mse: float

    @property
    def mse(self) -> float:
        return self.observation_mse + self.impulse_mse


@dataclass(frozen=True)
class EstimationResult:
    """Parameters, standard deviations, states, costs, history, status and timings.

    Attributes:
        parameters: every model parameter as used (fixed and estimated), by name.
        free: the estimated parameters' names, in order.
        std: standard deviation per free parameter in the parameter's unit; ``inf`` where
            the data does not determine it. A quaternion (``tilt``) has three [rad], in
            :func:`~mb_estimation.estimation.covariance.gravity_frame`: about a horizontal
            axis, about gravity (``inf``: unobservable) and about the other horizontal axis.
        excited: per free parameter, whether the data determines it (see ``estimate``).
        covariance: ``[p, p]`` linearised covariance of ``δχ`` (tangent order of ``free``; a
            quaternion's entries are its world-frame rotation vector).
        recordings: the estimated states per recording.
        cost: final mean squared error per time step, ``observation_mse + impulse_mse``.
        iterations: accepted LM iterations (summed over the levels of the consistent path).
        status: how it stopped (:class:`FitStatus`); ``converged`` when a tolerance was met.
        message: one human-readable line.
        history: one :class:`IterationRecord` per accepted iterate, starting with the guess.
        compile_time_s / solve_time_s: compilation (first use of a problem shape) and the rest.
        correlated: ``covariance`` and ``std`` again with the residuals' correlation in time
            (what a model error moves the values by); the calibration reports them where the
            model does not follow the data (None: not computed).
        std_include_model_error: whether ``std`` and ``covariance`` include the model's error
            (set where the model does not follow the data:
            :func:`~mb_estimation.assess.with_model_error`).
        shares: per recording, its share of the fit's normal equations at the fitted values
            (:class:`~mb_estimation.estimation.agreement.RecordingShare`): how far each
            recording's own fit would go from the pooled values.
    """

    parameters: dict[str, np.ndarray]
    free: tuple[str, ...]
    std: dict[str, np.ndarray]
    excited: dict[str, bool]
    covariance: np.ndarray
    recordings: tuple[RecordingEstimate, ...]
    cost: float
    observation_mse: float
    impulse_mse: float
    iterations: int
    status: FitStatus
    message: str
    history: tuple[IterationRecord, ...] = field(repr=False)
    compile_time_s: float = 0.0
    solve_time_s: float = 0.0
    correlated: CorrelatedCovariance | None = None
    shares: tuple[RecordingShare, ...] = ()
    std_include_model_error: bool = False

    @property
    def converged(self) -> bool:
        return FitStatus(self.status).converged

    @property
    def tangent_rows(self) -> dict[str, np.ndarray]:
        """Each free parameter's rows in the covariance: one per scalar, three per quaternion."""
        rows, start = {}, 0
        for name in self.free:
            size = 3 if np.size(self.parameters[name]) == 4 else 1
            rows[name] = np.arange(start, start + size)
            start += size
        return rows

    @property
    def wall_time_s(self) -> float:
        return self.compile_time_s + self.solve_time_s

    @property
    def num_steps(self) -> int:
        return sum(len(r.time_s) for r in self.recordings)
