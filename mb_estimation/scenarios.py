"""Experiment scenarios for simulation: initial joint state and the input law.

Pure numerics. Each scenario gives the initial joint angles and rates and its input, once per
recording sample and held in between, exactly as a digital controller on the rig does (so the
recorded voltage, replayed with a zero-order hold, reproduces the run): an open-loop input as
a function of the sample index (computed on the host), or a feedback law of the rig's state
(compiled into the simulation):

- ``release``: θ1 = 0, θ2 = π − 0.03, at rest, zero voltage (appendix G.3). For the single
  pendulum: θ = π − 0.3.
- ``swingup``: from hanging at rest, an energy-shaping controller pumps the pendulum up and a
  linear state feedback catches it upright.
- ``pulse``: a 1 s voltage pulse starting at 0.5 s.
- ``multisine``: a sum of sines (0.2–3 Hz, Schroeder phases) — rich excitation.

Amplitudes are motor torques [N m], converted to volts with the rig's gain ``K``, so every
scenario excites any rig alike whatever its voltage scale.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from mb_estimation.errors import SimulationError
from mb_estimation.multibody import joint_angles, joint_rates
from mb_estimation.multisines import schroeder_phases
from mb_estimation.numerics import jax
from mb_estimation.rigs.furuta import rest_inertia

jnp = jax.numpy

SCENARIOS = ("release", "swingup", "pulse", "multisine")
ACTUATED_SCENARIOS = ("swingup", "pulse", "multisine")

PULSE_START_S = 0.5
PULSE_LENGTH_S = 1.0
PULSE_TORQUE = 0.2  # [N m]
MULTISINE_FREQUENCIES_HZ = np.linspace(0.2, 3.0, 8)
MULTISINE_PEAK_TORQUE = 0.3  # [N m], roughly
SWINGUP_TORQUE_LIMIT = 10.0  # [N m]
SWINGUP_ENERGY_GAIN = 10.0  # [N m / J]: torque per joule of missing pendulum energy
SWINGUP_ARM_DAMPING = 1.0  # [N m s/rad]: keeps the arm from spinning away while pumping
SWINGUP_KICK_TORQUE = 2.0  # [N m]: starts the swing from rest
# The balance controller takes over within this angle of upright [rad].
SWINGUP_CATCH_ANGLE = 0.35
# Longer than one cycle, the swing-up repeats through the rig's own physics: at the start of
# each later cycle the controller nudges the arm (SWINGUP_NUDGE_TORQUE) and lets go, the
# pendulum falls, and the controller swings it up again.
SWINGUP_CYCLE_S = 10.0
SWINGUP_NUDGE_S = 0.05
SWINGUP_NUDGE_TORQUE = 0.2  # [N m]
SWINGUP_LET_GO_S = 2.0
SWINGUP_REPEAT_ENERGY = 1.1  # later swing-ups pump toward this multiple of the top's energy


@dataclass(frozen=True)
class Scenario:
    """Initial joint state and sample-and-hold input of a simulated experiment.

    Open loop: ``inputs(j)`` is the input at the sample indices ``j [n]``, ``[n, n_inputs]``
    [the rig's input units], computed on the host and handed to the simulation as data, so
    that one compiled simulation serves every open-loop scenario of a rig structure.
    Closed loop (``inputs`` None): ``law(j, state, system, constants)`` is the input at sample
    ``j`` from the bodies' ``state`` there; a module-level function, so that one compiled
    simulation serves every rig's values and every length (:mod:`mb_estimation.simulation`);
    ``constants``: the arrays it reads (its gains, the sample period), by name.
    """

    name: str
    initial_angles: tuple[float, ...]
    initial_rates: tuple[float, ...]
    inputs: Callable[[np.ndarray], np.ndarray] | None = None
    law: Callable | None = None
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)


def multisine_torque(time_s):
    """Multisine torque [N m] at ``time_s``: equal amplitudes, Schroeder phases (low crest)."""
    freqs = MULTISINE_FREQUENCIES_HZ
    count = len(freqs)
    phases = schroeder_phases(count)
    amplitude = MULTISINE_PEAK_TORQUE / np.sqrt(count)
    t = np.asarray(time_s)[..., None]
    return amplitude * np.sum(np.sin(2 * np.pi * freqs * t + phases), axis=-1)


def pulse_torque(time_s):
    """Pulse torque [N m]: ``PULSE_TORQUE`` on [0.5 s, 1.5 s), zero elsewhere."""
    t = np.asarray(time_s)
    on = (t >= PULSE_START_S) & (t < PULSE_START_S + PULSE_LENGTH_S)
    return np.where(on, PULSE_TORQUE, 0.0)


def _scalar_parameters(params: Mapping[str, object]) -> dict[str, float]:
    return {name: float(np.asarray(value).reshape(-1)[0]) for name, value in params.items()
            if name != "tilt"}


def furuta_balance_gain(params: Mapping[str, float]) -> np.ndarray:
    """LQR gain for the upright Furuta pendulum from a reduced-coordinate linearisation.

    State ``(θ1, θ2 − π, θ̇1, θ̇2)``, input voltage. Only used to catch the pendulum at the end
    of the swing-up; any stabilising gain would do.
    """
    p = _scalar_parameters(params)
    m11 = rest_inertia(p)  # M₁₁ upright equals M₁₁ hanging (cos² θ₂ = 1, sin² θ₂ = 0)
    m12 = -p["m_B"] * p["lA"] * p["l2"]
    m22 = p["J_Byy"] + p["m_B"] * p["l2"] ** 2
    mass = np.array([[m11, m12], [m12, m22]])
    stiffness = np.array([[0.0, 0.0], [0.0, p["m_B"] * p["gravity"] * p["l2"]]])
    damping = np.diag([p["b1"], p["b2"]])
    minv = np.linalg.inv(mass)
    a = np.block([[np.zeros((2, 2)), np.eye(2)], [minv @ stiffness, -minv @ damping]])
    b = np.concatenate([np.zeros(2), minv @ np.array([p["K"], 0.0])])[:, None]
    q = np.diag([1.0, 10.0, 0.1, 0.1])
    r = np.array([[1.0]])
    riccati = scipy.linalg.solve_continuous_are(a, b, q, r)
    return (np.linalg.solve(r, b.T @ riccati)).ravel()


def _swingup_constants(params, sample_period_s: float) -> dict[str, np.ndarray]:
    """What :func:`_swingup_law` reads: the rig's energies, gains and the cycle's samples."""
    p = _scalar_parameters(params)
    if p["K"] == 0.0:
        raise SimulationError("the swingup scenario needs a motor gain K ≠ 0")
    volts_per_newton_metre = 1.0 / p["K"]
    return {
        "swing_inertia": p["J_Byy"] + p["m_B"] * p["l2"] ** 2,
        "top_energy": 2.0 * p["m_B"] * p["gravity"] * p["l2"],
        "weight_arm": p["m_B"] * p["gravity"] * p["l2"],  # [N m]
        "balance_gain": furuta_balance_gain(params),
        "volts_per_newton_metre": volts_per_newton_metre,
        "limit": SWINGUP_TORQUE_LIMIT * abs(volts_per_newton_metre),
        "cycle": int(round(SWINGUP_CYCLE_S / sample_period_s)),
        "nudge": int(round(SWINGUP_NUDGE_S / sample_period_s)),
        "let_go": int(round(SWINGUP_LET_GO_S / sample_period_s)),
        "kick": SWINGUP_NUDGE_TORQUE / p["K"],
    }


def _swingup_control(state, system, c, energy_factor):
    """Energy shaping (Åström–Furuta) plus an LQR catch, torque saturated at 10 N m.

    The pendulum's energy grows when the arm accelerates against ``θ̇2 cos θ2`` (the coupling
    ``m_B lA l2 cos θ2`` of arm and pendulum); bang-bang pumping in that direction, scaled by
    the missing energy (toward ``energy_factor`` times the top's), with arm-rate damping,
    brings it up; near upright the balance gain of :func:`furuta_balance_gain` takes over.
    """
    theta = joint_angles(system, state)
    rate = joint_rates(system, state)
    energy = 0.5 * c["swing_inertia"] * rate[1] ** 2 + c["weight_arm"] * (1.0 - jnp.cos(theta[1]))
    at_rest = jnp.abs(rate[1]) + jnp.abs(theta[1]) < 1e-3
    pumping = (
        -SWINGUP_ENERGY_GAIN * (energy_factor * c["top_energy"] - energy)
        * jnp.sign(rate[1] * jnp.cos(theta[1]))
        - SWINGUP_ARM_DAMPING * rate[0]
        + jnp.where(at_rest, SWINGUP_KICK_TORQUE, 0.0)
    ) * c["volts_per_newton_metre"]
    upright_error = jnp.arctan2(jnp.sin(theta[1] - jnp.pi), jnp.cos(theta[1] - jnp.pi))
    balance = -c["balance_gain"] @ jnp.stack([theta[0], upright_error, rate[0], rate[1]])
    voltage = jnp.where(jnp.abs(upright_error) < SWINGUP_CATCH_ANGLE, balance, pumping)
    return jnp.clip(voltage, -c["limit"], c["limit"])[None]


def _swingup_law(j, state, system, c):
    """:func:`_swingup_control`, repeated through the rig's physics every :data:`SWINGUP_CYCLE_S`.

    From the second cycle on, each starts with a nudge of the arm and :data:`SWINGUP_LET_GO_S`
    without input; then the control takes over again.
    """
    later = j >= c["cycle"]
    # later cycles pump toward a little more than the top's energy: from a swing that
    # friction holds just short of the catch, the first cycle's target never gets there
    voltage = _swingup_control(state, system, c, jnp.where(later, SWINGUP_REPEAT_ENERGY, 1.0))
    phase = jnp.mod(j, c["cycle"])
    voltage = jnp.where(later & (phase < c["let_go"]), 0.0, voltage)
    return jnp.where(later & (phase < c["nudge"]), c["kick"], voltage)


def _no_inputs(width: int, j) -> np.ndarray:
    """No input: zeros ``[len(j), width]``."""
    return np.zeros((len(j), width))


def _torque_inputs(torque, gain: float, sample_period_s: float, j) -> np.ndarray:
    """``torque(t)`` [N m] at the samples ``j`` in the rig's input units (``gain`` [N m/unit])."""
    return (torque(np.asarray(j) * sample_period_s) / gain)[:, None]


def chunk_input(j, state, system, c):
    """Sample ``j``'s row of ``c["inputs"]``: an open-loop input handed to the simulation."""
    return c["inputs"][j]


def make_scenario(name: str, rig_name: str, params, sample_period_s: float) -> Scenario:
    """The scenario ``name`` for rig ``rig_name`` with parameter values ``params``."""
    if name not in SCENARIOS:
        raise SimulationError(f"unknown scenario {name!r}; choose one of {', '.join(SCENARIOS)}")
    if rig_name == "pendulum":
        if name != "release":
            raise SimulationError(f"scenario {name!r} needs a motor; the pendulum rig has "
                                  "none (use release)")
        return Scenario(name, (np.pi - 0.3,), (0.0,), functools.partial(_no_inputs, 0))
    if name == "release":
        return Scenario(name, (0.0, np.pi - 0.03), (0.0, 0.0), functools.partial(_no_inputs, 1))
    if name == "swingup":
        return Scenario(name, (0.0, 0.0), (0.0, 0.0), law=_swingup_law,
                        constants=_as_arrays(_swingup_constants(params, sample_period_s)))
    gain = _scalar_parameters(params)["K"]
    if gain == 0.0:
        raise SimulationError(f"the {name} scenario needs a motor gain K ≠ 0")
    torque = pulse_torque if name == "pulse" else multisine_torque
    return Scenario(name, (0.0, 0.0), (0.0, 0.0),
                    functools.partial(_torque_inputs, torque, gain, sample_period_s))


def _played_inputs(played: np.ndarray, j) -> np.ndarray:
    """The played input at the samples ``j`` (its last value after its end), ``[len(j), 1]``."""
    return played[np.minimum(j, len(played) - 1)][:, None]


def played_scenario(inputs, rig_name: str) -> Scenario:
    """A recorded or designed input ``[n]`` (the rig's input units), one value per sample.

    Played from rest with the pendulum hanging (where ``excite`` designs from).
    """
    if rig_name == "pendulum":
        raise SimulationError("a played input needs a motor; the pendulum rig has none")
    inputs = np.asarray(inputs, dtype=np.float64).reshape(-1)
    return Scenario("input", (0.0, 0.0), (0.0, 0.0), functools.partial(_played_inputs, inputs))


def _as_arrays(constants: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Constants as NumPy arrays (integers stay integers): arguments of the compiled law."""
    return {key: np.asarray(value) for key, value in constants.items()}
