"""A window of the node and what becomes of it: estimated, judged, turned into an estimate.

:class:`Window` (cut by :class:`~mb_estimation.online.intake.SampleIntake`),
:class:`WindowOutcome` (what :meth:`~mb_estimation.online.core.EstimatorCore.process` made of
it), the default estimator :func:`estimate_window`, what makes a window unusable before it is
estimated (:func:`unusable`, :func:`joint_jump`) and the acceptance rule :func:`why_rejected`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import chi2

from mb_estimation.assess import with_model_error
from mb_estimation.config import Config, ConfigError
from mb_estimation.config.sections import drift_noise_by_parameter
from mb_estimation.errors import first_line
from mb_estimation.estimation import EstimationResult, FitStatus
from mb_estimation.estimation.agreement import DISAGREEMENT_P
from mb_estimation.fitting import fit
from mb_estimation.online.drift import (
    DriftingEstimate,
    DriftSettings,
    disagreement,
    per_tangent_entry,
    track,
)
from mb_estimation.online.fusion import ParameterEstimate
from mb_estimation.setup import PAPER_STEP_S, set_up
from mb_estimation.signals import Recording

#: How far short of a window's end its joint states may stop and still cover it [s]: stamps
#: rounded to the nanosecond (a recording that spans 9.999999999 s holds two 5 s windows).
COVERAGE_TOLERANCE_S = 1e-6

ACCEPTED_STATUSES = (FitStatus.GRADIENT, FitStatus.STEP)


@dataclass(frozen=True)
class Window:
    """A window cut from the buffers: its number, start stamp and the samples as a recording."""

    index: int
    start_ns: int
    recording: Recording  # times [s] from start_ns
    generation: int = 0  # the time base it was cut on (a reset or time jump starts a new one)
    resets: int = 0  # resets before it was cut: a later reset forgets what it would fuse into


@dataclass(frozen=True)
class WindowOutcome:
    """What became of one window: accepted or the reason it was not, and the solver's result."""

    index: int
    start_ns: int
    accepted: bool
    reason: str
    elapsed_s: float
    result: EstimationResult | None = field(default=None, repr=False)


#: The consistent path's step in the node when ``method.step_s`` is not set [s]: the
#: paper's rig rate (§4.1). Fine enough that a swing-up's estimate no longer moves with it
#: (measured), and a 5 s window still solves in a fraction of a second.
NODE_STEP_S = 1e-3


def window_step(config: Config) -> float:
    """The node's estimation step [s], fixed before any data arrive (one compiled program).

    ``method.step_s``; unset, the paper's single fit (``advanced.estimator: paper``) takes
    :data:`~mb_estimation.setup.PAPER_STEP_S`, the consistent path :data:`NODE_STEP_S` —
    not the samples' period, as offline: the node would learn it only from the data, after its
    start-up compile, and a jittering stamp could move it from window to window.
    """
    if config.method.step_s is not None:
        return config.method.step_s
    return PAPER_STEP_S if config.advanced.estimator == "paper" else NODE_STEP_S


#: A window's fit stops (rejected, ``time_limit``) after this many strides of solving unless
#: ``method.time_limit_s`` says otherwise: by then the next window is waiting, and a window
#: that takes two strides to fail makes the worker meet only windows of its own phase.
WINDOW_TIME_LIMIT_STRIDES = 1.5

#: A window whose residuals' correlation in time makes some std this many times the
#: model-is-right one carries its model's error in its std (:func:`with_the_model_s_error`):
#: above what the sandwich's own spread gives on windows of a rig the model follows.
MODEL_ERROR_STD_RATIO = 3.0


def window_config(config: Config) -> Config:
    """The config the node estimates a window with.

    The consistent path at :func:`window_step` alone: one level (each window is warm-started
    from the last accepted one, so the coarse level's continuation is not needed, and one
    program compiles at start-up) and no simulation refinement (its prediction checks and
    shooting fit take longer than a stride). How far the estimate still moves with the step
    is the offline calibration's to show. Either estimator's fit has a time limit,
    ``method.time_limit_s`` or :data:`WINDOW_TIME_LIMIT_STRIDES` strides.
    """
    method, advanced = config.method, config.advanced
    if method.time_limit_s is None:
        method = dataclasses.replace(
            method, time_limit_s=WINDOW_TIME_LIMIT_STRIDES * config.node.stride_s)
    method = dataclasses.replace(method, step_s=window_step(config))
    if advanced.estimator != "paper":
        method = dataclasses.replace(method, simulation_refinement="off")
        advanced = dataclasses.replace(advanced, refinement_levels=1)
    return dataclasses.replace(config, method=method, advanced=advanced)


