"""Message players: simulated-rig and bag streams and real-time pacing.

The simulated streams compile the rig's simulation once per distinct length (some seconds): every
stream here lasts 0.5 s at 200 Hz or is chunked in 0.5 s simulations, so they share one compiled
simulation (cached by :mod:`mb_estimation.ros.players`); the direct ``simulate_recording``
run they are compared with compiles once more. The rclpy sink is tested in
``test_ros_launch.py``.
"""

import dataclasses
import itertools
import math
import threading
import time

import numpy as np
import pytest

from mb_estimation.config import JointMapping, builtin_config_path, load_config
from mb_estimation.io.bags import BagError, write_rig_bag
from mb_estimation.ros.players import (
    FLOAT64,
    FLOAT64_MULTIARRAY,
    JOINT_STATE,
    JointStatePayload,
    TimedMessage,
    bag_messages,
    driven_rig_messages,
    play,
    rig_sim_messages,
    rig_sim_topics,
)

RATE = 200.0
DURATION = 0.5
SAMPLES = 101  # round(DURATION * RATE) + 1
START_NS = 1_700_000_000 * 10**9
SEED = 3
SCENARIO = "multisine"  # compiles faster than the swing-up
ARM = JointMapping("joint_arm", offset=0.25, sign=-1)
PENDULUM = JointMapping("joint_pendulum", offset=-3.0, sign=1)


def _with_recording(config, **changes):
    return dataclasses.replace(config, recording=dataclasses.replace(config.recording, **changes))


@pytest.fixture(scope="module")
def config():
    base = load_config(builtin_config_path("furuta_synthetic"))
    return _with_recording(
        base, joints={"arm": ARM, "pendulum": PENDULUM}, voltage_topic="/volts",
        voltage_type="std_msgs/msg/Float64MultiArray", voltage_index=2)


@pytest.fixture(scope="module")
def stream(config):
    return list(rig_sim_messages(config, SCENARIO, duration_s=DURATION, rate_hz=RATE,
                                 start_ns=START_NS, seed=SEED, chunk_s=DURATION))


@pytest.fixture(scope="module")
def direct(config):
    from mb_estimation.rigs import get_rig
    from mb_estimation.simulation import simulate_recording

    return simulate_recording(
        get_rig(config.rig, config.friction), config.parameters, SCENARIO, duration_s=DURATION,
        dt=config.simulation.dt, rate_hz=RATE, noise_rad=config.simulation.noise_rad, seed=SEED,
        encoder_counts=config.simulation.encoder_counts, rigid=config.hinges == "rigid")


def _joint_states(messages):
    return [m for m in messages if m.kind == JOINT_STATE]


# --- rig_sim_messages -------------------------------------------------------------------------

def test_rig_sim_messages_count_topics_kinds_and_stamps(stream):
    assert len(stream) == 2 * SAMPLES
    assert [m.topic for m in stream] == ["/joint_states", "/volts"] * SAMPLES
    assert [m.kind for m in stream] == [JOINT_STATE, FLOAT64_MULTIARRAY] * SAMPLES
    stamps = np.array([m.stamp_ns for m in stream[::2]])
    assert stamps[0] == START_NS
    assert np.all(np.diff(stamps) == 5_000_000)  # 200 Hz, exactly
    assert [m.stamp_ns for m in stream[1::2]] == list(stamps)  # voltage with its joint state
    assert all(m.receive_ns is None and m.pacing_ns == m.stamp_ns for m in stream)
    first = stream[0].payload
    assert isinstance(first, JointStatePayload)
    assert first.names == ("joint_arm", "joint_pendulum")
    assert first.efforts.size == 0
    assert all(len(m.payload) == 3 and m.payload[:2] == (0.0, 0.0) for m in stream[1::2])


