"""The white-jerk model of one joint's angle: its settings, its transition, its Kalman steps.

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

The float kernels (:func:`predict_floats`, :func:`update_floats`) are what the 1 kHz filter
(:mod:`mb_estimation.online.kalman`) runs; :func:`predict` and :func:`update` are their array
forms. Plain numpy and float arithmetic (no JAX).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["JerkFilterSettings", "full_covariance", "innovation", "predict", "predict_floats",
           "process_noise", "transition", "update", "update_floats", "upper_triangle"]


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
    xs, ps = predict_floats(x.tolist(), upper_triangle(P), float(dt), float(jerk_psd))
    return np.array(xs), full_covariance(ps)


def innovation(x: np.ndarray, P: np.ndarray, z: float, r: float) -> tuple[float, float]:
    """Innovation z - H x and its variance H P Hᵀ + r for the angle measurement H = [1, 0, 0]."""
    return float(z) - float(x[0]), float(P[0, 0]) + float(r)


def update(x: np.ndarray, P: np.ndarray, z: float,
           r: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Kalman update with an angle measurement ``z`` of variance ``r`` (H = [1, 0, 0]).

    Returns ``(x, P, innovation, innovation_variance)``: x + K ν and P - K S Kᵀ with
    S = P₀₀ + r, K = P[:, 0] / S. ``P`` must be symmetric; the result is exactly symmetric.
    """
    xs, ps, nu, s = update_floats(x.tolist(), upper_triangle(P), float(z), float(r))
    return np.array(xs), full_covariance(ps), nu, s


# Float kernels of predict and update: the mean as (x0, x1, x2) and the symmetric covariance by
# its upper triangle (p00, p01, p02, p11, p12, p22). Written out entry by entry because numpy's
# per-call overhead on 3x3 arrays (~1 µs per operation) would dominate the callback; the tests
# compare predict/update with the plain matrix expressions.


def upper_triangle(P: np.ndarray) -> tuple[float, ...]:
    """A symmetric 3×3 covariance by its upper triangle ``(p00, p01, p02, p11, p12, p22)``."""
    (p00, p01, p02), (_, p11, p12), (_, _, p22) = P.tolist()
    return p00, p01, p02, p11, p12, p22


def full_covariance(p: Sequence[float]) -> np.ndarray:
    """The symmetric 3×3 covariance of its upper triangle (:func:`upper_triangle`)."""
    p00, p01, p02, p11, p12, p22 = p
    return np.array([p00, p01, p02, p01, p11, p12, p02, p12, p22]).reshape(3, 3)


def predict_floats(x: Sequence[float], p: Sequence[float], dt: float,
                   q: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """:func:`predict` on floats: the mean ``x`` and the covariance's upper triangle ``p``."""
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


def update_floats(x: Sequence[float], p: Sequence[float], z: float,
                  r: float) -> tuple[tuple[float, ...], tuple[float, ...], float, float]:
    """:func:`update` on floats: the mean ``x`` and the covariance's upper triangle ``p``."""
    x0, x1, x2 = x
    p00, p01, p02, p11, p12, p22 = p
    nu = z - x0
    s = p00 + r
    k0, k1, k2 = p00 / s, p01 / s, p02 / s
    g = r / s  # 1 - k0, without the cancellation
    # P - K S Kᵀ = P - P[:, 0] P[0, :] / S; its first row as P[0, :] r / S
    return (x0 + k0 * nu, x1 + k1 * nu, x2 + k2 * nu), (
        p00 * g, p01 * g, p02 * g, p11 - k1 * p01, p12 - k1 * p02, p22 - k2 * p02), nu, s
