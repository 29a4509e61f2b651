"""Drift of the free parameters over time: each one a value and a rate, fused window by window.

A rig wears: a bearing's friction creeps up, a driver's gain sags as it heats. The node's
windows each estimate the free parameters (a :class:`~.fusion.ParameterEstimate`, value and
covariance in tangent order); :func:`track` fuses them with a Kalman filter whose state per
tangent entry is the value ``x`` and its rate ``r`` [unit/h] (the filter of continuous bias
estimation that carries a bias and its drift):

    x(t + Δ) = x(t) ⊞ Δ r(t),     r(t + Δ) = r(t) + w,     w ~ N(0, q² Δ)

with ``Δ`` the time between two windows [h] and ``q`` the rate's random walk [unit/h per √h]:
after an hour, a rate is known no better than ``q`` without new windows. The rate noise
gives the process covariance per entry ``q² [[Δ³/3, Δ²/2], [Δ²/2, Δ]]`` (white noise on the
rate, integrated into the value). Each window's estimate measures the value.

Before the first window each rate is ``0 ± p`` (``p``: the rate prior [unit/h]). Without a
prior the first two windows would fix a line through both (the fused value the second
window's, the rate their difference); with it, windows close in time are averaged until the
data say the rate is not zero. The prior is kept apart from ``q``: a rig may already be
drifting when the node starts, so ``p`` is wide, while ``q`` sets how long the filter
remembers (a small ``q``, a long memory: slow wear seen over hours).

The filter runs in information form, as :func:`.fusion.fuse` does, so that what the data do
not determine stays exactly undetermined (zero information, never a large made-up variance):
a value no window determined keeps no information. The prediction of the information ``Y`` is
``(F Y⁻¹ Fᵀ + Q)⁻¹ = (I + M Q)⁻¹ M`` with ``M = F⁻ᵀ Y F⁻¹``, exact also for a singular ``Y``;
the update adds the window's information to the value block and moves the state by
``Y⁺ Hᵀ Λ (x_window ⊟ x⁻)`` (``⁺``: the pseudo-inverse). For scalars this is the linear Kalman
filter; for a quaternion (``tilt``) it is linearised at the predicted value, as the fusion is.

Alarm: a rate further from zero than ``alarm_std`` of its std in every window for at least
``alarm_s`` seconds of the windows' stamps. A single window's excursion does not raise it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mb_estimation.online.fusion import (
    ParameterEstimate,
    check_numbers,
    covariance_from_information,
    information_pseudo_inverse,
    read_estimate_document,
    save_estimate,
    tangent_difference,
    with_step,
)
from mb_estimation.pseudo_inverse import mark_undetermined, std_text

__all__ = ["HOUR_S", "DriftSettings", "DriftingEstimate", "alarms", "disagreement",
           "drift_values", "load_drifting", "per_tangent_entry", "save_drifting", "track"]

HOUR_S = 3600.0


@dataclass(frozen=True)
class DriftSettings:
    """How the rates may change, and when a rate raises the drift alarm.

    ``rate_noise`` [p], tangent order: each rate's random walk [unit/h per √h], positive.
    ``rate_prior`` [p]: each rate's std before the first window [unit/h], positive.
    ``alarm_std``: a rate this many std from zero is exceeding; how long it must exceed to
    raise the alarm is :func:`alarms`' to say.
    """

    rate_noise: np.ndarray
    rate_prior: np.ndarray
    alarm_std: float = 3.0

    def __post_init__(self):
        for field in ("rate_noise", "rate_prior"):
            values = np.array(getattr(self, field), dtype=np.float64).reshape(-1)
            if not np.all(np.isfinite(values) & (values > 0.0)):
                raise ValueError(f"{field} must be positive and finite, got {values}")
            values.flags.writeable = False
            object.__setattr__(self, field, values)
        if len(self.rate_prior) != len(self.rate_noise):
            raise ValueError(f"{len(self.rate_prior)} rate priors for {len(self.rate_noise)} "
                             f"rate noises")
        if not (np.isfinite(self.alarm_std) and self.alarm_std > 0.0):
            raise ValueError(f"alarm_std must be positive, got {self.alarm_std!r}")


@dataclass(frozen=True, eq=False)
class DriftingEstimate:
    """The fused values and their rates after some windows.

    ``estimate``: the values, their (marginal) covariance in tangent order, the windows fused:
    what the node publishes as its fused estimate. ``rates`` [p] [unit/h] in tangent order;
    ``information`` [2p, 2p] of (value tangent, rates), in the tangent at ``estimate.values``;
    ``time_s``: the last window's end [s] (stamp time; NaN: not known, as in a state file
    written before rates were tracked); ``exceeding_since_s`` [p]: since when each rate has been
    beyond the alarm threshold (NaN: it is not).
    """

    estimate: ParameterEstimate
    rates: np.ndarray
    information: np.ndarray
    time_s: float
    exceeding_since_s: np.ndarray

    def __post_init__(self):
        size = len(self.estimate.covariance)
        for field, shape in (("rates", (size,)), ("information", (2 * size, 2 * size)),
                             ("exceeding_since_s", (size,))):
            array = np.array(getattr(self, field), dtype=np.float64)
            if array.shape != shape:
                raise ValueError(f"{field} must have shape {shape}, got {array.shape}")
            array.flags.writeable = False
            object.__setattr__(self, field, array)
        object.__setattr__(self, "time_s", float(self.time_s))

    @functools.cached_property
    def rate_covariance(self) -> np.ndarray:
        """Covariance of the rates [p, p] [(unit/h)²]; ``inf`` where a rate is not determined."""
        size = len(self.rates)
        return covariance_from_information(self.information)[size:, size:]

    @property
    def rate_std(self) -> np.ndarray:
        """Standard deviation of each rate [unit/h]; ``inf`` where not determined."""
        return np.sqrt(np.clip(np.diagonal(self.rate_covariance), 0.0, None))


def per_tangent_entry(names, kinds, scales: Sequence[Mapping[str, np.ndarray]], *,
                      relative: float, absolute: Mapping[str, float] | None = None
                      ) -> np.ndarray:
    """A rate setting per tangent entry (rate noise [unit/h per √h], prior [unit/h]).

    ``absolute[name]`` where given; else ``relative`` times the parameter's scale: the
    magnitude of its value in the first of ``scales`` where that is not 0 (the node passes
    its fused estimate, the window's, the config's: a start value far off does not set the
    scale), else 1; and 1 rad for a quaternion's tangent (a tilt's rate is in rad/h).
    """
    absolute = absolute or {}
    noise = []
    for name, kind in zip(names, kinds, strict=True):
        if name in absolute:
            noise += [float(absolute[name])] * (3 if kind == "quaternion" else 1)
        elif kind == "quaternion":
            noise += [relative] * 3
        else:
            magnitudes = [abs(float(np.ravel(values[name])[0])) for values in scales
                          if name in values]
            noise.append(relative * next((m for m in magnitudes if m > 0.0), 1.0))
    return np.array(noise, dtype=np.float64)


def _process_covariance(noise: np.ndarray, hours: float) -> np.ndarray:
    """``Q`` [2p, 2p] of (values, rates) over ``hours``: ``q² [[Δ³/3, Δ²/2], [Δ²/2, Δ]]``."""
    size = len(noise)
    q2 = noise**2
    covariance = np.zeros((2 * size, 2 * size))
    index = np.arange(size)
    covariance[index, index] = q2 * hours**3 / 3.0
    covariance[index, size + index] = covariance[size + index, index] = q2 * hours**2 / 2.0
    covariance[size + index, size + index] = q2 * hours
    return covariance


def predicted_information(information: np.ndarray, hours: float,
                          noise: np.ndarray) -> np.ndarray:
    """The information of (values, rates) ``hours`` later: ``(I + M Q)⁻¹ M``, ``M = F⁻ᵀ Y F⁻¹``.

    ``F = [[I, Δ I], [0, I]]``, ``Q`` from :func:`_process_covariance`. Solved scaled by
    ``D = sqrt(diag Q)`` (``(I + M̃ Q̃)⁻¹ M̃`` with ``M̃ = D M D``, ``Q̃ = D⁻¹ Q D⁻¹``), where
    ``I + M̃ Q̃`` is close to ``I`` whenever the state is known worse than the process moves
    in one step. Zero information stays zero.
    """
    size = len(noise)
    inverse_transition = np.eye(2 * size)
    inverse_transition[:size, size:] = -hours * np.eye(size)
    moved = inverse_transition.T @ information @ inverse_transition
    if hours <= 0.0:
        return 0.5 * (moved + moved.T)
    process = _process_covariance(noise, hours)
    scale = np.sqrt(np.diagonal(process))
    outer = np.outer(scale, scale)
    scaled_moved, scaled_process = moved * outer, process / outer
    predicted = np.linalg.solve(np.eye(2 * size) + scaled_moved @ scaled_process, scaled_moved)
    predicted = predicted / outer
    return 0.5 * (predicted + predicted.T)


def _first(window: ParameterEstimate, time_s: float, prior: np.ndarray) -> DriftingEstimate:
    """The window's values, each rate at its prior ``0 ± p``."""
    size = len(window.covariance)
    information = np.zeros((2 * size, 2 * size))
    information[:size, :size] = window.information
    information[size:, size:] = np.diag(1.0 / prior**2)
    covariance = covariance_from_information(information)
    estimate = ParameterEstimate(window.names, dict(window.values), covariance[:size, :size],
                                 window.windows)
    return DriftingEstimate(estimate, np.zeros(size), information, time_s,
                            np.full(size, np.nan))