def estimate_window(config: Config, recording: Recording) -> EstimationResult:
    """Estimate the config's free parameters and the states on one window (the default worker).

    The config's estimator on :func:`window_config`'s terms. The grid covers exactly
    ``[0, window_s]`` of the recording's time at :func:`window_step`, so every window has the
    same number of steps and the compiled solver is reused. Where its residuals show a model
    error, the std include it (:func:`with_the_model_s_error`; the result's
    ``std_include_model_error``).
    """
    first = float(recording.time_s[0])
    # a window of a driven rig: the node's motion rules judge it, no joint is taken as held
    setup = set_up(window_config(config), [recording], start_s=-first,
                   end_s=config.node.window_s - first, held={recording.name: ()})
    return with_the_model_s_error(fit(setup).joint)


def with_the_model_s_error(result: EstimationResult) -> EstimationResult:
    """A window's result with std that include its model's error where its residuals show one.

    Where the residuals' correlation in time (``result.correlated``) makes some std
    :data:`MODEL_ERROR_STD_RATIO` times the model-is-right one or more, the model's error is
    in them: the std and covariance are :func:`~mb_estimation.assess.with_model_error`'s; else
    ``result``. (``calibrate`` decides by the model's predictions; per window they would add
    a third of its fit's time, and their compile to every start.)
    """
    correlated = result.correlated
    if correlated is None:
        return result
    ratios = [np.asarray(correlated.std[name]) / np.asarray(result.std[name])
              for name in result.free
              if np.all(np.isfinite(result.std[name])) and np.all(result.std[name] > 0)]
    if not ratios or max(float(np.max(ratio)) for ratio in ratios) < MODEL_ERROR_STD_RATIO:
        return result
    return with_model_error(result)


def result_estimate(result: EstimationResult, windows: int = 1) -> ParameterEstimate:
    """The free parameters of a result as a :class:`ParameterEstimate`."""
    return ParameterEstimate(
        names=tuple(result.free),
        values={name: np.atleast_1d(np.asarray(result.parameters[name], dtype=np.float64))
                for name in result.free},
        covariance=np.asarray(result.covariance, dtype=np.float64), windows=windows)


def why_rejected(result: EstimationResult, max_cost: float,
                 config: Config | None = None) -> str | None:
    """Why a window's result is not accepted, or None when it is.

    With ``config``, also a free parameter that cannot be zero left at the positive lower
    bound of its box (:func:`undetermined_at_bound`).
    """
    if result.status not in ACCEPTED_STATUSES:
        return f"not converged ({result.status} after {result.iterations} iterations)"
    values = [np.asarray(result.parameters[name], dtype=np.float64) for name in result.free]
    if not all(np.all(np.isfinite(v)) for v in values) or not math.isfinite(result.cost):
        return "non-finite estimate"
    if result.cost > max_cost:
        return f"cost {result.cost:.3g} above node.max_cost {max_cost:.3g}"
    if not any(result.excited.values()):
        return "no free parameter excited by this window"
    return None if config is None else undetermined_at_bound(config, result)


def undetermined_at_bound(config: Config, result: EstimationResult) -> str | None:
    """The first free parameter that cannot be zero which the window pins at its bound.

    A parameter whose box starts above zero (an inertia, a mass) left at that lower bound: the
    data ask for a value beyond it, so it is no estimate (as ``calibrate``'s verdict reads it),
    whatever its std — with a small one the window holds it there firmly, which no rig's inertia
    is — and the bound is not a measurement (fused, it would pull the estimate there, and a
    controller would take it), e.g. a pendulum inertia at 1e-12 on data the model does not
    follow. A friction at its bound 0 is a value the rig can have.
    """
    for name in result.free:
        value = np.asarray(result.parameters[name], dtype=np.float64)
        bounds = config.free.get(name)
        if value.size != 1 or bounds is None or not bounds.lower > 0.0:
            continue
        value = float(value.ravel()[0])
        if value <= bounds.lower:
            return (f"{name} at its lower bound {value:.3g}: the window asks for a value beyond "
                    "it, so it is no estimate")
    return None


