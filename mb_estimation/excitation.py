"""Experiment design: an input whose response determines the free parameters best.

Pure numerics (no I/O). The input is a multisine

    u(t) = c · Σ_k a_k sin(2π f_k t + φ_k),

on fixed frequencies ``f_k`` (:data:`EXCITATION_FREQUENCIES_HZ`), its phases ``φ_k`` chosen
for a low crest factor whatever the amplitudes (:func:`~mb_estimation.multisines.low_crest_phases`:
much power for a given peak), its scale ``c`` the largest (at most the input bound) whose
motion keeps within the arm's limits. The relative amplitudes ``a_k`` are chosen by an
evolution strategy (:func:`evolution_strategy`) to lower the **worst relative standard
deviation** ``max_i σ_i / |χ_i|`` of the
free parameters that the Cramér–Rao bound predicts for the simulated response
(:func:`~mb_estimation.cramer_rao.cramer_rao_bound`: the rigid model simulated from the
design's start, white angle noise on every sample, the initial state a nuisance), without
buying it with the other parameters' precision: against the plain multisine at the same bound
(the ``multisine`` scenario's tones), the goals are half its worst relative std
(:data:`WORST_STD_GOAL`) and no parameter's std above 1.2 times its own under the multisine
(:data:`STD_CAP`), and the criterion is the larger of the two ratios to their goals — the
worst relative std alone until a parameter's std reaches its cap, and both further once they
are met. The search ranks candidates on a coarser grid than the experiment's
(:data:`SEARCH_RATE_HZ`); its :data:`FINALISTS` best are predicted again at the experiment's
rate and the best of them kept.

Why the worst relative std: it is what a user reads off a calibration — every free parameter
known to a given fraction of itself. D-optimality (the information's determinant) is scale-free
too, but it rewards making one parameter very precise while another stays poor, which is the
calibration a user cannot trust; A-optimality (the sum of variances) is dominated by the
parameter with the largest units. Alone, it buys the least determined parameter's precision
with the others' (measured: b2 halved for b1's std 1.33 times the multisine's on the §4.7 rig);
hence the cap. The criterion is not smooth where two terms tie, nor where a limit's penalty
begins, which an evolution strategy does not mind.

The input is faded in and out over :data:`~mb_estimation.fade.RAMP_S` as the exciter node
bounds what it plays (:mod:`mb_estimation.fade`): the design predicts, and the file holds, the
input as it is played on the rig.

Limits: the input's peak never exceeds the bound (by construction); the arm's simulated angle
and rate must stay within :data:`ARM_LIMIT_SHARE` of their limits (a rig with a cable, a table:
the exciter stops at the limits themselves, so a rig that moves a little more than the model
at the values designed at still plays the whole input), and the motion must not
amplify a change of its start state beyond what the calibration's simulation-error stage
follows in one piece (:data:`FOLLOWED_AMPLIFICATION`: the bound of a near-chaotic motion is
as small as one likes, and no calibration reaches it). Each candidate is ranked at the peak
that keeps its arm within them (a few replays, :func:`_scale_within`), and one beyond them
still (the start-state amplification) is penalised. A design that
cannot meet them (the input's smallest useful scale still exceeds them) is refused in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.cramer_rao import FOLLOWED_AMPLIFICATION, cramer_rao_bound
from mb_estimation.errors import SimulationError
from mb_estimation.multisines import low_crest_phases, played, schroeder_phases
from mb_estimation.rigs import Rig
from mb_estimation.scenarios import MULTISINE_FREQUENCIES_HZ
from mb_estimation.signals import GridData
from mb_estimation.validation import SENSITIVITY_DT, rigid_replay, rigid_systems

#: The design's frequencies [Hz]: fifteen tones 0.2 Hz apart over the plain multisine's band
#: (0.2–3 Hz), from below a Furuta pendulum's swing (0.5–1.5 Hz for pendulums of 1 to 0.1 m) to
#: above it.
EXCITATION_FREQUENCIES_HZ = 0.2 * np.arange(1, 16)
#: Criterion evaluations the search may make (each simulates the rig ``2 + free + 2·joints``
#: times, and a few times more to scale the input to the arm's limits).
MAX_EVALUATIONS = 600
#: The evolution strategy (:func:`evolution_strategy`): points per generation, and its first
#: step in the log amplitudes (0.5: a tone's amplitude drawn within about ×0.6–×1.6).
OFFSPRING = 8
INITIAL_STEP = 0.5
#: Independent runs of the evolution strategy the evaluations are shared among.
RESTARTS = 4
#: The search's best candidates predicted again on the experiment's grid, the best kept.
FINALISTS = 4
#: The search ranks inputs on a coarser grid and step than the experiment's (its angle noise
#: scaled so that the grid holds as much information as the experiment's samples); the design
#: found and the multisine are then predicted at the experiment's rate and the bound's step.
SEARCH_RATE_HZ = 100.0
SEARCH_STEP_S = 1e-2
#: The design's goals against the plain multisine at the same bound: its worst relative std at
#: most this fraction of the multisine's, and no parameter's std more than this multiple of its
#: std under the multisine (the criterion is the larger ratio to its goal: module docstring).
WORST_STD_GOAL = 0.5
STD_CAP = 1.2
#: Penalty per unit of log overshoot of a limit, added to the log criterion.
LIMIT_PENALTY = 20.0
#: A design scaled down to meet the arm's limits stops at this fraction of the input bound; the
#: multisine it is compared with at this one (its lowest tones turn a light arm far: it may have
#: to play far below a bound the design's higher tones use whole), in this many bisections.
SMALLEST_SCALE = 0.05
SMALLEST_MULTISINE_SCALE = 1e-3
BISECTIONS = 8
#: The largest start-state amplification a design's motion may have: a fifth of what the
#: calibration's simulation-error stage follows in one piece (:data:`FOLLOWED_AMPLIFICATION`).
#: Nearer that, the stage's continuation to whole-recording segments stops short on some noise
#: draws, and their calibrations keep the short segments' precision.
EXPERIMENT_AMPLIFICATION = 0.2 * FOLLOWED_AMPLIFICATION
#: The search scales each candidate to the arm's limits in at most this many replays, aiming at
#: this share of its limits (:func:`_scale_within`).
SCALE_TRIALS = 3
SCALE_AIM = 0.97
#: The share of the arm's angle and rate limits the design's simulated motion stays within
#: (the rest is for a rig that moves more than the model at the values designed at: the
#: exciter stops at the limits themselves).
ARM_LIMIT_SHARE = 0.9


@dataclass(frozen=True)
class Limits:
    """What the experiment must respect.

    ``max_input`` [input units, e.g. V] always; the arm's angle [rad] from where it starts and
    its rate [rad/s], where given (None: no limit).
    """

    max_input: float
    max_arm_rad: float | None = None
    max_arm_rate: float | None = None


@dataclass(frozen=True)
class Response:
    """One input's predicted outcome.

    ``std`` per free parameter (the Cramér–Rao bound for the noise assumed) and
    ``relative_std`` (std / |value|), the arm's largest excursion from its start [rad] and rate
    [rad/s], the simulated joint ``angles [n, n_joints]`` [rad], and how much the motion
    amplifies a change of its start state
    (:attr:`~mb_estimation.cramer_rao.CramerRao.amplification`).
    """

    std: dict[str, float]
    relative_std: dict[str, float]
    arm_peak_rad: float
    arm_rate_peak: float
    angles: np.ndarray
    amplification: float

    @property
    def worst_relative_std(self) -> float:
        """The largest of :attr:`relative_std`."""
        return max(self.relative_std.values())


@dataclass(frozen=True)
class ExcitationDesign:
    """A designed input and what it predicts, beside the plain multisine's at the same bound.

    ``time_s [n]`` and ``inputs [n]`` (the input at each sample, held until the next one);
    ``amplitudes`` (relative, ``[K]``) on ``frequencies_hz`` with ``phases``; ``scale`` the
    input's peak [input units]; ``design`` and ``multisine`` their :class:`Response`, the
    multisine (the ``multisine`` scenario's tones, equal amplitudes, Schroeder phases) at the
    peak ``multisine_scale`` (the bound, or less where the arm's limits ask for it);
    ``evaluations`` the criterion evaluations made. ``improved`` is False where the search
    found nothing that predicts better than the multisine at the experiment's rate: the
    design is then the multisine itself (its tones, amplitudes and phases). ``seed``: the
    search's (:func:`design_excitation`).
    """

    time_s: np.ndarray
    inputs: np.ndarray
    amplitudes: np.ndarray
    frequencies_hz: np.ndarray
    phases: np.ndarray
    scale: float
    design: Response
    multisine: Response
    multisine_scale: float
    evaluations: int
    improved: bool = True
    seed: int = 0


def design_grid(time_s: np.ndarray, inputs: np.ndarray, joints: int) -> GridData:
    """The grid the bound is computed on: every sample observed, each input held one step."""
    n = len(time_s)
    zeros = np.zeros((n, joints))
    return GridData("design", time_s, zeros, zeros, np.asarray(inputs, np.float64)[:-1, None],
                    np.ones(n), float(time_s[1] - time_s[0]))


def predicted_response(rig: Rig, values: Mapping[str, object], names: Sequence[str],
                       time_s: np.ndarray, inputs: np.ndarray, start: np.ndarray,
                       noise_rad: float, simulation_dt: float = SENSITIVITY_DT) -> Response:
    """The :class:`Response` of ``inputs`` on ``rig`` with ``values``, from ``start``.

    ``start``: the joint angles then rates [rad, rad/s]; the arm is joint 0. The rigid model
    runs steps of at most ``simulation_dt`` [s].
    """
    joints = start.shape[0] // 2
    grid = design_grid(time_s, inputs, joints)
    bound = cramer_rao_bound(rig, values, names, [grid], [start],
                             [np.full(joints, noise_rad)], simulation_dt=simulation_dt)
    relative = {name: bound.std[name] / abs(float(np.ravel(values[name])[0]))
                for name in bound.names}
    angles, arm_peak, arm_rate_peak = arm_motion(rig, values, time_s, inputs, start,
                                                 simulation_dt)
    return Response(bound.std, relative, arm_peak, arm_rate_peak, angles, bound.amplification)


def arm_motion(rig: Rig, values: Mapping[str, object], time_s: np.ndarray, inputs: np.ndarray,
               start: np.ndarray, simulation_dt: float = SENSITIVITY_DT
               ) -> tuple[np.ndarray, float, float]:
    """The rigid model's joint ``angles [n, n_joints]`` [rad] under ``inputs``, from ``start``.

    With the arm's largest excursion from its start [rad] and its largest rate between two
    samples [rad/s].
    """
    grid = design_grid(time_s, inputs, start.shape[0] // 2)
    angles = rigid_replay(rigid_systems(rig, values)[0], grid, start, simulation_dt)
    arm = angles[:, 0]
    return (angles, float(np.max(np.abs(arm - arm[0]))),
            float(np.max(np.abs(np.diff(arm))) / grid.dt))


def _arm_ratio(arm_peak: float, arm_rate_peak: float, limits: Limits) -> float:
    """The arm's largest ratio to :data:`ARM_LIMIT_SHARE` of its limits (0 without limits)."""
    ratios = [0.0]
    if limits.max_arm_rad is not None:
        ratios.append(arm_peak / (ARM_LIMIT_SHARE * limits.max_arm_rad))
    if limits.max_arm_rate is not None:
        ratios.append(arm_rate_peak / (ARM_LIMIT_SHARE * limits.max_arm_rate))
    return max(ratios)


def _overshoot(response: Response, limits: Limits,
               amplification: float = EXPERIMENT_AMPLIFICATION) -> float:
    """How far the response goes beyond its limits: the largest log ratio, 0 within them.

    :data:`ARM_LIMIT_SHARE` of the arm's angle and rate limits, and the start-state
    ``amplification`` (a design's, :data:`EXPERIMENT_AMPLIFICATION`; the multisine it is
    compared with, :data:`FOLLOWED_AMPLIFICATION`: what a calibration follows).
    """
    return float(np.log(max(1.0, response.amplification / amplification,
                            _arm_ratio(response.arm_peak_rad, response.arm_rate_peak, limits))))


def design_excitation(rig: Rig, values: Mapping[str, object], names: Sequence[str], *,
                      duration_s: float, rate_hz: float, limits: Limits,
                      start: np.ndarray, noise_rad: float = 1e-3,
                      frequencies_hz: np.ndarray = EXCITATION_FREQUENCIES_HZ,
                      max_evaluations: int = MAX_EVALUATIONS, seed: int = 0,
                      progress: Callable[[int, float, float], None] | None = None
                      ) -> ExcitationDesign:
    """The multisine on ``frequencies_hz`` that best meets the criterion's goals (module doc).

    ``values``: the rig's parameters (the design is for these: a previous calibration's, for a
    sequential design); ``names``: the free ones (scalars); ``start``: the joint state it starts
    from; ``noise_rad``: the angle noise assumed on each joint (it scales every std alike, so it
    does not change the design); ``seed``: the search's first run's (:func:`evolution_strategy`:
    the same seed, the same design). ``progress(evaluation, worst relative std, beyond)`` after
    each evaluation, of the best candidate so far (ranked with the penalty of a limit
    exceeded; ``beyond``: how far its motion goes beyond its limits, the largest ratio to
    one, 1 within them: a candidate further beyond ranks lower even where its std are
    smaller). Raises
    :class:`~mb_estimation.errors.SimulationError` when no scale of the design keeps the arm
    within its limits.
    """
    if not rig.spec.inputs:
        raise SimulationError(f"the {rig.spec.name} rig has no input to design")

    def grid(rate):
        return np.arange(int(round(duration_s * rate)) + 1) / rate

    def response(amplitudes, phases, scale, rate=rate_hz, step=SENSITIVITY_DT,
                 frequencies=frequencies_hz):
        time_s = grid(rate)
        inputs = played(time_s, np.abs(amplitudes), frequencies, phases, scale)
        noise = noise_rad * np.sqrt(rate / rate_hz)  # as much information as rate_hz's samples
        return time_s, inputs, predicted_response(rig, values, names, time_s, inputs, start,
                                                  noise, step)

    def scale_within(amplitudes, phases, rate=rate_hz, step=SENSITIVITY_DT):
        time_s = grid(rate)

        def arm_ratio(scale):
            inputs = played(time_s, np.abs(amplitudes), frequencies_hz, phases, scale)
            _, peak, arm_rate = arm_motion(rig, values, time_s, inputs, start, step)
            return _arm_ratio(peak, arm_rate, limits)

        return _scale_within(arm_ratio, limits)

    plain_count = len(MULTISINE_FREQUENCIES_HZ)

    def plain_response(amplitudes, scale, rate=rate_hz, step=SENSITIVITY_DT):
        return response(amplitudes, schroeder_phases(plain_count), scale, rate, step,
                        MULTISINE_FREQUENCIES_HZ)

    search_rate = min(SEARCH_RATE_HZ, rate_hz)
    _, (*_, plain_searched) = _within_limits(  # the goals, on the search's grid
        lambda a, scale: plain_response(a, scale, search_rate, SEARCH_STEP_S),
        np.ones(plain_count), limits, FOLLOWED_AMPLIFICATION, SMALLEST_MULTISINE_SCALE,
        "plain multisine")
    evaluations, best, best_worst, best_beyond = 0, np.inf, np.inf, 1.0
    searched: list[tuple[float, np.ndarray]] = []

    def criterion(log_amplitudes):
        nonlocal evaluations, best, best_worst, best_beyond
        amplitudes = np.exp(log_amplitudes)
        phases = low_crest_phases(amplitudes, frequencies_hz, duration_s)
        scale = scale_within(amplitudes, phases, search_rate, SEARCH_STEP_S)
        *_, outcome = response(amplitudes, phases, scale, search_rate, SEARCH_STEP_S)
        overshoot = _overshoot(outcome, limits)
        value = np.log(_against_goals(outcome, plain_searched)) + LIMIT_PENALTY * overshoot
        evaluations += 1
        searched.append((value, amplitudes / np.max(amplitudes)))
        if value < best:
            best, best_worst, best_beyond = value, outcome.worst_relative_std, np.exp(overshoot)
        if progress is not None:
            progress(evaluations, best_worst, best_beyond)
        return value

    evolution_strategy(criterion, np.zeros(len(frequencies_hz)), max_evaluations,
                       seed=seed)
    # the multisine scenario's input (mb_estimation.scenarios.multisine_torque) at this bound
    plain_scale, (time_s, plain_inputs, plain) = _within_limits(
        plain_response, np.ones(plain_count), limits, FOLLOWED_AMPLIFICATION,
        SMALLEST_MULTISINE_SCALE, "plain multisine")
    chosen = None  # the finalists ranked again on the experiment's grid
    for _, amplitudes in _distinct_best(searched, FINALISTS):
        phases = low_crest_phases(amplitudes, frequencies_hz, duration_s)
        scale = scale_within(amplitudes, phases)
        _, inputs, designed = response(amplitudes, phases, scale)
        if _overshoot(designed, limits) > 0.0:
            try:
                scale, (_, inputs, designed) = _within_limits(
                    lambda a, scale, phases=phases: response(a, phases, scale), amplitudes,
                    limits)
            except SimulationError:
                continue  # no peak plays this one within the limits at the experiment's rate
        goal = _against_goals(designed, plain)
        if chosen is None or goal < chosen[0]:
            chosen = (goal, amplitudes, phases, scale, inputs, designed)
    if chosen is None or not chosen[0] < _against_goals(plain, plain):
        # nothing found predicts better than the multisine at the experiment's rate (the
        # search ranks on a coarser grid). Never worse than the multisine.
        return ExcitationDesign(time_s, plain_inputs, np.ones(plain_count),
                                np.asarray(MULTISINE_FREQUENCIES_HZ),
                                schroeder_phases(plain_count), plain_scale, plain, plain,
                                plain_scale, evaluations, improved=False, seed=seed)
    _, amplitudes, phases, scale, inputs, designed = chosen
    return ExcitationDesign(time_s, inputs, amplitudes, np.asarray(frequencies_hz), phases,
                            scale, designed, plain, plain_scale, evaluations, seed=seed)


def evolution_strategy(criterion: Callable[[np.ndarray], float], mean: np.ndarray,
                       max_evaluations: int, *, seed: int = 0,
                       restarts: int = RESTARTS) -> None:
    """Lower ``criterion`` from ``mean`` within ``max_evaluations`` calls (results: the caller's).

    A (μ/μ_w, λ) evolution strategy (Hansen, "The CMA evolution strategy: a tutorial", 2016,
    without the covariance's adaptation): each generation draws :data:`OFFSPRING` points around
    the mean with step ``σ``, moves the mean to the log-weighted mean of the best half, and
    scales ``σ`` by the share of the generation that beat the best so far (Rechenberg's
    one-fifth rule). It tolerates a rough, kinked criterion (a limit's penalty, the largest
    of several ratios, motions sensitive to the input) where a simplex or gradient search
    stalls (measured). Run ``restarts`` times from ``mean``, each with an equal share of the
    evaluations and its own seed (``seed``, ``seed + 1``, …): a run settles in one basin within
    about a hundred evaluations, and where it settles depends on its draws. Deterministic for
    ``seed``.
    """
    first = criterion(mean)  # every run starts here
    left = max_evaluations - 1
    restarts = max(min(restarts, left), 1)
    for run in range(restarts):
        share = left // restarts + (left % restarts if run == 0 else 0)
        rng = np.random.default_rng(seed + run)
        point, best, step, evaluations = mean, first, INITIAL_STEP, 0
        while evaluations < share:  # the last generation as many as are left
            count = min(OFFSPRING, share - evaluations)
            points = point + step * rng.standard_normal((count, mean.size))
            values = np.array([criterion(each) for each in points])
            evaluations += count
            parents = max(count // 2, 1)
            weights = np.log(parents + 0.5) - np.log(np.arange(1, parents + 1))
            point = (weights / weights.sum()) @ points[np.argsort(values)[:parents]]
            step *= np.exp(np.mean(values < best) - 0.2)
            best = min(best, float(values.min()))


def _distinct_best(searched: list[tuple[float, np.ndarray]], count: int) -> list:
    """The ``count`` lowest of ``(value, amplitudes)``, no two with the same amplitudes."""
    kept: list[tuple[float, np.ndarray]] = []
    for value, amplitudes in sorted(searched, key=lambda item: item[0]):
        if not np.isfinite(value):
            continue
        if all(not np.allclose(amplitudes, other) for _, other in kept):
            kept.append((value, amplitudes))
        if len(kept) == count:
            break
    return kept


def _against_goals(response: Response, plain: Response) -> float:
    """The criterion: ``response``'s distance from the goals set by ``plain``'s (module doc).

    The larger of its worst relative std over :data:`WORST_STD_GOAL` times ``plain``'s and of
    its std over :data:`STD_CAP` times ``plain``'s, parameter by parameter (below 1: both goals
    met). Where ``plain`` leaves a parameter undetermined, the worst relative std alone.
    """
    if not np.isfinite(plain.worst_relative_std):
        return response.worst_relative_std
    capped = max(response.std[name] / (STD_CAP * std) for name, std in plain.std.items())
    return max(response.worst_relative_std / (WORST_STD_GOAL * plain.worst_relative_std),
               capped)


def _scale_within(arm_ratio: Callable[[float], float], limits: Limits) -> float:
    """The input's peak at which the arm's motion meets its limits, found in a few replays.

    ``arm_ratio(scale)``: the motion's largest ratio to its share of a limit at that peak
    (:func:`_arm_ratio`). The bound where it keeps within them; else secant steps on the log
    ratio against the log scale (the arm's excursion grows with the input, not in proportion),
    at most :data:`SCALE_TRIALS` replays, the largest scale found within the limits (the last
    tried where none is: the search penalises its overshoot). So the search ranks each
    candidate at the peak it could be played at, not at a bound its arm would exceed.
    """
    scale = limits.max_input
    if limits.max_arm_rad is None and limits.max_arm_rate is None:
        return scale
    ratio = arm_ratio(scale)
    if ratio <= 1.0:
        return scale
    lowest = SMALLEST_SCALE * limits.max_input
    within, slope = None, 1.0
    for _ in range(SCALE_TRIALS):
        trial = float(np.clip(scale * (SCALE_AIM / ratio) ** (1.0 / slope), lowest,
                              limits.max_input))
        trial_ratio = arm_ratio(trial)
        if trial_ratio <= 1.0 and (within is None or trial > within):
            within = trial
        if trial != scale and trial_ratio > 0.0:
            slope = max(np.log(trial_ratio / ratio) / np.log(trial / scale), 0.2)
        scale, ratio = trial, trial_ratio
        if SCALE_AIM <= ratio <= 1.0:
            break
    return within if within is not None else scale


def _within_limits(response, amplitudes, limits: Limits,
                   amplification: float = EXPERIMENT_AMPLIFICATION,
                   smallest: float = SMALLEST_SCALE, name: str = "design"):
    """The largest scale (at most the bound) whose response keeps the arm within its limits.

    Bisection on the log scale down to :data:`SMALLEST_SCALE` of the bound, or below it down to
    ``smallest`` where even that goes beyond them (the arm's excursion grows with the input, not
    in proportion). Returns ``(scale, (time_s, inputs, Response))``; raises
    :class:`~mb_estimation.errors.SimulationError` naming the input (``name``) where even that
    smallest scale goes beyond the limits.
    """
    scale = limits.max_input
    outcome = response(amplitudes, scale)
    if _overshoot(outcome[-1], limits, amplification) <= 0.0:
        return scale, outcome
    low, high = SMALLEST_SCALE * scale, scale
    lowest = response(amplitudes, low)
    if _overshoot(lowest[-1], limits, amplification) > 0.0 and smallest < SMALLEST_SCALE:
        low, high = smallest * scale, low  # further down, for the multisine
        lowest = response(amplitudes, low)
    if _overshoot(lowest[-1], limits, amplification) > 0.0:
        raise SimulationError(
            f"no input within {smallest:.1%} of the bound keeps the arm within its limits (the "
            f"{name} at {low:.3g}: {lowest[-1].arm_peak_rad:.3g} rad, "
            f"{lowest[-1].arm_rate_peak:.3g} rad/s, a start-state change amplified "
            f"{lowest[-1].amplification:.3g}× where it may be {amplification:g}×); raise "
            "--max-arm-rad/--max-arm-rate or lower --max-input")
    outcome = lowest
    for _ in range(BISECTIONS):
        middle = np.sqrt(low * high)
        trial = response(amplitudes, middle)
        if _overshoot(trial[-1], limits, amplification) <= 0.0:
            low, outcome = middle, trial
        else:
            high = middle
    return float(low), outcome