def track(previous: DriftingEstimate | None, window: ParameterEstimate, time_s: float,
          settings: DriftSettings) -> DriftingEstimate:
    """The values and rates after one more window, estimated up to ``time_s`` [s].

    Predicts the previous state to ``time_s`` (the values moved by their rates, the
    information widened by the rate noise), adds the window's information to the values, and
    updates the alarm bookkeeping. Time going back (a replayed recording, a restarted clock) is
    not time that passed: nothing is predicted and the exceedance clocks move with the stamps.
    With ``previous=None`` the values are the window's and the rates at their prior.

    Raises ValueError when the names or kinds differ from the previous windows', when the
    settings' rate noise is not one per tangent entry, or when the window has a non-finite
    value, a non-unit quaternion or NaN in its covariance.
    """
    check_numbers(window, "new")
    size = len(window.covariance)
    if len(settings.rate_noise) != size:
        raise ValueError(f"{len(settings.rate_noise)} rate noises for {size} tangent entries")
    if previous is None:
        return _first(window, time_s, settings.rate_prior)
    if np.isnan(previous.time_s):  # a state file of values only: its rates start at the prior
        previous = _first(previous.estimate, time_s, settings.rate_prior)
    previous_estimate = previous.estimate
    if previous_estimate.names != window.names or previous_estimate.kinds != window.kinds:
        raise ValueError(f"parameters differ: tracked {list(previous_estimate.names)}, the new "
                         f"window has {list(window.names)}")
    elapsed_s = time_s - previous.time_s
    since = previous.exceeding_since_s + min(elapsed_s, 0.0)
    predicted, information = _predicted(previous, time_s, settings)

    window_information = window.information
    information[:size, :size] += window_information
    information = 0.5 * (information + information.T)
    measured = np.concatenate([window_information @ tangent_difference(predicted, window),
                               np.zeros(size)])
    inverse, determined = information_pseudo_inverse(information)
    step = inverse @ measured
    values = with_step(predicted, step[:size])
    if not all(np.all(np.isfinite(v)) for v in values.values()):  # cannot happen; guard anyway
        raise ValueError("drift tracking produced a non-finite value")
    covariance = mark_undetermined(inverse, ~determined)  # covariance_from_information's
    covariance = 0.5 * (covariance + covariance.T)
    rates = previous.rates + step[size:]
    rate_std = np.sqrt(np.clip(np.diagonal(covariance)[size:], 0.0, None))
    estimate = ParameterEstimate(window.names, values, covariance[:size, :size],
                                 previous_estimate.windows + window.windows)
    return DriftingEstimate(estimate, rates, information, time_s, _exceeding_since(
        rates, rate_std, since, time_s, settings.alarm_std))


