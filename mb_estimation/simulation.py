"""Forward simulation of a rig through a scenario into a recording-like result.

Pure numerics (no files): :func:`mb_estimation.api.write_simulated_bag` writes the result
to a bag (the ``simulate`` command).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from mb_estimation.compiled import Compiler, compiled_function
from mb_estimation.errors import SimulationError
from mb_estimation.multibody import (
    BodyStates,
    joint_angles,
    joint_rates,
    rollout,
    states_from_joints,
)
from mb_estimation.multibody.joint_space import JointStates, rigid_start
from mb_estimation.multibody.joint_space import joint_rates as tree_joint_rates
from mb_estimation.multibody.variational import held_steps
from mb_estimation.numerics import jax
from mb_estimation.rigs import Rig, built_system, parameter_arrays
from mb_estimation.scenarios import Scenario, chunk_input, make_scenario, played_scenario

jnp = jax.numpy


@dataclass(frozen=True)
class SimulatedRecording:
    """A simulated experiment sampled at the recording rate.

    Attributes:
        time_s: sample times ``[n]`` [s], starting at 0.
        joint_angles: true joint angles ``[n, n_joints]`` [rad], multi-turn (unwrapped).
        joint_rates: true joint rates ``[n, n_joints]`` [rad/s].
        measured_angles: ``joint_angles`` after encoder quantisation and Gaussian noise [rad].
        inputs: input held from each sample to the next ``[n, n_inputs]`` (the last repeats).
        states: body states at the samples, stacked ``[n]``.
    """

    time_s: np.ndarray
    joint_angles: np.ndarray
    joint_rates: np.ndarray
    measured_angles: np.ndarray
    inputs: np.ndarray
    states: BodyStates


def sample_step(dt: float, rate_hz: float) -> tuple[float, int]:
    """The simulator's step [s] and its steps per sample at ``rate_hz`` [Hz].

    ``dt`` [s] where it divides the sample period ``1/rate_hz`` (to 1e-6 of a step), else
    the largest step below ``dt`` that does (a 300 Hz input with ``dt`` 1e-4 s: 34 steps of
    9.80e-5 s): the simulation is never coarser than asked.
    """
    if not (dt > 0 and rate_hz > 0 and math.isfinite(dt) and math.isfinite(rate_hz)):
        raise SimulationError(f"dt ({dt}) and rate ({rate_hz} Hz) must be positive")
    ratio = 1.0 / (rate_hz * dt)
    substeps = int(round(ratio))
    if substeps >= 1 and abs(ratio - substeps) <= 1e-6 * ratio:
        return dt, substeps
    substeps = math.ceil(ratio)
    return 1.0 / (rate_hz * substeps), substeps


def quantise(angles, counts_per_revolution: int | None):
    """Round angles [rad] to an encoder's resolution (``None``: no quantisation)."""
    if not counts_per_revolution:
        return np.asarray(angles)
    resolution = 2.0 * np.pi / counts_per_revolution
    return np.round(np.asarray(angles) / resolution) * resolution


_starting_state = compiled_function(states_from_joints)


def _scenario_start(rig: Rig, values: Mapping[str, object], scenario: str | Scenario,
                    dt: float, rate_hz: float, rigid: bool):
    """The step, the built system, the scenario's plan and its initial state.

    The step: ``(h, substeps)`` per sample (:func:`sample_step`). The state is the rigid
    tree's :class:`JointStates` if ``rigid``, else the bodies' states.
    """
    step = sample_step(dt, rate_hz)
    params = parameter_arrays(values)
    system = built_system(rig, params)
    plan = (scenario if isinstance(scenario, Scenario)
            else make_scenario(scenario, rig.name, params, 1.0 / rate_hz))
    angles = np.asarray(plan.initial_angles, dtype=np.float64)
    rates = np.asarray(plan.initial_rates, dtype=np.float64)
    initial = (rigid_start(system, np.concatenate([angles, rates]), np.zeros(len(angles)))
               if rigid else _starting_state(system, angles, rates))
    return step, system, plan, initial