def test_rig_sim_messages_equal_a_direct_simulation(stream, direct):
    joints = _joint_states(stream)
    positions = np.stack([m.payload.positions for m in joints])
    velocities = np.stack([m.payload.velocities for m in joints])
    expected = np.stack([ARM.sign * direct.measured_angles[:, 0] + ARM.offset,
                         PENDULUM.sign * direct.measured_angles[:, 1] + PENDULUM.offset], 1)
    np.testing.assert_allclose(positions, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(velocities[:, 0], -direct.joint_rates[:, 0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(velocities[:, 1], direct.joint_rates[:, 1], rtol=0, atol=1e-12)
    # the direct simulation repeats its last input for its last sample; the stream goes on
    volts = np.array([m.payload[2] for m in stream[1::2]])
    np.testing.assert_allclose(volts[:-1], direct.inputs[:-1, 0], rtol=0, atol=1e-12)
    assert np.ptp(volts) > 0.1  # the multisine drives the motor
    stamps = np.array([m.stamp_ns for m in joints])
    np.testing.assert_array_equal(
        stamps, START_NS + np.round(direct.time_s * 1e9).astype(np.int64))


def test_rig_sim_messages_voltage_types(config, stream):
    as_float = _with_recording(config, voltage_type="std_msgs/msg/Float64")
    messages = list(rig_sim_messages(as_float, SCENARIO, duration_s=DURATION, rate_hz=RATE,
                                     start_ns=START_NS, seed=SEED, chunk_s=DURATION))
    assert [m.kind for m in messages[1::2]] == [FLOAT64] * SAMPLES
    assert [m.payload for m in messages[1::2]] == [m.payload[2] for m in stream[1::2]]
    assert rig_sim_topics(as_float) == {"/joint_states": JOINT_STATE, "/volts": FLOAT64}

    as_effort = _with_recording(config, voltage_type="sensor_msgs/msg/JointState",
                                voltage_joint="joint_pendulum")
    messages = list(rig_sim_messages(as_effort, SCENARIO, duration_s=DURATION, rate_hz=RATE,
                                     start_ns=START_NS, seed=SEED, chunk_s=DURATION))
    assert len(messages) == SAMPLES and all(m.kind == JOINT_STATE for m in messages)
    efforts = np.stack([m.payload.efforts for m in messages])
    assert np.all(efforts[:, 0] == 0.0)
    assert list(efforts[:, 1]) == [m.payload[2] for m in stream[1::2]]
    for mine, theirs in zip(messages, stream[::2], strict=True):
        np.testing.assert_array_equal(mine.payload.positions, theirs.payload.positions)
    assert rig_sim_topics(as_effort) == {"/joint_states": JOINT_STATE}
    # without voltage_joint the voltage is the first joint's effort
    first = _with_recording(as_effort, voltage_joint=None)
    message = next(iter(rig_sim_messages(first, SCENARIO, duration_s=DURATION, rate_hz=RATE,
                                         start_ns=START_NS, chunk_s=DURATION)))
    assert message.payload.efforts[1] == 0.0
    assert message.payload.efforts[0] == stream[1].payload[2]


def test_rig_sim_messages_continue_in_chunks(config):
    """1.2 s in 0.5 s simulations: one continuous motion, the direct 1.2 s simulation's.

    No jump at the chunk boundaries (samples 100 and 200) or anywhere: every step between two
    samples is within what the node accepts from a rig.
    """
    from mb_estimation.online.windows import JUMP_FLOOR_RAD
    from mb_estimation.rigs import get_rig
    from mb_estimation.simulation import simulate_recording

    chunked = list(rig_sim_messages(config, SCENARIO, duration_s=1.2, rate_hz=RATE,
                                    start_ns=START_NS, seed=SEED, chunk_s=DURATION))
    joints = _joint_states(chunked)
    assert len(joints) == 241 and len(chunked) == 2 * 241
    stamps = np.array([m.stamp_ns for m in joints])
    np.testing.assert_array_equal(stamps, START_NS + np.arange(241) * 5_000_000)
    direct = simulate_recording(
        get_rig(config.rig, config.friction), config.parameters, SCENARIO, duration_s=1.2,
        dt=config.simulation.dt, rate_hz=RATE, noise_rad=config.simulation.noise_rad, seed=SEED,
        encoder_counts=config.simulation.encoder_counts, rigid=config.hinges == "rigid")
    positions = np.stack([m.payload.positions for m in joints])
    expected = np.stack([ARM.sign * direct.measured_angles[:, 0] + ARM.offset,
                         PENDULUM.sign * direct.measured_angles[:, 1] + PENDULUM.offset], 1)
    np.testing.assert_allclose(positions, expected, rtol=0, atol=1e-12)
    volts = np.array([m.payload[2] for m in chunked[1::2]])
    np.testing.assert_allclose(volts[:-1], direct.inputs[:-1, 0], rtol=0, atol=1e-12)
    steps = np.abs(np.diff(positions, axis=0))
    limit = config.node.max_joint_speed_rad_s / RATE + JUMP_FLOOR_RAD
    assert steps.max() < limit / 10, steps.max()
    for boundary in (100, 200):  # no larger than the steps around it
        assert np.all(steps[boundary - 1] <= 3 * steps[boundary - 5:boundary + 5].mean(axis=0)
                      + 10 * config.simulation.noise_rad)


def test_a_drifting_rig_moves_its_parameters_at_each_chunk(config):
    """b1 ×11 every 0.5 s: the first chunk is the steady rig's, the later ones are not."""
    from mb_estimation.errors import SimulationError
    from mb_estimation.simulation import drifted_values

    moved = drifted_values(config.parameters, {"b1": (0.2, 600.0)}, 300.0)
    assert moved["b1"] == pytest.approx(1.1 * float(np.ravel(config.parameters["b1"])[0]))
    assert moved["J_Azz"] is config.parameters["J_Azz"]

    def positions(drifts):
        messages = rig_sim_messages(config, SCENARIO, duration_s=1.2, rate_hz=RATE,
                                    start_ns=START_NS, seed=SEED, chunk_s=DURATION,
                                    drifts=drifts)
        return np.stack([m.payload.positions for m in _joint_states(messages)])

    steady, drifting = positions(None), positions({"b1": (10.0, 0.5)})
    np.testing.assert_array_equal(drifting[:100], steady[:100])
    assert np.abs(drifting[100:] - steady[100:]).max() > 1e-3
    with pytest.raises(SimulationError, match="cannot drift 'bogus'"):
        rig_sim_messages(config, SCENARIO, duration_s=1.0, drifts={"bogus": (0.1, 1.0)})


def test_simulate_wears_the_rig_as_rig_sim_does(config):
    """A simulated bag's wear steps at each of its chunks, as rig-sim's with chunks that long."""
    from mb_estimation.rigs import get_rig
    from mb_estimation.simulation import SIMULATION_CHUNK, simulate_recording

    rate, drifts = 1000.0, {"b1": (10.0, 0.5)}
    duration = 2.4 * SIMULATION_CHUNK / rate  # three chunks

    def simulated(wear):
        return simulate_recording(
            get_rig(config.rig, config.friction), config.parameters, SCENARIO,
            duration_s=duration, dt=config.simulation.dt, rate_hz=rate,
            noise_rad=config.simulation.noise_rad, seed=SEED,
            encoder_counts=config.simulation.encoder_counts, rigid=config.hinges == "rigid",
            drifts=wear).measured_angles

    steady, drifting = simulated(None), simulated(drifts)
    np.testing.assert_array_equal(drifting[:SIMULATION_CHUNK], steady[:SIMULATION_CHUNK])
    assert np.abs(drifting[SIMULATION_CHUNK:] - steady[SIMULATION_CHUNK:]).max() > 1e-3
    messages = rig_sim_messages(config, SCENARIO, duration_s=duration, rate_hz=rate,
                                start_ns=START_NS, seed=SEED, chunk_s=SIMULATION_CHUNK / rate,
                                drifts=drifts)
    positions = np.stack([m.payload.positions for m in _joint_states(messages)])
    expected = np.stack([ARM.sign * drifting[:, 0] + ARM.offset,
                         PENDULUM.sign * drifting[:, 1] + PENDULUM.offset], 1)
    np.testing.assert_allclose(positions, expected, rtol=0, atol=1e-12)


def test_rig_sim_runs_for_ever_on_the_wall_clock(config):
    before = time.time_ns()
    endless = rig_sim_messages(config, SCENARIO, duration_s=None, rate_hz=RATE, chunk_s=DURATION)
    head = list(itertools.islice(endless, 2 * 450))  # four and a half chunks
    endless.close()
    stamps = np.array([m.stamp_ns for m in _joint_states(head)])
    assert before <= stamps[0] <= time.time_ns()
    assert np.all(np.diff(stamps) == 5_000_000)


def test_the_simulators_step_divides_the_sample_period():
    """The step dt where it divides the period (bit for bit), else the largest step below."""
    from mb_estimation.simulation import sample_step

    assert sample_step(1e-4, 1000.0) == (1e-4, 10)
    assert sample_step(2.5e-4, 100.0) == (2.5e-4, 40)
    step, substeps = sample_step(1e-4, 300.0)
    assert substeps == 34 and step == pytest.approx(1.0 / 10200.0, rel=1e-15) and step < 1e-4
    assert sample_step(3e-3, 1000.0) == (1e-3, 1)
    with pytest.raises(ValueError, match="must be positive"):
        sample_step(0.0, 1000.0)


def test_rig_sim_messages_check_arguments_at_once(config):
    with pytest.raises(ValueError, match="unknown scenario"):
        rig_sim_messages(config, "juggle", duration_s=1.0)
    with pytest.raises(ValueError, match="rate_hz must be a positive number"):
        rig_sim_messages(config, "release", duration_s=1.0, rate_hz=-1.0)
    with pytest.raises(ValueError, match="duration_s"):
        rig_sim_messages(config, "release", duration_s=0.0)
    with pytest.raises(ValueError, match="chunk_s"):
        rig_sim_messages(config, "release", duration_s=1.0, chunk_s=-1.0)
    with pytest.raises(ValueError, match="voltage_joint"):
        rig_sim_messages(_with_recording(config, voltage_type="sensor_msgs/msg/JointState",
                                         voltage_joint="elbow"), "release", duration_s=1.0)


def test_a_driven_rig_moves_as_the_same_input_played_and_paces_itself(config):
    """rig-sim --driven: the input read at each sample's time drives the period before it.

    The same inputs played as a file (``simulate_recording`` of ``played_scenario``) give the
    same samples; each sample waits for its due time on the stream's own clock.
    """
    from mb_estimation.rigs import get_rig
    from mb_estimation.scenarios import played_scenario
    from mb_estimation.simulation import simulate_recording

    inputs = 0.8 * np.sin(2 * np.pi * 3.0 * np.arange(SAMPLES) / RATE + 0.5)
    now = [100.0]
    asked = []

    def latest_input():
        asked.append(now[0])
        return inputs[len(asked) - 1]

    def sleep(seconds):
        now[0] += seconds

    messages = list(driven_rig_messages(config, latest_input, rate_hz=RATE, duration_s=DURATION,
                                        seed=SEED, clock=lambda: now[0], sleep=sleep))
    assert len(messages) == SAMPLES and all(m.kind == JOINT_STATE for m in messages)
    assert {m.topic for m in messages} == {config.recording.joint_states_topic}
    np.testing.assert_allclose(asked, 100.0 + np.arange(1, SAMPLES) / RATE, rtol=0, atol=1e-9)
    stamps = np.array([m.stamp_ns for m in messages])
    np.testing.assert_array_equal(np.diff(stamps), 5_000_000)
    played = simulate_recording(
        get_rig(config.rig, config.friction), config.parameters,
        played_scenario(inputs, config.rig), duration_s=DURATION, dt=config.simulation.dt,
        rate_hz=RATE, noise_rad=config.simulation.noise_rad, seed=SEED,
        encoder_counts=config.simulation.encoder_counts, rigid=config.hinges == "rigid")
    positions = np.stack([m.payload.positions for m in messages])
    expected = np.stack([ARM.sign * played.measured_angles[:, 0] + ARM.offset,
                         PENDULUM.sign * played.measured_angles[:, 1] + PENDULUM.offset], 1)
    assert np.ptp(played.joint_angles[:, 0]) > 0.05  # the input moved the arm
    np.testing.assert_allclose(positions, expected, rtol=0, atol=1e-9)
    velocities = np.stack([m.payload.velocities for m in messages])
    np.testing.assert_allclose(velocities[:, 0], ARM.sign * played.joint_rates[:, 0], rtol=0,
                               atol=1e-9)


def test_a_late_driven_rig_waits_for_the_answer_to_each_sample(config):
    """Stalled (a busy machine), it catches up sample by sample with the commander's answers.

    The commander answers each joint state; its answer arrives while the rig waits (here, in
    ``sleep``). Caught up without waiting, the late samples would all take one input.
    """
    inputs = 0.8 * np.sin(2 * np.pi * 3.0 * np.arange(SAMPLES) / RATE + 0.5)
    now, pending, received, latest, applied = [100.0], [], [0], [0.0], []

    def sleep(seconds):
        now[0] += seconds
        while pending:  # the answers sent meanwhile arrive
            latest[0] = pending.pop(0)
            received[0] += 1

    def latest_input():
        applied.append(latest[0])
        return latest[0]

    def run(counted):
        now[0], latest[0], received[0] = 100.0, 0.0, 0
        pending.clear()
        applied.clear()
        stream = driven_rig_messages(config, latest_input, rate_hz=RATE, duration_s=DURATION,
                                     seed=SEED, clock=lambda: now[0], sleep=sleep,
                                     inputs_received=(lambda: received[0]) if counted else None)
        for k, _ in enumerate(stream):
            pending.append(float(inputs[k]))  # the answer to sample k, on its way
            if k == 20:
                now[0] += 0.3  # stalled: 60 samples late
        assert len(applied) == SAMPLES - 1
        return np.array(applied)

    np.testing.assert_array_equal(run(counted=True), inputs[:-1])
    caught_up_blind = run(counted=False)  # without the count: one input over the late samples
    assert np.sum(caught_up_blind != inputs[:-1]) > 30


def test_rig_sim_plays_an_input_file_as_simulate_does(config):
    """rig-sim --input: the played input's samples, the voltage the file's values."""
    from mb_estimation.scenarios import played_scenario

    inputs = 0.5 * np.cos(2 * np.pi * 2.0 * np.arange(SAMPLES) / RATE)
    messages = list(rig_sim_messages(config, played_scenario(inputs, config.rig),
                                     duration_s=DURATION, rate_hz=RATE, start_ns=START_NS,
                                     seed=SEED, chunk_s=DURATION))
    volts = np.array([m.payload[2] for m in messages if m.kind == FLOAT64_MULTIARRAY])
    np.testing.assert_array_equal(volts, inputs)
    assert len(_joint_states(messages)) == SAMPLES


def test_a_driven_rig_stops_when_told(config):
    stop = threading.Event()
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        if now[0] > 0.2:
            stop.set()

    messages = list(driven_rig_messages(config, lambda: 0.0, rate_hz=RATE, clock=lambda: now[0],
                                        sleep=sleep, stop=stop))
    assert 40 <= len(messages) <= 42  # 0.2 s at 200 Hz, then the stop is seen


# --- bag_messages -----------------------------------------------------------------------------

def _write_bag(tmp_path, **voltage):
    n = 12
    joint_ns = START_NS + np.arange(n) * 10_000_000
    rng = np.random.default_rng(0)
    positions, velocities = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    volt_ns = joint_ns + 3_000_000
    volts = rng.normal(size=n)
    bag = write_rig_bag(
        tmp_path / "bag", joint_time_ns=joint_ns, joint_names=["arm", "pendulum"],
        joint_positions=positions, joint_velocities=velocities, joint_states_topic="/js",
        voltage_time_ns=volt_ns, voltage=volts, voltage_topic="/u", **voltage)
    return bag, joint_ns, positions, velocities, volt_ns, volts


def test_bag_messages_round_trip(tmp_path):
    bag, joint_ns, positions, velocities, volt_ns, volts = _write_bag(tmp_path)
    messages = list(bag_messages(bag))
    assert len(messages) == 24
    assert [m.topic for m in messages] == ["/js", "/u"] * 12
    assert [m.kind for m in messages] == [JOINT_STATE, FLOAT64] * 12
    receive = [m.receive_ns for m in messages]
    assert receive == sorted(receive)
    joints, voltages = messages[::2], messages[1::2]
    assert [m.stamp_ns for m in joints] == list(joint_ns)
    assert [m.stamp_ns for m in voltages] == list(volt_ns) == [m.receive_ns for m in voltages]
    for k, m in enumerate(joints):
        assert m.payload.names == ("arm", "pendulum")
        np.testing.assert_array_equal(m.payload.positions, positions[k])
        np.testing.assert_array_equal(m.payload.velocities, velocities[k])
        assert m.payload.efforts.size == 0
    assert [m.payload for m in voltages] == list(volts)
    assert len(list(bag_messages(bag, topics=["u"]))) == 12  # leading slash optional


def test_bag_messages_float64_multiarray(tmp_path):
    bag, *_, volts = _write_bag(tmp_path, voltage_type="std_msgs/msg/Float64MultiArray",
                                voltage_index=1)
    voltages = [m for m in bag_messages(bag) if m.topic == "/u"]
    assert [m.kind for m in voltages] == [FLOAT64_MULTIARRAY] * 12
    assert [m.payload for m in voltages] == [(0.0, v) for v in volts]


def test_bag_messages_keep_the_header_stamp(tmp_path):
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    types = store.types
    path = tmp_path / "late"
    header_ns = [START_NS + k * 1_000_000 for k in range(5)]
    with Writer(path, version=8) as writer:
        conn = writer.add_connection("/js", "sensor_msgs/msg/JointState", typestore=store)
        for k, stamp in enumerate(header_ns):
            msg = types["sensor_msgs/msg/JointState"](
                header=types["std_msgs/msg/Header"](
                    stamp=types["builtin_interfaces/msg/Time"](sec=stamp // 10**9,
                                                               nanosec=stamp % 10**9),
                    frame_id="base"),
                name=["a"], position=np.array([float(k)]), velocity=np.empty(0),
                effort=np.array([2.0 * k]))
            # received 7 ms after the stamp
            writer.write(conn, stamp + 7_000_000,
                         store.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
    messages = list(bag_messages(path))
    assert [m.stamp_ns for m in messages] == header_ns
    assert [m.receive_ns for m in messages] == [s + 7_000_000 for s in header_ns]
    assert [float(m.payload.efforts[0]) for m in messages] == [0.0, 2.0, 4.0, 6.0, 8.0]


def test_bag_messages_loop_jumps_back(tmp_path):
    bag, joint_ns, *_ = _write_bag(tmp_path)
    messages = list(itertools.islice(bag_messages(bag, loop=True), 24 * 2 + 5))
    stamps = [m.stamp_ns for m in messages]
    assert stamps[:24] == stamps[24:48]
    assert stamps[48:53] == stamps[:5]
    drops = [k for k in range(1, len(stamps)) if stamps[k] < stamps[k - 1]]
    assert drops == [24, 48]  # at each wrap; the joint-state stamp goes back to the start
    assert stamps[24] == joint_ns[0]
    stats = play(iter(messages), lambda m: None, rate=0)
    assert stats.rewinds == 2 and stats.messages == 53


def test_bag_messages_reject_what_they_cannot_play(tmp_path):
    with pytest.raises(BagError, match="no bag"):
        bag_messages(tmp_path / "missing")
    bag, *_ = _write_bag(tmp_path)
    with pytest.raises(BagError, match="not in bag"):
        bag_messages(bag, topics=["/nothing"])


# --- play -------------------------------------------------------------------------------------

class FakeTime:
    """A clock that only sleeps and the sink move forward."""

    def __init__(self, start=100.0):
        self.now = start
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        assert seconds > 0
        self.sleeps.append(seconds)
        self.now += seconds


def _ticks(n, period_ns, topic="/t"):
    return [TimedMessage(START_NS + k * period_ns, topic, FLOAT64, float(k)) for k in range(n)]


class RecordingSink:
    def __init__(self, fake, work_s=0.0, stall_at=None, stall_s=0.0):
        self.fake, self.work_s, self.stall_at, self.stall_s = fake, work_s, stall_at, stall_s
        self.times = []

    def __call__(self, message):
        self.times.append(self.fake.now)
        self.fake.now += self.work_s
        if len(self.times) == self.stall_at:
            self.fake.now += self.stall_s


@pytest.mark.parametrize("rate", [1.0, 10.0])
def test_play_paces_against_the_start_without_drift(rate):
    fake = FakeTime()
    period_s = 0.001
    sink = RecordingSink(fake, work_s=0.03 * period_s / rate)  # the sink takes 3 % of a gap
    stats = play(_ticks(5000, 1_000_000), sink, rate=rate, clock=fake.clock, sleep=fake.sleep)
    expected = 100.0 + np.arange(5000) * period_s / rate
    np.testing.assert_allclose(sink.times, expected, rtol=0, atol=1e-9)  # no drift at all
    assert stats.messages == 5000 and stats.by_topic == {"/t": 5000}
    assert stats.stream_s == pytest.approx(4.999)
    assert stats.max_lateness_s < 1e-9 and stats.rewinds == 0 and not stats.stopped
    assert stats.wall_s == pytest.approx(4.999 / rate + sink.work_s)
    assert all(s <= period_s / rate + 1e-12 for s in fake.sleeps)


def test_play_catches_up_after_a_stall():
    fake = FakeTime()
    sink = RecordingSink(fake, work_s=1e-4, stall_at=10, stall_s=0.0505)
    stats = play(_ticks(200, 1_000_000), sink, clock=fake.clock, sleep=fake.sleep)
    times = np.array(sink.times) - 100.0
    # the 10th call ends at 9 ms + 0.1 ms + 50.5 ms: message 10 goes out late at 59.6 ms...
    assert times[10] == pytest.approx(0.0596)
    np.testing.assert_allclose(np.diff(times[10:66]), 1e-4, atol=1e-12)  # ...the next at once...
    np.testing.assert_allclose(times[66:], np.arange(66, 200) * 1e-3, atol=1e-9)  # ...on time
    assert stats.max_lateness_s == pytest.approx(0.0596 - 0.010)
    assert 0 < stats.mean_lateness_s < stats.max_lateness_s


def test_play_irregular_stamps_rewinds_and_stop():
    fake = FakeTime()
    stamps_ms = [0, 2, 2, 7, 1, 4, 4.5]  # a rewind 7 -> 1 counts as no time
    messages = [TimedMessage(int(s * 1e6), "/t", FLOAT64, 0.0) for s in stamps_ms]
    sink = RecordingSink(fake)
    stats = play(messages, sink, clock=fake.clock, sleep=fake.sleep)
    expected_ms = [0, 2, 2, 7, 7, 10, 10.5]
    np.testing.assert_allclose(np.array(sink.times) - 100.0, np.array(expected_ms) * 1e-3,
                               atol=1e-12)
    assert stats.rewinds == 1 and stats.stream_s == pytest.approx(0.0105)

    stop = threading.Event()
    fake = FakeTime()

    def stopping_sink(message):
        if message.payload == 4.0:
            stop.set()

    stats = play(_ticks(100, 1_000_000), stopping_sink, clock=fake.clock, sleep=fake.sleep,
                 stop=stop)
    assert stats.stopped and stats.messages == 5


@pytest.mark.parametrize("rate", [0, math.inf])
def test_play_as_fast_as_possible_never_sleeps(rate):
    def no_sleep(seconds):
        raise AssertionError(f"slept {seconds} s")

    seen = []
    stats = play(_ticks(1000, 10**9), seen.append, rate=rate, sleep=no_sleep)
    assert len(seen) == 1000 and stats.messages == 1000
    assert stats.max_lateness_s == 0.0 and stats.stream_s == pytest.approx(999.0)
    assert stats.wall_s < 5.0


def test_play_real_clock_smoke():
    seen = []
    started = time.monotonic()
    stats = play(_ticks(21, 5_000_000), lambda m: seen.append(time.monotonic()), rate=2.0)
    assert len(seen) == 21
    assert 0.048 <= seen[-1] - started < 0.5
    assert stats.max_lateness_s < 0.2


def test_play_rejects_a_negative_rate():
    with pytest.raises(ValueError, match="rate"):
        play([], print, rate=-1.0)
    with pytest.raises(ValueError, match="rate"):
        play([], print, rate=math.nan)


def test_a_long_swing_up_is_repeated_through_the_rigs_physics():
    """25 s of rig-sim's swing-up (furuta_synthetic, 100 Hz, 10 s chunks): no reset, no jump.

    After each 10 s the controller nudges the arm and lets go; the pendulum falls and is swung
    up and caught again.
    """
    from mb_estimation.online.windows import JUMP_FLOOR_RAD

    truth = load_config(builtin_config_path("furuta_synthetic"))
    messages = rig_sim_messages(truth, "swingup", duration_s=25.0, rate_hz=100.0,
                                start_ns=START_NS)
    pendulum = np.array([m.payload.positions[1] for m in _joint_states(messages)])
    upright = np.abs(np.cos(pendulum) + 1.0) < 0.05
    for begin, end in ((800, 1000), (1800, 2000), (2400, 2501)):  # caught in every cycle
        assert upright[begin:end].all(), (begin, end)
    for cycle in (1, 2):  # each later cycle starts with a fall from upright
        assert not upright[cycle * 1000 + 50:cycle * 1000 + 300].all(), cycle
    limit = truth.node.max_joint_speed_rad_s / 100.0 + JUMP_FLOOR_RAD
    assert np.abs(np.diff(pendulum)).max() < limit