def _predicted(previous: DriftingEstimate, time_s: float, settings: DriftSettings
               ) -> tuple[ParameterEstimate, np.ndarray]:
    """``previous``'s values moved by their rates to ``time_s`` [s], and its information then."""
    hours = max(time_s - previous.time_s, 0.0) / HOUR_S
    estimate = previous.estimate
    values = with_step(estimate, hours * previous.rates)
    return (ParameterEstimate(estimate.names, values, estimate.covariance),
            predicted_information(previous.information, hours, settings.rate_noise))


def disagreement(previous: DriftingEstimate, window: ParameterEstimate, time_s: float,
                 settings: DriftSettings) -> tuple[float, int]:
    """How far a window's values lie from the fused ones predicted to ``time_s``: ``(χ², dof)``.

    ``χ² = dᵀ (P_fused + P_window)⁺ d`` over the tangent entries both determine (``d``: the
    window's values less the prediction; ``P_fused`` from the predicted information, so a
    tracked drift is not a disagreement); χ² on ``dof`` where the rig is the one the fused
    windows saw and each window's std hold. ``(0, 0)`` with nothing to compare (before a
    timed estimate).
    """
    if np.isnan(previous.time_s):
        return 0.0, 0
    size = len(window.covariance)
    predicted, information = _predicted(previous, time_s, settings)
    fused = covariance_from_information(information)[:size, :size]
    both = np.isfinite(np.diagonal(fused)) & np.isfinite(np.diagonal(window.covariance))
    if not both.any():
        return 0.0, 0
    spread = fused[np.ix_(both, both)] + window.covariance[np.ix_(both, both)]
    inverse, determined = information_pseudo_inverse(0.5 * (spread + spread.T))
    difference = tangent_difference(predicted, window)[both]
    return float(difference @ inverse @ difference), int(np.sum(determined))


