"""The simulated rig's message stream: :func:`rig_sim_messages` (``mb-estimation rig-sim``).

The rig simulated with a configuration's parameters (as ``mb-estimation simulate`` does), its
samples as the rig's driver publishes them: joint states and the motor voltage, in chunks of
:data:`DEFAULT_CHUNK_S`, one continuous motion.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from mb_estimation.errors import SimulationError
from mb_estimation.ros.players.messages import (
    FLOAT64,
    FLOAT64_MULTIARRAY,
    JOINT_STATE,
    KIND_BY_ROS_TYPE,
    JointStatePayload,
    TimedMessage,
)
from mb_estimation.ros.players.pacing import MAX_SLEEP_S

if TYPE_CHECKING:
    from mb_estimation.config import Config
    from mb_estimation.scenarios import Scenario

#: Length of one simulation of :func:`rig_sim_messages` when it runs long or forever [s].
DEFAULT_CHUNK_S = 10.0

_EMPTY = np.empty(0, dtype=np.float64)
_EMPTY.flags.writeable = False

#: How often a late driven rig looks for the answer to its last sample [s].
ANSWER_POLL_S = 5e-4


def rig_sim_topics(config: Config) -> dict[str, str]:
    """Topic -> message kind of the messages :func:`rig_sim_messages` yields for ``config``.

    For creating publishers ahead of the first message (e.g. ``RosSink.publisher``).  The
    voltage topic is listed for actuated rigs unless the voltage travels as joint-state effort.
    """
    settings = config.recording
    topics = {settings.joint_states_topic: JOINT_STATE}
    voltage_kind = KIND_BY_ROS_TYPE.get(settings.voltage_type)
    if config.rig_spec.inputs and voltage_kind != JOINT_STATE:
        topics[settings.voltage_topic] = voltage_kind
    return topics


def rig_sim_messages(
    config: Config,
    scenario: str | Scenario,
    *,
    duration_s: float | None,
    rate_hz: float | None = None,
    start_ns: int | None = None,
    seed: int = 0,
    chunk_s: float = DEFAULT_CHUNK_S,
    drifts: dict[str, tuple[float, float]] | None = None,
) -> Iterator[TimedMessage]:
    """Messages of a simulated rig: ``scenario`` run with the parameters of ``config``.

    The rig is simulated as ``mb-estimation simulate`` does (``simulate_recording`` with the
    config's ``simulation.dt``, ``noise_rad`` and ``encoder_counts``) and every sample becomes a
    joint state on ``recording.joint_states_topic`` -- the joints' recorded names, positions
    ``sign * angle + offset`` and velocities ``sign * rate`` of the config's joint mappings --
    followed by the voltage in the configured ``recording.voltage_type``: a ``"float64"`` on
    ``voltage_topic``; a ``"float64_multiarray"`` on ``voltage_topic`` with the voltage at
    ``voltage_index`` and zeros before it; or, for ``sensor_msgs/msg/JointState``, the effort of
    ``voltage_joint`` (else the first joint; zeros for the others) in the joint state itself.
    Both messages of a sample carry its stamp ``start_ns + round(k / rate_hz * 1e9)``.

    **One continuous motion.**  The rig is simulated ``chunk_s`` seconds at a time
    (:func:`~mb_estimation.simulation.scenario_in_chunks`), each chunk from the state the last
    one ended in and the input law on the absolute sample index, so the stream has no jump a
    real rig would not make, however long it runs (the swing-up's controller lets go every
    10 s and swings the pendulum up again; a release decays to rest). The noise is one
    stream from ``seed``: a stream of ``duration_s`` seconds equals ``simulate_recording`` of
    that duration, ``round(duration_s * rate_hz) + 1`` samples. ``duration_s=None`` runs
    forever.

    Args:
        config: Rig configuration (parameters, ``simulation`` and ``recording`` settings).
        scenario: One of :data:`mb_estimation.scenarios.SCENARIOS`, or a played input
            (:func:`~mb_estimation.scenarios.played_scenario`).
        duration_s: Length of the stream [s], or None for no end.
        rate_hz: Sample rate [Hz] (default: ``config.simulation.rate_hz``); the simulator
            steps by the config's ``simulation.dt`` or the largest step below it that divides
            the period (:func:`~mb_estimation.simulation.sample_step`).
        start_ns: Stamp of the first sample [ns]; default: the wall clock (``time.time_ns()``)
            when the first simulation is done, i.e. when the first message is ready.
        seed: Noise seed.
        chunk_s: Length of one simulation [s] (a computing unit; the motion goes on).
        drifts: A wearing rig: name -> ``(fraction, period_s)``, each parameter changing by
            ``fraction`` of its value every ``period_s`` [s], stepped at each chunk
            (:func:`~mb_estimation.simulation.drifted_values`).

    Returns:
        An iterator of :class:`TimedMessage`, in stamp order.  The arguments are checked at once
        (:class:`~mb_estimation.errors.SimulationError`,
        :class:`~mb_estimation.config.ConfigError`); the simulation runs on the first ``next()``.

    """
    from mb_estimation.config import ConfigError
    from mb_estimation.scenarios import SCENARIOS
    from mb_estimation.simulation import drifted_values, sample_step

    if isinstance(scenario, str) and scenario not in SCENARIOS:
        raise SimulationError(f"unknown scenario {scenario!r}; choose one of "
                              f"{', '.join(SCENARIOS)}")
    rate = float(config.simulation.rate_hz if rate_hz is None else rate_hz)
    if not (math.isfinite(rate) and rate > 0):
        raise SimulationError(f"rate_hz must be a positive number, got {rate_hz!r}")
    dt, _ = sample_step(float(config.simulation.dt), rate)
    if not (math.isfinite(chunk_s) and chunk_s > 0):
        raise SimulationError(f"chunk_s must be a positive number of seconds, got {chunk_s!r}")
    chunk = int(round(chunk_s * rate))
    if chunk < 1:
        raise SimulationError(f"chunk_s = {chunk_s} s is shorter than one sample at {rate} Hz")
    total = None
    if duration_s is not None:
        if not (math.isfinite(duration_s) and duration_s > 0):
            raise SimulationError(f"duration_s must be positive or None, got {duration_s!r}")
        total = int(round(duration_s * rate))
        if total < 1:
            raise SimulationError(f"duration_s = {duration_s} s is shorter than one sample at "
                                  f"{rate} Hz")

    drifted_values(config.parameters, drifts or {}, 0.0)  # the names checked at once
    settings = config.recording
    mappings = _joint_mappings(config)
    names = tuple(mapping.name for mapping in mappings)
    voltage_kind = KIND_BY_ROS_TYPE.get(settings.voltage_type)
    if voltage_kind is None:
        raise ConfigError(f"unsupported voltage type {settings.voltage_type!r}")
    effort_index = 0
    if voltage_kind == JOINT_STATE and settings.voltage_joint is not None:
        if settings.voltage_joint not in names:
            raise ConfigError(f"recording.voltage_joint {settings.voltage_joint!r} is not one of "
                              f"the recorded joints {', '.join(names)}")
        effort_index = names.index(settings.voltage_joint)

    return _rig_sim_stream(
        config, scenario, rate=rate, dt=dt, chunk=chunk, total=total, start_ns=start_ns,
        seed=int(seed), names=names, mappings=mappings, voltage_kind=voltage_kind,
        effort_index=effort_index, drifts=drifts,
    )


def _joint_mappings(config: Config) -> list:
    """The recording's mapping of each rig joint (ConfigError where one is missing)."""
    from mb_estimation.config import ConfigError

    joints = config.recording.joints
    missing = [joint for joint in config.rig_spec.joints if joint not in joints]
    if missing:
        raise ConfigError(f"config {config.source}: recording.joints has no mapping for "
                          f"{', '.join(missing)}")
    return [joints[joint] for joint in config.rig_spec.joints]


def _rig_sim_stream(config, scenario, *, rate, dt, chunk, total, start_ns, seed, names,
                    mappings, voltage_kind, effort_index, drifts) -> Iterator[TimedMessage]:
    from mb_estimation.setup import rig_of
    from mb_estimation.simulation import scenario_in_chunks

    settings = config.recording
    chunks = _one_ahead(scenario_in_chunks(
        rig_of(config), config.parameters,
        scenario, chunk_samples=chunk, dt=dt, rate_hz=rate, rigid=config.hinges == "rigid",
        drifts=drifts))
    rng = np.random.default_rng(seed)
    joint_topic = settings.joint_states_topic
    voltage_topic = settings.voltage_topic
    index = int(settings.voltage_index)
    first = 0
    for angles, rates, inputs in chunks:
        if start_ns is None:
            start_ns = time.time_ns()
        count = chunk if total is None else min(chunk, total + 1 - first)
        angles, rates, inputs = angles[:count], rates[:count], inputs[:count]
        positions, velocities = _recorded(config, mappings, rng, angles, rates)
        positions.flags.writeable = velocities.flags.writeable = False  # payloads are shared
        has_input = inputs.shape[1] > 0
        efforts = None
        if has_input and voltage_kind == JOINT_STATE:
            efforts = np.zeros((count, len(names)))
            efforts[:, effort_index] = inputs[:, 0]
            efforts.flags.writeable = False
        stamps = int(start_ns) + np.round(np.arange(first, first + count) / rate * 1e9).astype(
            np.int64)
        for k in range(count):
            stamp = int(stamps[k])
            yield TimedMessage(stamp, joint_topic, JOINT_STATE, JointStatePayload(
                names, positions[k], velocities[k], _EMPTY if efforts is None else efforts[k]))
            if not has_input or voltage_kind == JOINT_STATE:
                continue
            value = float(inputs[k, 0])
            if voltage_kind == FLOAT64:
                yield TimedMessage(stamp, voltage_topic, FLOAT64, value)
            else:
                yield TimedMessage(stamp, voltage_topic, FLOAT64_MULTIARRAY,
                                   (0.0,) * index + (value,))
        first += count
        if total is not None and first > total:
            return


def _recorded(config, mappings, rng, angles, rates):
    """Positions and velocities as the rig's driver records them.

    The config's encoder counts and angle noise (drawn from ``rng``) on the angles [rad], the
    joint mappings on both.
    """
    from mb_estimation.signals import recorded_joint_states
    from mb_estimation.simulation import quantise

    angles = np.asarray(angles)
    measured = (quantise(angles, config.simulation.encoder_counts)
                + float(config.simulation.noise_rad) * rng.standard_normal(angles.shape))
    return recorded_joint_states(mappings, measured, rates)


def _one_ahead(items: Iterator) -> Iterator:
    """``items``, each next one computed in a thread while the caller uses the last.

    A chunk's simulation takes seconds (10 s of the swing-up at 1e-4 s: about 4 s on one
    core); computed ahead, a stream published in real time does not stall at each chunk.
    """
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rig-sim")
    try:
        pending = pool.submit(next, items)
        while True:
            item = pending.result()
            pending = pool.submit(next, items)
            yield item
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def driven_rig_messages(config: Config, latest_input: Callable[[], float], *,
                        rate_hz: float | None = None, duration_s: float | None = None,
                        seed: int = 0, clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], object] = time.sleep,
                        stop=None, inputs_received: Callable[[], int] | None = None
                        ) -> Iterator[TimedMessage]:
    """Joint states of a simulated rig that obeys its input topic (``rig-sim --driven``).

    The rig starts at rest with the pendulum hanging and is simulated one sample at a time, in
    real time and paced by itself: sample ``k`` is computed at its due time ``t0 + k/rate``
    from sample ``k-1`` with the input ``latest_input()`` returns then [the rig's input units]
    held over the period between them, as a motor driver acts on the command it last got (so an
    input published between two joint states drives the rig over that period, where the
    estimator node puts it). Joint states only, on ``recording.joint_states_topic`` as
    :func:`rig_sim_messages` makes them (noise, encoder counts, the joint mappings); the input
    topic is the commander's. Stamps: the wall clock at the first sample plus ``k/rate``.
    Ends after ``duration_s`` (None: never) or when ``stop.is_set()``; play it with
    :func:`~mb_estimation.ros.players.play` at rate 0 (it is paced already).

    ``inputs_received()``: how many inputs have arrived. Where the commander answers each
    joint state (as the exciter and a controller do) and the rig runs late (a busy machine
    stalled it), it waits for the answer to the sample just published, up to one period,
    before simulating the next: catching up with the input of a sample before would drive it
    with other inputs than those the commander sent for those samples (and the estimator
    recorded).
    """
    from mb_estimation.setup import rig_of
    from mb_estimation.simulation import driven_rig

    rate = float(config.simulation.rate_hz if rate_hz is None else rate_hz)
    if not (math.isfinite(rate) and rate > 0):
        raise SimulationError(f"rate_hz must be a positive number, got {rate_hz!r}")
    mappings = _joint_mappings(config)
    total = None if duration_s is None else int(round(duration_s * rate))
    rig = driven_rig(rig_of(config), config.parameters, dt=float(config.simulation.dt),
                     rate_hz=rate, rigid=config.hinges == "rigid")
    return _driven_stream(config, rig, latest_input, rate=rate, total=total, seed=seed,
                          mappings=mappings, clock=clock, sleep=sleep, stop=stop,
                          inputs_received=inputs_received)