def _sampled_run(system, initial, h: float, num_samples: int, input_fn, substeps: int):
    """``num_samples`` samples of the rig from ``initial``, each input held ``substeps`` steps.

    ``initial`` is a :class:`JointStates` (rigid hinges: the tree stepped by the second-order
    variational step in joint coordinates,
    :func:`~mb_estimation.multibody.variational.variational_step`) or the bodies' states
    (the hinges' compliance and damping: SPOOK, :func:`~mb_estimation.multibody.rollout`).
    ``input_fn(j, x)`` sees the bodies' states at sample ``j`` in both cases. Returns the last
    state, the bodies' states ``[n+1]``, the inputs ``[n, c]``, the joint angles and rates
    ``[n+1, n_joints]`` [rad, rad/s].
    """
    if not isinstance(initial, JointStates):
        states, inputs = rollout(system, initial, h, num_samples, input_fn, substeps)
        angles = jax.vmap(lambda x: joint_angles(system, x))(states)
        rates = jax.vmap(lambda x: joint_rates(system, x))(states)
        return jax.tree_util.tree_map(lambda a: a[-1], states), states, inputs, angles, rates

    def sample(state, j):
        bodies = states_from_joints(system, state.angles, tree_joint_rates(system, state))
        u = jnp.asarray(input_fn(j, bodies), dtype=jnp.float64).reshape(system.num_inputs)
        state = held_steps(system, state, u, h, substeps)
        return state, (state, u)

    last, (states, inputs) = jax.lax.scan(sample, initial, jnp.arange(num_samples))
    states = jax.tree_util.tree_map(lambda first, rest: jnp.concatenate([first[None], rest]),
                                    initial, states)
    rates = jax.vmap(lambda s: tree_joint_rates(system, s))(states)
    bodies = jax.vmap(lambda a, r: states_from_joints(system, a, r))(states.angles, rates)
    return last, bodies, inputs, states.angles, rates


#: A scenario is simulated in chunks of this many samples, each from the state the last one
#: ended in (the last chunk run whole and cut): one compiled program per rig structure and
#: chunk serves every open-loop scenario (and one per feedback law), every length, step, rate
#: and every rig's values.
SIMULATION_CHUNK = 512

#: The scenarios' chunk programs, compiled once per key in the process (and kept on disk with
#: the compiled-code cache).
_COMPILED = Compiler()


def step_arguments(h: float, substeps: int):
    """``(h, substeps)`` as 0-d arrays [s, -]: a program's arguments, not its constants.

    The chunk programs of the simulations and the checks take the step so, which lets one
    compiled program serve every step and rate of a rig.
    """
    return np.asarray(h, dtype=np.float64), np.asarray(substeps, dtype=np.int64)


def _scenario_chunk(static, step, system, initial, offset, constants):
    """``samples`` samples of the scenario's ``law`` from ``initial``, sample ``offset`` on.

    ``static = (law, samples)``, ``step = (h, substeps)`` (:func:`step_arguments`); returns
    what :func:`_sampled_run` does.
    """
    law, samples = static
    h, substeps = step
    return _sampled_run(system, initial, h, samples,
                        lambda j, state: law(j + offset, state, system, constants), substeps)


def _scenario_run(system, plan, initial, dt: float, substeps: int, samples: int, offset: int):
    """One compiled chunk of ``plan`` (:func:`_scenario_chunk`), as host arrays.

    An open-loop plan's inputs for the chunk are computed here and handed over as data.
    """
    law, constants = plan.law, plan.constants
    if plan.inputs is not None:
        law, constants = chunk_input, _chunk_inputs(plan.inputs(np.arange(samples) + offset))
        offset = 0
    outputs = _COMPILED(_scenario_chunk, (law, samples), step_arguments(dt, substeps),
                        system, initial, np.asarray(offset), constants)
    return jax.tree_util.tree_map(np.asarray, outputs)


def _chunk_inputs(inputs) -> dict:
    """``inputs [samples, n_inputs]`` as :func:`~mb_estimation.scenarios.chunk_input` reads them."""
    return {"inputs": np.asarray(inputs, dtype=np.float64)}


