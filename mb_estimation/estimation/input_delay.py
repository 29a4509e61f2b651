"""How late the input acts, measured on a fit's states (a check, not a fit).

A driver that applies its command ``d`` seconds after the recorded stamp (a USB link, a control
loop's period) gives a rigid-model residual, on states that follow the data, of
``G (u(t - d) - u(t))``, with ``G`` the input's generalised gain. Over one step of the
estimation grid the rigid limit's momentum balance (the first of the two residuals of
:func:`~mb_estimation.multibody.variational.variational_residuals` less the second) is

    e_k = h ∂L/∂θ|mid + Q_k(u_k) - (p_{k+1} - p_k)

and ``e_k`` with the input held ``d`` later is ``e_k + G h (u_k(d) - u_k)``, with ``u_k(d)`` the
held input's mean over ``[t_k - d, t_{k+1} - d]``. :func:`apparent_input_delay` scans ``d``
for the least sum of squares: no refit, a few milliseconds per trial delay. Its standard
deviation comes from the curvature of that sum at its minimum and the residuals' variance,
floored at a quarter of the grid step: neighbouring residuals are correlated (the states are
smooth), and the curvature alone understated the spread 20-fold (a fit on 3 s of a rigid
multisine delayed by 10 ms gives 8.9 ± 0.045 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mb_estimation.compiled import Compiler
from mb_estimation.multibody.joint_space import joint_states
from mb_estimation.multibody.variational import input_impulse_gains, variational_residuals
from mb_estimation.numerics import jax, run_once
from mb_estimation.signals.preprocess import held_input_integral, held_input_means

jnp = jax.numpy

#: The delays tried [s]: from 20 ms early to 60 ms late, in steps of a tenth of a millisecond
#: (interpolated between grid steps by the held input's means).
DELAY_RANGE_S = (-0.02, 0.06)
DELAY_RESOLUTION_S = 1e-4


@dataclass(frozen=True)
class InputDelay:
    """The input's apparent delay after its recorded stamps [s] and its standard deviation.

    ``at_edge``: the least sum of squares lay at an end of :data:`DELAY_RANGE_S`, so the delay
    may be further out than ``delay_s``.
    """

    delay_s: float
    std_s: float
    at_edge: bool = False


#: The check's program, compiled once (and kept on disk with the compiled-code cache: a later
#: process loads it instead of tracing it again) for chunks of this many steps: every recording
#: length runs the same program, and its temporaries stay those of one chunk (the whole 60 s at
#: 1 kHz at once held about 95 MB more at the peak).
BALANCE_CHUNK = 4096
_COMPILED = Compiler()


@run_once
def _momentum_balance(system, angles, rates, inputs, h):
    """``e_k`` ``[n-1, n_joints]`` on states, and ``∂e_k/∂u`` ``[n_joints, n_inputs]``.

    ``e_k`` is affine in the held input, with the same gain at every step (the motor's,
    :func:`~mb_estimation.multibody.variational.input_impulse_gains`).
    """
    states = jax.vmap(lambda a, r: joint_states(system, a, r))(angles, rates)
    joints = angles.shape[-1]
    identity = jnp.eye(joints)

    def balance(k):
        residual = variational_residuals(
            system, jax.tree_util.tree_map(lambda a: a[k], states),
            jax.tree_util.tree_map(lambda a: a[k + 1], states), inputs[k], h, identity)
        return residual[:joints] - residual[joints:]

    return jax.vmap(balance)(jnp.arange(inputs.shape[0])), input_impulse_gains(system, h)


def momentum_balance(system, angles, rates, held, h: float):
    """:func:`_momentum_balance` ``(e_k [n-1, n_joints], ∂e_k/∂u)`` in chunks of steps.

    ``angles``, ``rates`` ``[n, n_joints]`` on the grid of step ``h`` [s], ``held [n-1, c]``
    the input held over each step. The steps in chunks of :data:`BALANCE_CHUNK` (the last
    padded with the last values repeated), each through the one compiled program.
    """
    steps = len(held)
    extra = -(-steps // BALANCE_CHUNK) * BALANCE_CHUNK - steps

    def padded(values):  # on the host: slices of device arrays would compile per slice
        values = np.asarray(values, dtype=np.float64)
        return np.pad(values, ((0, extra),) + ((0, 0),) * (values.ndim - 1), mode="edge")

    angles, rates, held = padded(angles), padded(rates), padded(held)
    parts = [_COMPILED(_momentum_balance, None, system, angles[first:first + BALANCE_CHUNK + 1],
                       rates[first:first + BALANCE_CHUNK + 1], held[first:first + BALANCE_CHUNK],
                       np.asarray(h))
             for first in range(0, steps, BALANCE_CHUNK)]
    return (np.concatenate([np.asarray(part[0]) for part in parts])[:steps],
            np.asarray(parts[0][1]))


def apparent_input_delay(system, time_s, angles, rates, input_time_s, inputs
                         ) -> InputDelay | None:
    """The delay that best explains the rigid-model residuals on estimated states (module doc).

    ``time_s [n]`` the estimation grid [s] with the estimated joint ``angles``, ``rates``
    ``[n, n_joints]``; ``input_time_s [q]``, ``inputs [q, c]`` the recorded input (held from
    each stamp on). None when the rig has no input, or the input never changes on the grid
    (nothing to time).
    """
    inputs = np.asarray(inputs, dtype=np.float64)
    if inputs.ndim != 2 or inputs.shape[1] == 0 or len(time_s) < 3:
        return None
    time_s = np.asarray(time_s, dtype=np.float64)
    h = float(time_s[1] - time_s[0])
    held = held_input_means(input_time_s, inputs, time_s)
    if np.ptp(held, axis=0).max() == 0.0:
        return None
    balance, gain = momentum_balance(system, angles, rates, held, h)
    delays = np.arange(DELAY_RANGE_S[0], DELAY_RANGE_S[1] + 0.5 * DELAY_RESOLUTION_S,
                       DELAY_RESOLUTION_S)
    costs = delay_costs(balance, gain, held, np.asarray(input_time_s, dtype=np.float64),
                         inputs, time_s, delays)
    best = int(np.argmin(costs))
    variance = costs[best] / max(balance.size - 1, 1)
    curvature = _curvature(delays, costs, best)
    std = float(np.sqrt(2.0 * variance / curvature)) if curvature > 0 else float("inf")
    return InputDelay(float(delays[best]), max(std, 0.25 * h),
                      at_edge=best in (0, len(delays) - 1))


def delay_costs(balance, gain, held, input_time_s, inputs, time_s, delays) -> np.ndarray:
    """``Σ_k |e_k + G h (u_k(d) - u_k)|²`` for each of the ascending, evenly spaced ``delays``.

    ``u_k(d)``: the held input's mean over ``[t_k - d, t_{k+1} - d]``, a difference of its
    running integral. Where the grid step is a whole number ``q`` of the delays' spacing
    (1 ms against 0.1 ms), every ``t_k - d`` lies on one grid of that spacing: the integral is
    evaluated there once and each delay reads every ``q``-th value (the same costs as shifting
    the stamps per delay, to round-off, about five times faster). Otherwise the
    stamps are shifted per delay.
    """
    def cost(means):  # means: the held input's ``u_k(d)`` [n-1, c]
        return float(np.sum((balance + (means - held) @ gain.T) ** 2))

    steps = np.diff(time_s)
    spacing = delays[1] - delays[0]
    ratio = steps[0] / spacing
    q = int(round(ratio))
    if not (q >= 1 and abs(ratio - q) <= 1e-9 * ratio
            and np.allclose(steps, steps[0], rtol=1e-9, atol=0.0)):
        return np.array([cost(held_input_means(input_time_s + delay, inputs, time_s))
                         for delay in delays])
    count = len(delays)  # t_k - d_j is point k q + (count - 1 - j) of the fine grid
    fine = time_s[0] - delays[-1] + spacing * np.arange((len(time_s) - 1) * q + count)
    integral = held_input_integral(input_time_s, inputs, fine)
    return np.array([cost(np.diff(integral[count - 1 - j::q][:len(time_s)], axis=0)
                          / steps[:, None]) for j in range(count)])


def _curvature(delays, costs, best: int) -> float:
    """Second derivative of the cost at its minimum, from a parabola through its neighbours."""
    low, high = max(best - 5, 0), min(best + 6, len(delays))
    if high - low < 3:
        return 0.0
    coefficients = np.polyfit(delays[low:high] - delays[best], costs[low:high], 2)
    return 2.0 * float(coefficients[0])
