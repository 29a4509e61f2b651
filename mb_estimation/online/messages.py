"""What the node's messages hold, independent of the transport.

``~/parameters`` and ``~/fused_parameters`` are std_msgs/Float64MultiArray holding a 2×n
row-major matrix: row 0 the values, row 1 the standard deviations; ``layout.dim[0]`` =
``{label "value,std", size 2, stride 2n}``, ``layout.dim[1]`` = ``{label: the n names joined by
commas, size n, stride n}``. A quaternion parameter (``tilt``) appears as its rotation vector
``tilt_rx,tilt_ry,tilt_rz`` [rad] with the standard deviations of its tangent.
``~/parameter_rates`` is the same matrix of the fused values' rates [unit/h] and their std,
``layout.dim[0].label`` ``"rate_per_hour,std"``.
"""

from __future__ import annotations

import numpy as np

from mb_estimation.lie import quat_boxminus
from mb_estimation.message_types import NOT_DETERMINED
from mb_estimation.online.drift import DriftingEstimate
from mb_estimation.online.fusion import ParameterEstimate

DIAGNOSTIC_OK, DIAGNOSTIC_WARN, DIAGNOSTIC_ERROR = 0, 1, 2
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def parameter_matrix(estimate: ParameterEstimate) -> tuple[tuple[str, ...], np.ndarray]:
    """Labels ``[n]`` and the ``[2, n]`` matrix (values; standard deviations) of an estimate.

    A quaternion's values are its rotation vector [rad] (the shorter rotation). A standard
    deviation the data does not determine (``inf``) is given as ``-1``: nothing non-finite is
    published.
    """
    values, stds = [], []
    std = estimate.std
    for name in estimate.names:
        value = np.asarray(estimate.values[name], dtype=np.float64).ravel()
        spread = np.asarray(std[name], dtype=np.float64).ravel()
        if value.size == 4:
            values += list(quat_boxminus(value, IDENTITY))
        else:
            values.append(float(value[0]))
        stds += [float(s) if np.isfinite(s) else NOT_DETERMINED for s in spread]
    return estimate.labels, np.array([values, stds], dtype=np.float64)


def rate_matrix(drifting: DriftingEstimate) -> tuple[tuple[str, ...], np.ndarray]:
    """Labels ``[n]`` and the ``[2, n]`` matrix (rates [unit/h]; their std, −1: not determined).

    One column per tangent entry, labelled as :func:`parameter_matrix` labels them.
    """
    std = drifting.rate_std
    return drifting.estimate.labels, np.array(
        [drifting.rates, np.where(np.isfinite(std), std, NOT_DETERMINED)], dtype=np.float64)


def multiarray_layout(labels: tuple[str, ...], rows: str = "value,std"
                      ) -> list[tuple[str, int, int]]:
    """``(label, size, stride)`` of the two dimensions of a parameter (or rate) matrix."""
    count = len(labels)
    return [(rows, 2, 2 * count), (",".join(labels), count, count)]


def diagnostic_level(snapshot: dict) -> tuple[int, str]:
    """Level and one-line message of the node's diagnostic status."""
    last = snapshot.get("last_window", "")
    text = (f"{snapshot['windows_accepted']} of {snapshot['windows_done']} windows accepted, "
            f"{snapshot['windows_dropped']} dropped")
    if snapshot.get("warming_up"):
        return DIAGNOSTIC_OK, f"compiling the solver (warm-up); {text}"
    if "estimator failed" in last:
        return DIAGNOSTIC_ERROR, f"{text}; last: {last}"
    drifting = snapshot.get("drift_alarm")
    if drifting:
        return DIAGNOSTIC_WARN, f"drifting: {drifting}; {text}"
    if snapshot.get("disagreement"):
        return DIAGNOSTIC_WARN, f"{text}; last accepted: {snapshot['disagreement']}"
    if last and not last.endswith("accepted"):
        return DIAGNOSTIC_WARN, f"{text}; last: {last}"
    return DIAGNOSTIC_OK, text


#: How a window's reason starts when it was accepted and then not fused (``windows_stale``).
DROPPED = "dropped: "


def window_message(outcome) -> str:
    """One line on a finished window (a :class:`~.windows.WindowOutcome`): verdict and values."""
    dropped = outcome.reason.startswith(DROPPED)
    verdict = "accepted" if outcome.accepted else "dropped" if dropped else "rejected"
    head = f"window {outcome.index} {verdict} after {outcome.elapsed_s:.2f} s"
    result = outcome.result
    if result is not None:
        head += f" ({result.iterations} iterations, {result.status})"
    if not outcome.accepted:
        return f"{head}: {outcome.reason.removeprefix(DROPPED)}"
    values = []
    for name in result.free:
        value = np.asarray(result.parameters[name], dtype=np.float64).ravel()
        spread = np.asarray(result.std[name], dtype=np.float64).ravel()
        if value.size == 1:  # as the topics: no std where the window does not determine it
            values.append(f"{name} {value[0]:.5g} ± {spread[0]:.2g}" if np.isfinite(spread[0])
                          else f"{name} {value[0]:.5g} (not determined)")
    if not values:
        return head
    model_error = (" (std with the model's error: the residuals stay correlated in time)"
                   if result.std_include_model_error else "")
    return f"{head}: {', '.join(values)}{model_error}"


def warm_up_message(snapshot: dict) -> str | None:
    """What a node logs once its start-up compile is done (None before it, or without one)."""
    if "warm_up_s" not in snapshot:
        return None
    text = f"solver compiled in {snapshot['warm_up_s']:.1f} s (warm-up)"
    error = snapshot.get("warm_up_error")
    return text if error is None else f"{text} (the synthetic warm-up window: {error})"


def diagnostic_values(snapshot: dict) -> list[tuple[str, str]]:
    """The snapshot as key/value strings (floats with 6 significant digits)."""
    pairs = []
    for key in sorted(snapshot):
        value = snapshot[key]
        pairs.append((key, f"{value:.6g}" if isinstance(value, float) else str(value)))
    return pairs


def read_parameter_matrix(labels: str, data) -> dict[str, tuple[float, float]]:
    """``{name: (value, std)}`` of a parameter message: the reading side of parameter_matrix.

    ``labels`` is the message's ``layout.dim[1].label``, ``data`` its 2n numbers. A standard
    deviation of ``-1`` (not determined by the data) is returned as ``inf``.
    """
    names = labels.split(",")
    matrix = np.reshape(np.asarray(data, dtype=np.float64), (2, len(names)))
    return {name: (float(matrix[0, i]), float(matrix[1, i]) if matrix[1, i] >= 0 else np.inf)
            for i, name in enumerate(names)}