def simulate_recording(
    rig: Rig,
    values: Mapping[str, object],
    scenario: str | Scenario,
    *,
    duration_s: float,
    dt: float,
    rate_hz: float,
    noise_rad: float = 0.0,
    seed: int = 0,
    encoder_counts: int | None = None,
    rigid: bool = False,
    drifts: Mapping[str, tuple[float, float]] | None = None,
) -> SimulatedRecording:
    """Simulate ``scenario`` on ``rig`` with parameter ``values`` for ``duration_s`` seconds.

    The model's step is ``dt`` [s] (or the largest below it that divides the sample period:
    :func:`sample_step`): with ``rigid`` the hinges are rigid (a config's
    ``hinges: rigid``) and the tree takes the variational step in joint coordinates, else
    SPOOK through the hinges' compliance and damping. Joint angles are sampled and the input
    is updated at ``rate_hz``. Noise is zero-mean Gaussian with standard deviation
    ``noise_rad``, drawn from ``numpy.random.default_rng(seed)``. ``scenario``: a name
    (:data:`~mb_estimation.scenarios.SCENARIOS`) or a played input
    (:func:`~mb_estimation.scenarios.played_scenario`). ``drifts`` (:func:`drifted_values`):
    a wearing rig, its parameters moved from ``values`` at the start to their values at each
    chunk's start (:data:`SIMULATION_CHUNK` samples) and held through the chunk.
    """
    if duration_s <= 0:
        raise SimulationError(f"duration must be positive, got {duration_s} s")
    num_samples = int(round(duration_s * rate_hz))
    (dt, substeps), system, plan, state = _scenario_start(rig, values, scenario, dt, rate_hz,
                                                          rigid)
    if drifts:
        drifted_values(values, drifts, 0.0)  # checks the names at once
    pieces = []
    for offset in range(0, max(num_samples, 1), SIMULATION_CHUNK):
        if drifts and offset:
            system = built_system(rig, parameter_arrays(drifted_values(values, drifts,
                                                                       offset / rate_hz)))
        state, bodies, inputs, angles, rates = _scenario_run(system, plan, state, dt, substeps,
                                                             SIMULATION_CHUNK, offset)
        if offset:  # a chunk's first state is the last one's end
            bodies = jax.tree_util.tree_map(lambda leaf: leaf[1:], bodies)
            angles, rates = angles[1:], rates[1:]
        pieces.append((bodies, inputs, angles, rates))
    states, inputs, angles, rates = jax.tree_util.tree_map(
        lambda *leaves: np.concatenate(leaves), *pieces)
    states = jax.tree_util.tree_map(lambda leaf: leaf[:num_samples + 1], states)
    inputs = inputs[:num_samples]
    angles = np.unwrap(angles[:num_samples + 1], axis=0)
    rates = rates[:num_samples + 1]
    inputs = np.concatenate([inputs, inputs[-1:]], axis=0) if len(inputs) else inputs
    rng = np.random.default_rng(seed)
    measured = quantise(angles, encoder_counts) + noise_rad * rng.standard_normal(angles.shape)
    return SimulatedRecording(
        time_s=np.arange(num_samples + 1) / rate_hz,
        joint_angles=angles,
        joint_rates=rates,
        measured_angles=measured,
        inputs=inputs,
        states=states,
    )


def drifted_values(values: Mapping[str, object], drifts: Mapping[str, tuple[float, float]],
                   time_s: float) -> dict[str, object]:
    """``values`` with each drifting parameter moved linearly: ``v (1 + fraction t / period)``.

    ``drifts`` maps a scalar parameter's name to ``(fraction, period_s)``: it changes by
    ``fraction`` of its value every ``period_s`` seconds (``(0.2, 600)``: +20 % in 10 min).
    """
    moved = dict(values)
    for name, (fraction, period_s) in drifts.items():
        if name not in values or np.size(values[name]) != 1:
            raise SimulationError(f"cannot drift {name!r}: not a scalar parameter of the rig")
        moved[name] = float(np.ravel(values[name])[0]) * (1.0 + fraction * time_s / period_s)
    return moved