def judged(config: Config, recording: Recording, estimator=None, start: Config | None = None
           ) -> tuple[EstimationResult | None, str | None]:
    """A window estimated and judged by the node's rules: ``(result, why rejected or None)``.

    :func:`unusable` first (no result), then ``estimator(start, recording)`` (default
    :func:`estimate_window` from ``config``); a failing estimator is a rejection, never an
    error, and :func:`why_rejected` judges the result.
    """
    reason = unusable(config, recording)
    if reason is not None:
        return None, reason
    try:
        result = (estimator or estimate_window)(start or config, recording)
    except Exception as error:  # a failed window must not stop the node or a run
        return None, f"estimator failed: {type(error).__name__}: {first_line(error)}"
    return result, why_rejected(result, config.node.max_cost, config)


def unusable(config: Config, recording: Recording) -> str | None:
    """Why a window cannot be estimated at all (checked before the worker spends time on it)."""
    settings = config.node
    if len(recording.time_s) < 3 or recording.time_s[0] > 0 or recording.time_s[-1] < \
            settings.window_s - COVERAGE_TOLERANCE_S:
        return "joint states do not cover the window"
    if config.rig_spec.inputs:
        if len(recording.input_time_s) == 0:
            return (f"no voltage received on {config.recording.voltage_topic} "
                    "(a silent or mistyped voltage topic?)")
        if recording.input_time_s[0] > 0:
            return "voltage unknown at the window's start (its first message came later)"
    motion = np.ptp(recording.joint_angles, axis=0)
    if float(np.max(motion)) < settings.min_motion_rad:
        return (f"rig at rest (joints moved at most {float(np.max(motion)):.3g} rad < "
                f"node.min_motion_rad {settings.min_motion_rad:g}): skipped")
    return joint_jump(recording, settings.max_joint_speed_rad_s, tuple(config.rig_spec.joints))


def within_bounds(config: Config, estimate: ParameterEstimate) -> ParameterEstimate:
    """``estimate`` with its scalar values clipped to the config's box.

    Each window respects the box, but with correlated windows the information-weighted mean of
    values at a bound (a friction at 0) can leave it.
    """
    values = dict(estimate.values)
    for name, bounds in config.free.items():
        if name in values and values[name].size == 1:
            values[name] = np.clip(values[name], bounds.lower, bounds.upper)
    return dataclasses.replace(estimate, values=values)


def check_drift_names(config: Config) -> None:
    """ConfigError unless ``node.drift_noise_by_parameter`` names only free parameters."""
    unknown = set(drift_noise_by_parameter(config.node)) - set(config.free)
    if unknown:
        raise ConfigError(f"node.drift_noise_by_parameter names {', '.join(sorted(unknown))}, "
                          f"not free (free: {', '.join(config.free)})")


def with_window(config: Config, drifting: DriftingEstimate | None,
                estimate: ParameterEstimate, time_s: float,
                new_data_s: float | None = None) -> DriftingEstimate:
    """The fused values and rates after an accepted window ending at ``time_s`` [s].

    :func:`~.drift.track` with the node's settings (:func:`drift_settings`) of the window
    counted once (:func:`counted_once`, ``new_data_s`` its seconds the fused estimate does not
    hold yet), the fused values clipped to the config's box (:func:`within_bounds`): what the
    node and ``track`` keep.
    """
    estimate = counted_once(config, estimate, new_data_s)
    tracked = track(drifting, estimate, time_s, drift_settings(config, estimate, drifting))
    return dataclasses.replace(tracked, estimate=within_bounds(config, tracked.estimate))


def disagreeing(config: Config, drifting: DriftingEstimate | None,
                estimate: ParameterEstimate, time_s: float) -> str | None:
    """Why an accepted window's values contradict the fused ones, or None where they agree.

    Its χ² against the fused estimate predicted to its end ``time_s`` [s]
    (:func:`~.drift.disagreement`) with a probability below
    :data:`~mb_estimation.estimation.agreement.DISAGREEMENT_P` where they agree: the rig
    changed at once, or the model misses something it does (a window's std leave the model's
    error out, where ``calibrate``'s include it). The window is still fused.
    """
    if drifting is None:
        return None
    chi_square, dof = disagreement(drifting, estimate, time_s,
                                   drift_settings(config, estimate, drifting))
    probability = float(chi2.sf(chi_square, dof)) if dof else 1.0
    if probability >= DISAGREEMENT_P:
        return None
    return (f"its values and the fused ones differ beyond their std (χ² = {chi_square:.3g} on "
            f"{dof}, p = {probability:.2g}): the rig changed, or the model misses "
            "something it does (a window's std leave the model's error out): calibrate a "
            "recording of it")


