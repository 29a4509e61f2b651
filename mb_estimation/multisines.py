"""The multisine inputs an experiment plays: tones, their phases, the peak and the fade.

Pure numpy (no JAX): the experiment design (:mod:`mb_estimation.excitation`) builds its
candidates with them, and the report and the tests rebuild a design's input from its file.
A multisine is ``u(t) = Σ_k a_k sin(2π f_k t + φ_k)``; :func:`played` scales it to a peak
and fades it in and out as the exciter node plays it (:mod:`mb_estimation.fade`).
"""

from __future__ import annotations

import functools

import numpy as np

from mb_estimation.fade import fade

#: The low-crest phases (:func:`low_crest_phases`): clipping iterations, the clip level as a
#: fraction of the peak, and the grid's rate [Hz] (ten samples per period of a 10 Hz tone).
CREST_ITERATIONS = 100
CREST_CLIP = 0.9
CREST_RATE_HZ = 100.0


def schroeder_phases(count: int) -> np.ndarray:
    """``φ_k = -π k (k+1) / K`` [rad]: the multisine of equal amplitudes with a low crest."""
    k = np.arange(count)
    return -np.pi * k * (k + 1) / count


def low_crest_phases(amplitudes, frequencies_hz, duration_s: float,
                     iterations: int = CREST_ITERATIONS) -> np.ndarray:
    """Phases [rad] giving the multisine of ``amplitudes`` a low crest factor over ``duration_s``.

    The crest factor (peak / RMS) sets how much power an input bound leaves: Schroeder's phases
    give about 1.9 for any amplitudes, so the bound's power is spent on a few peaks. Clipping
    and projecting back (Van der Ouderaa, Schoukens and Renneboog, 1988: the signal clipped at
    :data:`CREST_CLIP` of its peak, its phases those of the clipped signal's least-squares fit
    on the tones, the amplitudes kept), from Schroeder's phases, on a grid of
    :data:`CREST_RATE_HZ`; the phases of the lowest crest met. Deterministic.
    """
    amplitudes = np.abs(np.asarray(amplitudes, dtype=np.float64))
    count = len(amplitudes)
    basis, projection = _tones(tuple(np.asarray(frequencies_hz, dtype=np.float64)),
                               float(duration_s))

    def crest(signal):
        return np.max(np.abs(signal)) / np.sqrt(np.mean(signal**2))

    phases = schroeder_phases(count)
    signal = basis @ np.concatenate([amplitudes * np.cos(phases), amplitudes * np.sin(phases)])
    best, best_phases = crest(signal), phases
    for _ in range(iterations):
        peak = np.max(np.abs(signal))
        fitted = projection @ np.clip(signal, -CREST_CLIP * peak, CREST_CLIP * peak)
        phases = np.arctan2(fitted[count:], fitted[:count])
        signal = basis @ np.concatenate([amplitudes * np.cos(phases),
                                         amplitudes * np.sin(phases)])
        if crest(signal) < best:
            best, best_phases = crest(signal), phases
    return best_phases


@functools.lru_cache(maxsize=4)
def _tones(frequencies_hz: tuple[float, ...], duration_s: float):
    """The tones' sines and cosines on :func:`low_crest_phases`'s grid, and their pseudo-inverse."""
    time_s = np.arange(int(round(duration_s * CREST_RATE_HZ)) + 1) / CREST_RATE_HZ
    angle = 2 * np.pi * np.outer(time_s, frequencies_hz)
    basis = np.hstack([np.sin(angle), np.cos(angle)])
    return basis, np.linalg.pinv(basis)


def multisine(time_s, amplitudes, frequencies_hz, phases) -> np.ndarray:
    """``Σ_k a_k sin(2π f_k t + φ_k)`` at ``time_s`` ``[n]``."""
    t = np.asarray(time_s, dtype=np.float64)[:, None]
    return np.sin(2 * np.pi * np.asarray(frequencies_hz) * t + np.asarray(phases)) @ np.asarray(
        amplitudes, dtype=np.float64)


def at_peak(signal: np.ndarray, peak: float) -> np.ndarray:
    """``signal`` scaled so that its largest magnitude is ``peak`` (zero stays zero)."""
    largest = np.max(np.abs(signal))
    return signal * (peak / largest) if largest > 0 else signal


def played(time_s: np.ndarray, amplitudes, frequencies_hz, phases, peak: float) -> np.ndarray:
    """The multisine at ``peak`` [input units] faded in and out, as the exciter plays it."""
    signal = at_peak(multisine(time_s, amplitudes, frequencies_hz, phases), peak)
    return signal * fade(len(time_s), 1.0 / (time_s[1] - time_s[0]))
