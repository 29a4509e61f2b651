"""Real-time per-joint shadow-state filter: a Kalman filter on [q, q̇, q̈] with white-jerk noise.

One module on purpose: one filter and its state. About a quarter is the model's
derivation (below) and the record of how the defaults were tuned (:class:`JerkFilterSettings`);
the equations (:func:`transition` ... :func:`update`, and the scalar forms that run at 1 kHz)
follow that derivation's equation numbers, and the per-joint state machine (:class:`JointFilter`:
gate, re-initialise, re-anchor) is the scalar forms' only user, so they read best together.

The online node runs one :class:`JointFilter` per joint in its joint-state callback (1 kHz), so
this module is plain numpy and float arithmetic (no JAX): one :meth:`JointFilter.step` costs a
few microseconds (``test/test_kalman.py`` measures it).

Model: ``shared/reference/ft-bias-kalman-report.txt`` §1.3, "Constant Acceleration with
Integrated Jerk Noise" (equation numbers below are the report's). The jerk is white noise,
eq. (33): d³q/dt³ = w(t) with E[w(t) w(t')] = q_j δ(t - t'), i.e. q̇ = A q + L w with
A = [[0, 1, 0], [0, 0, 1], [0, 0, 0]] and L = [0, 0, 1]ᵀ, eq. (40). Discretised over Δt
(eq. (63)):

- transition exp(A Δt) = [[1, Δt, Δt²/2], [0, 1, Δt], [0, 0, 1]], eqs. (24)-(28) (A³ = 0, so the
  series stops);
- process noise Q_k = ∫₀^Δt exp(A(Δt-s)) L q_j Lᵀ exp(A(Δt-s))ᵀ ds, eqs. (51)-(55), in closed
  form eq. (59): q_j [[Δt⁵/20, Δt⁴/8, Δt³/6], [Δt⁴/8, Δt³/3, Δt²/2], [Δt³/6, Δt²/2, Δt]].

The report's scalar σ² = 𝐐 is ``jerk_psd`` here (q_j, [rad²/s⁵]). The measurement is the joint
angle alone: z = H x + v with H = [1, 0, 0] and v ~ N(0, r), r = ``angle_noise_rad²`` plus a
term for the stamps' jitter (:class:`JerkFilterSettings`).

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

__all__ = [
    "FilterCounters",
    "FilterOutput",
    "JerkFilterSettings",
    "JointFilter",
    "JointStateFilter",
    "SampleStatus",
    "innovation",
    "predict",
    "process_noise",
    "transition",
    "update",
]


@dataclass(frozen=True)
class JerkFilterSettings:
    """Tuning of one joint's white-jerk filter.

    The measurement variance of a sample is r = angle_noise_rad² + stamp_jitter_s² (q̇² + P_q̇q̇),
    q̇ the predicted rate: an error δ in the stamp shifts the angle by q̇ δ (first order; the
    correlation of that error with the state is neglected).

    How the defaults were chosen (encoder-measured Furuta pendulum, joint states at 0.5-1 kHz).
    They were checked on the package's own simulations of the synthetic rig
    (``config/furuta_synthetic.yaml``, 6 s of the swingup, release and multisine scenarios at
    1 kHz, noise 1e-3 rad) and on the seven real recordings in
    ``shared/data/peer-furuta-hardware`` (500 Hz, ODrive driver stamps):

    - ``angle_noise_rad`` = 1e-3 rad: the noise of the simulated recordings; it covers the
      quantisation of 4096-count encoders (1.5e-3 rad steps, error std 1.5e-3/√12 = 4.4e-4 rad)
      with margin.
    - ``jerk_psd`` q_j = 1e6 rad²/s⁵: the model's acceleration is a random walk, √(q_j τ) after
      τ, i.e. ~30 rad/s² per ms. The rig's motor steps the arm's acceleration by
      1e3-3e3 rad/s² within a few ms (hardware voltage steps, simulated swing-up), and with
      q_j = 1e4-1e5 the filter fell behind those steps (ten gated samples, then a
      re-initialisation) in most recordings; with 1e6 no recording but the extreme simulated
      release (arm whipped at 40 rad/s, jerk up to 5e5 rad/s³: q_j = 1e7 or stamp_jitter_s = 4e-4
      follow it) loses track. The price is smoothing: the filter's bandwidth is
      ≈ (q_j / (r Δt))^(1/6) ≈ 300 rad/s (50 Hz) at 1 kHz, and the rate error RMS on smooth
      motion is ≈ 0.2 rad/s against 1.4 rad/s for finite differences (0.07 rad/s at q_j = 1e4).
      Lower q_j where the motion is known to be gentle. The value holds for samples
      ``reference_interval_s`` = 1 ms apart; at longer intervals an acceleration step falls
      between fewer samples, so each step uses q_j (Δt / 1 ms)² (Δt ≥ 1 ms). Measured on a
      simulated swing-up at 100 Hz: with q_j unscaled 907 of the arm's 1000 samples were gated
      (89 re-initialisations), scaled none; at 1 kHz none either way.
    - ``stamp_jitter_s`` = 2e-4 s: header stamps are taken when the driver publishes, not when
      the encoder was read; in the hardware recordings that scatters by ~0.2-0.5 ms, which at
      15 rad/s is 3-8 mrad, several times the encoder noise (without this term 1-2 % of the
      arm's samples were gated). Set 0 when stamps are exact (simulations).
    - ``gate_sigma`` = 5: Gaussian noise fails it once in ~1.7e6 samples (~30 min at 1 kHz),
      which costs one skipped update.
    - ``max_consecutive_rejections`` = 10 (10 ms at 1 kHz): a glitch is one or a few samples; a
      level still rejected after 10 samples in a row is a real jump (or the filter has lost
      track), so the next such sample re-initialises the filter on the measurement.
    - ``initial_rate_std`` = 20 rad/s and ``initial_acceleration_std`` = 1000 rad/s²: the prior at
      (re-)initialisation, about the largest rate and acceleration seen in those recordings
      (arm: 15 rad/s and ~2e3 rad/s² on hardware, up to 40 rad/s simulated; pendulum ≲ 20 rad/s).
    - ``max_gap_s`` = 1 s: after a longer gap (driver restart, lost connection) the prediction is
      meaningless (rate std √(q_j Δt³/3) ≈ 580 rad/s at 1 s) and its covariance so large that
      the update would lose precision, so the filter re-initialises instead. Shorter gaps are
      bridged by prediction: the covariance grows with Δt.

    Attributes:
        jerk_psd: q_j, spectral density of the white jerk noise [rad²/s⁵] (report eq. (33)).
        angle_noise_rad: standard deviation of the angle measurement [rad].
        gate_sigma: innovation gate in innovation standard deviations.
        max_consecutive_rejections: gated samples in a row after which the next one that fails
            the gate re-initialises the filter on its measurement.
        initial_rate_std: prior standard deviation of the rate at (re-)initialisation [rad/s].
        initial_acceleration_std: prior standard deviation of the acceleration [rad/s²].
        max_gap_s: longest stamp gap bridged by prediction [s]; longer gaps re-initialise.
        stamp_jitter_s: standard deviation of the stamps' error [s] (0: exact stamps).
        reference_interval_s: sample interval [s] at which ``jerk_psd`` applies unscaled.
    """

    jerk_psd: float = 1.0e6
    angle_noise_rad: float = 1.0e-3
    gate_sigma: float = 5.0
    max_consecutive_rejections: int = 10
    initial_rate_std: float = 20.0
    initial_acceleration_std: float = 1000.0
    max_gap_s: float = 1.0
    stamp_jitter_s: float = 2.0e-4
    reference_interval_s: float = 1.0e-3

    def jerk_psd_for(self, dt: float) -> float:
        """q_j for samples ``dt`` [s] apart: scaled by (Δt / reference interval)² above it."""
        return self.jerk_psd * max(1.0, dt / self.reference_interval_s) ** 2

    def __post_init__(self):
        for name in ("jerk_psd", "angle_noise_rad", "gate_sigma", "initial_rate_std",
                     "initial_acceleration_std", "max_gap_s", "reference_interval_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive and finite, got {value}")
        if not (math.isfinite(self.stamp_jitter_s) and self.stamp_jitter_s >= 0):
            raise ValueError(f"stamp_jitter_s must be non-negative and finite, got "
                             f"{self.stamp_jitter_s}")
        if int(self.max_consecutive_rejections) != self.max_consecutive_rejections or \
                self.max_consecutive_rejections < 0:
            raise ValueError("max_consecutive_rejections must be a non-negative integer, "
                             f"got {self.max_consecutive_rejections}")


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


# --- pure functions


def transition(dt: float) -> np.ndarray:
    """State transition exp(A Δt) = [[1, Δt, Δt²/2], [0, 1, Δt], [0, 0, 1]] (report eq. (28))."""
    return np.array([[1.0, dt, 0.5 * dt * dt], [0.0, 1.0, dt], [0.0, 0.0, 1.0]])


def process_noise(dt: float, jerk_psd: float) -> np.ndarray:
    """Discrete process noise Q_k over Δt for white jerk of density ``jerk_psd`` (eq. (59)).

    The integral of eqs. (51)-(55), ∫₀^Δt exp(A τ) L q_j Lᵀ exp(A τ)ᵀ dτ, in closed form.
    """
    d2 = dt * dt
    d3 = d2 * dt
    q = jerk_psd
    return np.array([
        [q * d3 * d2 / 20.0, q * d2 * d2 / 8.0, q * d3 / 6.0],
        [q * d2 * d2 / 8.0, q * d3 / 3.0, q * d2 / 2.0],
        [q * d3 / 6.0, q * d2 / 2.0, q * dt],
    ])


def predict(x: np.ndarray, P: np.ndarray, dt: float,
            jerk_psd: float) -> tuple[np.ndarray, np.ndarray]:
    """Kalman prediction over Δt: (F x, F P Fᵀ + Q_k) with F = :func:`transition` (eq. (63)).

    ``P`` must be symmetric (only its upper triangle is read); the result is exactly symmetric.
    """
    xs, ps = _predict(x.tolist(), _upper(P), float(dt), float(jerk_psd))
    return np.array(xs), _full(ps)


def innovation(x: np.ndarray, P: np.ndarray, z: float, r: float) -> tuple[float, float]:
    """Innovation z - H x and its variance H P Hᵀ + r for the angle measurement H = [1, 0, 0]."""
    return float(z) - float(x[0]), float(P[0, 0]) + float(r)


def update(x: np.ndarray, P: np.ndarray, z: float,
           r: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Kalman update with an angle measurement ``z`` of variance ``r`` (H = [1, 0, 0]).

    Returns ``(x, P, innovation, innovation_variance)``: x + K ν and P - K S Kᵀ with
    S = P₀₀ + r, K = P[:, 0] / S. ``P`` must be symmetric; the result is exactly symmetric.
    """
    xs, ps, nu, s = _update(x.tolist(), _upper(P), float(z), float(r))
    return np.array(xs), _full(ps), nu, s


# Float kernels of predict and update: the mean as (x0, x1, x2) and the symmetric covariance by
# its upper triangle (p00, p01, p02, p11, p12, p22). Written out entry by entry because numpy's
# per-call overhead on 3x3 arrays (~1 µs per operation) would dominate the callback; the tests
# compare predict/update with the plain matrix expressions.


def _upper(P: np.ndarray) -> tuple[float, ...]:
    (p00, p01, p02), (_, p11, p12), (_, _, p22) = P.tolist()
    return p00, p01, p02, p11, p12, p22


def _full(p: Sequence[float]) -> np.ndarray:
    p00, p01, p02, p11, p12, p22 = p
    return np.array([p00, p01, p02, p01, p11, p12, p02, p12, p22]).reshape(3, 3)


def _predict(x: Sequence[float], p: Sequence[float], dt: float,
             q: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    x0, x1, x2 = x
    p00, p01, p02, p11, p12, p22 = p
    h = 0.5 * dt * dt
    # rows of F P (the third is P's)
    r00 = p00 + dt * p01 + h * p02
    r01 = p01 + dt * p11 + h * p12
    r02 = p02 + dt * p12 + h * p22
    r11 = p11 + dt * p12
    r12 = p12 + dt * p22
    # (F P) Fᵀ + Q_k, Q_k from eq. (59)
    d2 = dt * dt
    d3 = d2 * dt
    return (x0 + dt * x1 + h * x2, x1 + dt * x2, x2), (
        r00 + dt * r01 + h * r02 + q * d3 * d2 / 20.0,
        r01 + dt * r02 + q * d2 * d2 / 8.0,
        r02 + q * d3 / 6.0,
        r11 + dt * r12 + q * d3 / 3.0,
        r12 + q * d2 / 2.0,
        p22 + q * dt,
    )


def _update(x: Sequence[float], p: Sequence[float], z: float,
            r: float) -> tuple[tuple[float, ...], tuple[float, ...], float, float]:
    x0, x1, x2 = x
    p00, p01, p02, p11, p12, p22 = p
    nu = z - x0
    s = p00 + r
    k0, k1, k2 = p00 / s, p01 / s, p02 / s
    g = r / s  # 1 - k0, without the cancellation
    # P - K S Kᵀ = P - P[:, 0] P[0, :] / S; its first row as P[0, :] r / S
    return (x0 + k0 * nu, x1 + k1 * nu, x2 + k2 * nu), (
        p00 * g, p01 * g, p02 * g, p11 - k1 * p01, p12 - k1 * p02, p22 - k2 * p02), nu, s


# --- one joint


class JointFilter:
    """Shadow state [angle, rate, acceleration] of one joint, filtered sample by sample.

    A small mutable object (it lives in the node's callback); the math is in the pure functions
    :func:`predict` and :func:`update` (their float kernels). The mean x [3] and covariance
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
        self._p: tuple[float, ...] = self._p_init  # covariance, upper triangle (see _predict)
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
        return None if self._x is None else _full(self._p)

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
        x, p = _predict(self._x, self._p, dt, settings.jerk_psd_for(dt))
        self._stamp = stamp_s
        r = self._r
        if self._jitter2:
            r += self._jitter2 * (x[1] * x[1] + p[3])
        nu = z - x[0]
        s = p[0] + r
        gate = settings.gate_sigma
        if nu * nu <= gate * gate * s:
            self._x, self._p, nu, s = _update(x, p, z, r)
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
            x, p = _predict(x, p, dt, self._settings.jerk_psd_for(dt))
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