def new_data_s(config: Config, since_fused_s: float | None) -> float:
    """How much of a window comes after the last one fused [s].

    ``since_fused_s``: from that one's end to this one's [s], at most the window's length;
    None where nothing was fused before it: ``node.stride_s``, a window's share among
    overlapping ones.
    """
    if since_fused_s is None:
        return config.node.stride_s
    return min(config.node.window_s, since_fused_s)


def counted_once(config: Config, estimate: ParameterEstimate,
                 new_data_s: float | None = None) -> ParameterEstimate:
    """A window's ``estimate`` as fused: each recorded sample's information counted once.

    Windows that overlap (``node.stride_s`` below ``node.window_s``) hold each sample
    ``window_s / stride_s`` times; fused as if independent they would claim that many times
    the data's information, and their fused std and drift rates would be too small by its
    square root. Each then counts for ``stride_s / window_s`` of its information (its
    covariance scaled up by ``window_s / stride_s``); windows that do not overlap count whole.
    ``new_data_s`` [s > 0] (:func:`new_data_s`), where given, replaces ``stride_s``: how much
    of the window comes after the last one fused (a window asked for at once, or one after a
    rejected window).
    """
    new_data_s = config.node.stride_s if new_data_s is None else new_data_s
    overlap = config.node.window_s / new_data_s
    if overlap <= 1.0:
        return estimate
    return dataclasses.replace(estimate, covariance=overlap * estimate.covariance)


def drift_settings(config: Config, estimate: ParameterEstimate,
                   drifting: DriftingEstimate | None) -> DriftSettings:
    """The node's drift settings per tangent entry.

    Relative to the fused values so far, else the window's ``estimate``, else the config's.
    """
    node = config.node
    scales = ([] if drifting is None else [drifting.estimate.values]) + [
        estimate.values, config.parameters]
    names, kinds = estimate.names, estimate.kinds
    return DriftSettings(
        per_tangent_entry(names, kinds, scales, relative=node.drift_noise,
                          absolute=drift_noise_by_parameter(node)),
        per_tangent_entry(names, kinds, scales, relative=node.drift_prior),
        node.drift_alarm_std)


#: A step between two samples this much beyond the speed limit [rad] is a jump: above encoder
#: counts (4096 per turn: 1.5e-3 rad) and angle noise at any sample rate.
JUMP_FLOOR_RAD = 0.02


def joint_jump(recording: Recording, max_speed_rad_s: float,
               joints: tuple[str, ...]) -> str | None:
    """Why a window holds a jump no rig makes, or None.

    A jump: two consecutive samples of a joint further apart than ``max_speed_rad_s`` times
    their stamps' distance plus :data:`JUMP_FLOOR_RAD` (a driver restart, an encoder glitch).
    Fused, it would bend every estimate of the window; the window is rejected instead.
    """
    steps = np.abs(np.diff(recording.joint_angles, axis=0))
    allowed = max_speed_rad_s * np.diff(recording.time_s)[:, None] + JUMP_FLOOR_RAD
    excess = steps - allowed
    if not np.any(excess > 0.0):
        return None
    k, j = np.unravel_index(int(np.argmax(excess)), excess.shape)
    return (f"a jump no rig makes: {joints[j]} moved {steps[k, j]:.3g} rad in "
            f"{1e3 * (recording.time_s[k + 1] - recording.time_s[k]):.3g} ms, "
            f"{recording.time_s[k]:.3f} s into the window (over "
            f"node.max_joint_speed_rad_s {max_speed_rad_s:g}): a driver restart or an encoder "
            "glitch? rejected")


def nearest_points(grid_s: np.ndarray, sample_s: np.ndarray) -> np.ndarray:
    """Indices of the points of ``grid_s`` nearest to the samples at ``sample_s`` [s], each once.

    The shadow states are published there: at the rig's own rate, however fine the
    estimation grid (a 1 ms grid under a 100 Hz rig would otherwise publish ten per sample).
    """
    grid_s = np.asarray(grid_s, dtype=np.float64)
    right = np.clip(np.searchsorted(grid_s, sample_s), 1, len(grid_s) - 1)
    left_nearer = np.asarray(sample_s) - grid_s[right - 1] <= grid_s[right] - np.asarray(sample_s)
    return np.unique(right - left_nearer)
