"""Joint state and parameter estimation (paper §3), pure JAX/NumPy without I/O.

Residuals, structured Jacobian, Levenberg–Marquardt with a block-tridiagonal solver,
covariance; with no free parameters, the state-only estimation of cross-validation.
"""

from mb_estimation.estimation.result import EstimationResult, IterationRecord, RecordingEstimate
from mb_estimation.estimation.solver import EstimationProblem, SolverSettings, estimate

__all__ = ["EstimationProblem", "EstimationResult", "IterationRecord", "RecordingEstimate",
           "SolverSettings", "estimate"]
