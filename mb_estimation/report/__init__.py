"""HTML calibration report: parameters, correlations, convergence and fits per recording."""

from mb_estimation.report.figures import correlation_matrix
from mb_estimation.report.html import write_report

__all__ = ["correlation_matrix", "write_report"]
