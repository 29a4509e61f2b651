"""Real-time per-joint shadow-state filter: a Kalman filter on [q, q̇, q̈] with white-jerk noise.

The model, its settings and its Kalman steps are :mod:`mb_estimation.online.jerk_model`
(equation numbers of ``shared/reference/ft-bias-kalman-report.txt`` §1.3); here is the
per-joint state machine that runs them (:class:`JointFilter`: gate, re-initialise, re-anchor)
and its form for every joint of a rig (:class:`JointStateFilter`).

The online node runs one :class:`JointFilter` per joint in its joint-state callback (1 kHz), so
this module is plain numpy and float arithmetic (no JAX): one :meth:`JointFilter.step` costs a
few microseconds (``test/test_kalman.py`` measures it).

Angles are multi-turn (unwrapped): the filter does no wrapping, so a joint driver that reports
angles in (-π, π] must be unwrapped by the caller first, otherwise every wrap looks like a 2π jump
(gated, then re-initialised).

Stamps are float seconds. With absolute ROS times (~1.7e9 s) a float64 resolves ~0.24 µs, i.e.
Δt at 1 kHz carries a relative error up to ~2.4e-4; pass stamps relative to a start time where that
matters.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mb_estimation.online.jerk_model import (
    JerkFilterSettings,
    full_covariance,
    predict_floats,
    update_floats,
)

__all__ = ["FilterCounters", "FilterOutput", "JointFilter", "JointStateFilter", "SampleStatus"]


class SampleStatus(enum.Enum):
    """What :meth:`JointFilter.step` did with a sample."""

    INITIALISED = "initialised"  # first sample after construction or reset()
    ACCEPTED = "accepted"  # passed the gate, used in the update
    GATED = "gated"  # failed the gate: not used, the state is the prediction
    REINITIALISED = "reinitialised"  # a real jump or a long gap: the state restarts on it
    OUT_OF_ORDER = "out_of_order"  # stamp not after the filter's: skipped, state untouched
    NON_FINITE = "non_finite"  # NaN/inf angle or stamp: skipped, state untouched
    REANCHORED = "reanchored"  # not a sample: the output of JointFilter.reanchor


_USED = frozenset((SampleStatus.INITIALISED, SampleStatus.ACCEPTED, SampleStatus.REINITIALISED,
                   SampleStatus.REANCHORED))


class FilterOutput(NamedTuple):
    """One joint's filtered state after a sample (a named tuple: cheap in the 1 kHz callback).

    ``stamp_s`` is the filter's time, which is the sample's stamp unless the sample was skipped
    (out of order, non-finite). Before the first sample the state fields are NaN. ``innovation``
    (z - predicted angle) and ``innovation_std`` (its predicted std, the stamp-jitter term
    included) are NaN where no innovation was formed: first sample, re-initialisation after a
    gap, skipped samples, :meth:`JointFilter.reanchor`. ``accepted`` is true where the state now
    reflects this input (initialised, accepted, re-initialised, re-anchored).
    """

    stamp_s: float
    angle: float
    rate: float
    acceleration: float
    angle_std: float
    rate_std: float
    acceleration_std: float
    accepted: bool
    status: SampleStatus
    innovation: float
    innovation_std: float


@dataclass(frozen=True)
class FilterCounters:
    """Snapshot of a :class:`JointFilter`'s counters.

    Every sample passed to :meth:`JointFilter.step` increments exactly one of the first five
    (``accepted`` includes the first, initialising sample), so their sum is the number of samples.

    Attributes:
        accepted: samples used (initialisation or a gated-in update).
        gated: samples rejected by the innovation gate.
        out_of_order: samples whose stamp was not after the filter's (duplicates, reordering).
        non_finite: samples with a NaN/inf angle or stamp.
        reinitialised: samples the filter restarted on (after a run of rejections or a gap
            longer than ``max_gap_s``).
        reanchored: calls to :meth:`JointFilter.reanchor` (not samples).
    """

    accepted: int = 0
    gated: int = 0
    out_of_order: int = 0
    non_finite: int = 0
    reinitialised: int = 0
    reanchored: int = 0


class JointFilter:
    """Shadow state [angle, rate, acceleration] of one joint, filtered sample by sample.

    A small mutable object (it lives in the node's callback); the math is in the pure functions
    :func:`~mb_estimation.online.jerk_model.predict_floats` and
    :func:`~mb_estimation.online.jerk_model.update_floats`. The mean x [3] and covariance
    P [3, 3] are float64, held as Python floats (P by its upper triangle) so that a step builds
    no numpy array (a third of the cost); :attr:`mean` and :attr:`covariance` give them as arrays.

    Sample handling in :meth:`step`:

    - first sample (after construction or :meth:`reset`): x = [z, 0, 0],
      P = diag(angle_noise_rad², initial_rate_std², initial_acceleration_std²);
    - non-finite angle or stamp, or a stamp not after the filter's (duplicate, out of order):
      skipped and counted, the state is untouched;
    - otherwise predict over Δt; a gap longer than ``max_gap_s`` re-initialises instead, like a
      first sample;
    - gate: the sample is used if ν² ≤ gate_sigma² S (ν the innovation, S its variance); if not,
      the state stays at the prediction. After ``max_consecutive_rejections`` gated samples in a
      row, the next sample that fails the gate re-initialises the filter on its measurement:
      x = [z, predicted rate, predicted acceleration] (the rate is continuous across an angle
      jump such as an encoder re-zeroing) with the initial covariance.
    """

    __slots__ = ("_settings", "_r", "_jitter2", "_p_init", "_x", "_p", "_stamp", "_rejections",
                 "_counts")

    def __init__(self, settings: JerkFilterSettings | None = None):
        self._settings = settings if settings is not None else JerkFilterSettings()
        self._r = self._settings.angle_noise_rad ** 2
        self._jitter2 = self._settings.stamp_jitter_s ** 2
        self._p_init = (self._r, 0.0, 0.0, self._settings.initial_rate_std ** 2, 0.0,
                        self._settings.initial_acceleration_std ** 2)
        self._x: tuple[float, ...] | None = None  # mean (x0, x1, x2)
        self._p: tuple[float, ...] = self._p_init  # covariance, upper triangle (see predict_floats)
        self._stamp = math.nan
        self._rejections = 0
        self._counts = [0, 0, 0, 0, 0, 0]  # the fields of FilterCounters, in order

    @property
    def settings(self) -> JerkFilterSettings:
        return self._settings

    @property
    def initialised(self) -> bool:
        return self._x is not None

    @property
    def stamp_s(self) -> float:
        """Time of the current state [s] (NaN before the first sample)."""
        return self._stamp

    @property
    def mean(self) -> np.ndarray | None:
        """The mean [angle, rate, acceleration], float64 [3] (None before the first sample)."""
        return None if self._x is None else np.array(self._x)

    @property
    def covariance(self) -> np.ndarray | None:
        """The covariance, float64 [3, 3] (None before the first sample)."""
        return None if self._x is None else full_covariance(self._p)

    @property
    def counters(self) -> FilterCounters:
        return FilterCounters(*self._counts)

    def reset(self) -> None:
        """Forget the state and zero the counters (as constructed)."""
        self._x = None
        self._p = self._p_init
        self._stamp = math.nan
        self._rejections = 0
        self._counts = [0, 0, 0, 0, 0, 0]

    def _output(self, status: SampleStatus, nu: float = math.nan,
                s: float = math.nan) -> FilterOutput:
        """The current state as a :class:`FilterOutput` (NaN fields before the first sample)."""
        sqrt = math.sqrt
        if self._x is None:
            nan = math.nan
            return FilterOutput(nan, nan, nan, nan, nan, nan, nan, status in _USED, status, nu,
                                sqrt(s))
        x0, x1, x2 = self._x
        p = self._p
        return FilterOutput(self._stamp, x0, x1, x2, sqrt(p[0]), sqrt(p[3]), sqrt(p[5]),
                            status in _USED, status, nu, sqrt(s))

    def _restart(self, stamp_s: float, x: tuple[float, float, float]) -> None:
        self._x = x
        self._p = self._p_init
        self._stamp = stamp_s
        self._rejections = 0

    def step(self, stamp_s: float, angle_rad: float) -> FilterOutput:
        """Process one angle sample (unwrapped, [rad]) stamped ``stamp_s`` [s]."""
        stamp_s = float(stamp_s)
        z = float(angle_rad)
        counts = self._counts
        if not (math.isfinite(z) and math.isfinite(stamp_s)):
            counts[3] += 1
            return self._output(SampleStatus.NON_FINITE)
        if self._x is None:
            self._restart(stamp_s, (z, 0.0, 0.0))
            counts[0] += 1
            return self._output(SampleStatus.INITIALISED)
        dt = stamp_s - self._stamp
        if not dt > 0.0:
            counts[2] += 1
            return self._output(SampleStatus.OUT_OF_ORDER)
        settings = self._settings
        if dt > settings.max_gap_s:
            self._restart(stamp_s, (z, 0.0, 0.0))
            counts[4] += 1
            return self._output(SampleStatus.REINITIALISED)
        x, p = predict_floats(self._x, self._p, dt, settings.jerk_psd_for(dt))
        self._stamp = stamp_s
        r = self._r
        if self._jitter2:
            r += self._jitter2 * (x[1] * x[1] + p[3])
        nu = z - x[0]
        s = p[0] + r
        gate = settings.gate_sigma
        if nu * nu <= gate * gate * s:
            self._x, self._p, nu, s = update_floats(x, p, z, r)
            self._rejections = 0
            counts[0] += 1
            return self._output(SampleStatus.ACCEPTED, nu, s)
        if self._rejections < settings.max_consecutive_rejections:
            self._x, self._p = x, p
            self._rejections += 1
            counts[1] += 1
            return self._output(SampleStatus.GATED, nu, s)
        self._restart(stamp_s, (z, x[1], x[2]))
        counts[4] += 1
        return self._output(SampleStatus.REINITIALISED, nu, s)

    def reanchor(self, stamp_s: float, angle: float, rate: float, angle_std: float,
                 rate_std: float, *, acceleration: float | None = None,
                 acceleration_std: float | None = None) -> FilterOutput:
        """Replace the state by an external estimate (the estimator's window-end state).

        The mean becomes [angle, rate, acceleration] and the covariance
        diag(angle_std², rate_std², acceleration_std²). ``acceleration`` defaults to the filter's
        own current estimate (0 before the first sample) and ``acceleration_std`` to
        ``initial_acceleration_std``. If ``stamp_s`` is older than the filter's latest stamp, the
        anchor is propagated forward to that stamp with the motion model (the samples in between
        are not replayed); otherwise the filter's time becomes ``stamp_s`` (later samples must
        come after it). Resets the run of gated samples. Raises ``ValueError`` for non-finite
        values or non-positive standard deviations.
        """
        if acceleration is None:
            acceleration = 0.0 if self._x is None else self._x[2]
        if acceleration_std is None:
            acceleration_std = self._settings.initial_acceleration_std
        values = tuple(float(v) for v in (stamp_s, angle, rate, angle_std, rate_std, acceleration,
                                          acceleration_std))
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"reanchor needs finite values, got {values}")
        stamp_s, angle, rate, angle_std, rate_std, acceleration, acceleration_std = values
        if not (angle_std > 0 and rate_std > 0 and acceleration_std > 0):
            raise ValueError("reanchor needs positive standard deviations, got "
                             f"{(angle_std, rate_std, acceleration_std)}")
        x = (angle, rate, acceleration)
        p = (angle_std ** 2, 0.0, 0.0, rate_std ** 2, 0.0, acceleration_std ** 2)
        if self._x is not None and stamp_s < self._stamp:
            dt = self._stamp - stamp_s
            x, p = predict_floats(x, p, dt, self._settings.jerk_psd_for(dt))
        else:
            self._stamp = stamp_s
        self._x, self._p = x, p
        self._rejections = 0
        self._counts[5] += 1
        return self._output(SampleStatus.REANCHORED)


# --- all joints


class JointStateFilter:
    """One :class:`JointFilter` per joint, in the order of ``names`` (a thin wrapper)."""

    def __init__(self, names: Sequence[str],
                 settings: JerkFilterSettings | Sequence[JerkFilterSettings] | None = None):
        self._names = tuple(names)
        if len(set(self._names)) != len(self._names):
            raise ValueError(f"joint names must be unique, got {self._names}")
        if settings is None or isinstance(settings, JerkFilterSettings):
            per_joint = [settings] * len(self._names)
        else:
            per_joint = list(settings)
            if len(per_joint) != len(self._names):
                raise ValueError(f"{len(per_joint)} settings for {len(self._names)} joints")
        self._filters = tuple(JointFilter(s) for s in per_joint)
        nan = math.nan
        self._outputs = tuple(
            FilterOutput(nan, nan, nan, nan, nan, nan, nan, False, SampleStatus.NON_FINITE, nan,
                         nan) for _ in self._names)

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def filters(self) -> tuple[JointFilter, ...]:
        return self._filters

    @property
    def outputs(self) -> tuple[FilterOutput, ...]:
        """Each joint's output from the latest :meth:`step` (or :meth:`reanchor`)."""
        return self._outputs

    def step(self, stamp_s: float, angles) -> tuple[np.ndarray, np.ndarray]:
        """Filter one sample of all joints; returns the (angles, rates) arrays [n]."""
        values = angles.tolist() if isinstance(angles, np.ndarray) else list(angles)
        if len(values) != len(self._filters):
            raise ValueError(f"{len(values)} angles for {len(self._filters)} joints")
        self._outputs = outs = tuple(
            f.step(stamp_s, a) for f, a in zip(self._filters, values, strict=True))
        return np.array([o.angle for o in outs]), np.array([o.rate for o in outs])

    def reanchor(self, stamp_s: float, angles, rates, angle_stds, rate_stds) -> None:
        """:meth:`JointFilter.reanchor` each joint (arrays [n] in the order of ``names``)."""
        rows = (np.asarray(angles, float), np.asarray(rates, float),
                np.asarray(angle_stds, float), np.asarray(rate_stds, float))
        for row in rows:
            if row.shape != (len(self._filters),):
                raise ValueError(f"expected [{len(self._filters)}] values, got {row.shape}")
        self._outputs = tuple(
            f.reanchor(stamp_s, *(float(row[i]) for row in rows))
            for i, f in enumerate(self._filters))

    def reset(self) -> None:
        """:meth:`JointFilter.reset` every joint."""
        for f in self._filters:
            f.reset()

    def counters(self) -> dict[str, FilterCounters]:
        """Each joint's counters, by name."""
        return {name: f.counters for name, f in zip(self._names, self._filters, strict=True)}