def _exceeding_since(rates: np.ndarray, std: np.ndarray, since: np.ndarray, time_s: float,
                     alarm_std: float) -> np.ndarray:
    """Per rate: since when it is beyond ``alarm_std`` std (its first such window), else NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        exceeding = np.isfinite(std) & (np.abs(rates) > alarm_std * std)
    return np.where(exceeding, np.where(np.isnan(since), time_s, since), np.nan)


def drift_values(drifting: DriftingEstimate, alarm_s: float) -> dict[str, str]:
    """The drift as diagnostics.

    ``drift_alarm`` (the labels alarming, comma-separated) and ``rate_per_hour.<label>``
    (``"rate ± std"``, or ``not determined``) per tangent entry.
    """
    values = {"drift_alarm": ",".join(alarms(drifting, alarm_s))}
    for label, rate, std in zip(drifting.estimate.labels, drifting.rates,
                                drifting.rate_std, strict=True):
        spread = std_text(std)
        values[f"rate_per_hour.{label}"] = f"{rate:.4g} ± {spread}" if np.isfinite(std) else spread
    return values


def alarms(drifting: DriftingEstimate, alarm_s: float) -> tuple[str, ...]:
    """The labels of the rates that have exceeded their threshold for ``alarm_s`` [s] or more."""
    held = drifting.time_s - drifting.exceeding_since_s
    with np.errstate(invalid="ignore"):
        alarming = ~np.isnan(held) & (held >= alarm_s)
    return tuple(label for label, on in zip(drifting.estimate.labels, alarming,
                                            strict=True) if on)


# --- persistence --------------------------------------------------------------------------------


def save_drifting(path: Path, drifting: DriftingEstimate) -> None:
    """Write the tracked estimate to ``path`` atomically, as :func:`.fusion.save_estimate` does.

    The file is a fused estimate's (a reader of those reads the values and their covariance)
    with a ``drift`` section: the rates [unit/h], the information of (values, rates), the stamp
    time of the last window and the exceedance clocks (``.nan`` where none runs).
    """
    save_estimate(path, drifting.estimate, {"drift": {
        "time_s": drifting.time_s,
        "rates_per_hour": [float(x) for x in drifting.rates],
        "information": [[float(x) for x in row] for row in drifting.information],
        "exceeding_since_s": [float(x) for x in drifting.exceeding_since_s],
    }})


def load_drifting(path: Path) -> DriftingEstimate | None:
    """Read a state file written by :func:`save_drifting` (or a fused estimate without rates).

    None when ``path`` does not exist. A file without a ``drift`` section gives its values and
    covariance with no rate determined and an unknown time. Raises ValueError (one line naming
    the file) as :func:`.fusion.load_estimate` does, and for a malformed ``drift`` section.
    """
    read = read_estimate_document(Path(path))
    if read is None:
        return None
    estimate, document = read
    size = len(estimate.covariance)
    drift = document.get("drift")
    if drift is None:
        information = np.zeros((2 * size, 2 * size))
        information[:size, :size] = estimate.information
        return DriftingEstimate(estimate, np.zeros(size), information, np.nan,
                                np.full(size, np.nan))  # no rate known: not even the prior
    try:
        drifting = DriftingEstimate(
            estimate, np.asarray(drift["rates_per_hour"], dtype=np.float64),
            np.asarray(drift["information"], dtype=np.float64), float(drift["time_s"]),
            np.asarray(drift["exceeding_since_s"], dtype=np.float64))
        if not (np.all(np.isfinite(drifting.rates)) and np.all(np.isfinite(
                drifting.information))):
            raise ValueError("non-finite rates or information")
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: corrupt parameter estimate file: drift: "
                         f"{' '.join(str(error).split())}") from error
    return drifting
