"""Joint state and parameter estimation (paper §3), pure JAX/NumPy without I/O.

Residuals, structured Jacobian, Levenberg–Marquardt with a block-tridiagonal solver,
covariance; with no free parameters, the state-only estimation of cross-validation. Two
formulations (the paper's maximal coordinates, joint coordinates in the rigid limit) and the
consistent path over refined steps (:mod:`mb_estimation.estimation.consistent`).
"""

from mb_estimation.estimation.consistent import (
    KAPPA_REFERENCE_INERTIA,
    KAPPA_REFERENCE_STEP,
    fit_joint_level,
    kappa_per_step,
    refinement_steps,
    simulation_refit,
    with_refit,
)
from mb_estimation.estimation.result import (
    EstimationResult,
    FitStatus,
    IterationRecord,
    RecordingEstimate,
)
from mb_estimation.estimation.solver import (
    EstimationProblem,
    SolverSettings,
    compile_model,
    estimate,
)

__all__ = ["KAPPA_REFERENCE_INERTIA", "KAPPA_REFERENCE_STEP", "EstimationProblem",
           "EstimationResult", "FitStatus", "IterationRecord",
           "RecordingEstimate", "SolverSettings", "compile_model", "estimate",
           "fit_joint_level", "kappa_per_step", "refinement_steps", "simulation_refit",
           "with_refit"]