def scenario_in_chunks(rig: Rig, values: Mapping[str, object], scenario: str | Scenario, *,
                       chunk_samples: int, dt: float, rate_hz: float, rigid: bool = False,
                       drifts: Mapping[str, tuple[float, float]] | None = None
                       ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``scenario`` on ``rig`` without end, ``chunk_samples`` samples at a time.

    One continuous motion: each chunk starts from the state the last one ended in, and the
    input law runs on the absolute sample index (a multisine goes on, a controller keeps
    its phase). Yields per chunk the true joint angles ``[chunk_samples, j]`` [rad]
    (unwrapped, continuing the last chunk's), the joint rates [rad/s] and the inputs held from
    each sample ``[chunk_samples, n_inputs]``: the samples of :func:`simulate_recording` of
    the same scenario (and ``rigid``), chunk after chunk. Compiled once for every chunk.

    ``drifts`` (:func:`drifted_values`): a wearing rig, its parameters moved to their values
    at each chunk's start and held through the chunk.
    """
    (dt, substeps), system, plan, state = _scenario_start(rig, values, scenario, dt, rate_hz,
                                                          rigid)
    if drifts:
        drifted_values(values, drifts, 0.0)  # checks the names at once
    previous = None
    for chunk in itertools.count():
        if drifts and chunk:
            start_s = chunk * chunk_samples / rate_hz
            system = built_system(rig, parameter_arrays(drifted_values(values, drifts, start_s)))
        state, _, inputs, angles, rates = _scenario_run(system, plan, state, dt, substeps,
                                                        chunk_samples, chunk * chunk_samples)
        angles, rates = angles[:-1], rates[:-1]
        if previous is not None:
            angles = np.unwrap(np.concatenate([previous[None], angles]), axis=0)[1:]
        else:
            angles = np.unwrap(angles, axis=0)
        previous = angles[-1]
        yield angles, rates, inputs


@dataclass(frozen=True)
class DrivenRig:
    """A simulated rig that obeys commands, one sample at a time (``rig-sim --driven``).

    ``program`` is the compiled one-sample simulation (:func:`_scenario_chunk` of an open-loop
    input); ``state`` the rig's state now; ``angles`` its joint angles [rad], unwrapped since the
    start, and ``rates`` [rad/s].
    """

    program: object
    step: tuple
    system: object
    state: object
    angles: np.ndarray
    rates: np.ndarray


def driven_rig(rig: Rig, values: Mapping[str, object], *, dt: float, rate_hz: float,
               rigid: bool = False) -> DrivenRig:
    """The rig at rest with the pendulum hanging, ready for :func:`driven_sample`.

    Steps of ``dt`` [s] within each sample period ``1/rate_hz`` [s], rigid or compliant hinges
    as :func:`simulate_recording`. Compiles the one-sample simulation (once per rig structure).
    """
    at_rest = played_scenario(np.zeros(1), rig.name)  # refuses a rig without an input
    (dt, substeps), system, plan, state = _scenario_start(rig, values, at_rest, dt, rate_hz,
                                                          rigid)
    step = step_arguments(dt, substeps)
    arguments = (step, system, state, np.asarray(0), _chunk_inputs([[0.0]]))
    program = _COMPILED.executable(_scenario_chunk, (chunk_input, 1), *arguments)
    return DrivenRig(program, step, system, state,
                     np.asarray(plan.initial_angles, dtype=np.float64),
                     np.asarray(plan.initial_rates, dtype=np.float64))


def driven_sample(driven: DrivenRig, value: float) -> DrivenRig:
    """``driven`` one sample period later, ``value`` [the rig's input units] held meanwhile."""
    state, _, _, angles, rates = driven.program(driven.step, driven.system, driven.state,
                                                np.asarray(0), _chunk_inputs([[value]]))
    angles, rates = np.asarray(angles)[-1], np.asarray(rates)[-1]
    turns = np.round((driven.angles - angles) / (2 * np.pi))  # unwrapped against the last
    return DrivenRig(driven.program, driven.step, driven.system, state,
                     angles + 2 * np.pi * turns, rates)