def _driven_stream(config, rig, latest_input, *, rate, total, seed, mappings, clock, sleep,
                   stop, inputs_received=None) -> Iterator[TimedMessage]:
    from mb_estimation.simulation import driven_sample

    names = tuple(mapping.name for mapping in mappings)
    topic = config.recording.joint_states_topic
    rng = np.random.default_rng(seed)
    start_ns, started = time.time_ns(), clock()
    sample = 0
    seen, answering = 0, False  # inputs in when the last sample went out; the one before answered
    while total is None or sample <= total:
        due = started + sample / rate
        while (now := clock()) < due:
            if stop is not None and stop.is_set():
                return
            sleep(min(due - now, MAX_SLEEP_S))
        if answering and inputs_received is not None:  # late: wait for the last one's answer
            deadline = clock() + 1.0 / rate
            while inputs_received() == seen and (now := clock()) < deadline:
                sleep(min(deadline - now, ANSWER_POLL_S))
        if stop is not None and stop.is_set():
            return
        if sample:
            rig = driven_sample(rig, float(latest_input()))
        if inputs_received is not None:
            received = inputs_received()
            answering, seen = received > seen, received
        positions, velocities = _recorded(config, mappings, rng, rig.angles, rig.rates)
        yield TimedMessage(start_ns + round(sample / rate * 1e9), topic, JOINT_STATE,
                           JointStatePayload(names, positions, velocities, _EMPTY))
        sample += 1
