"""Tests for mb_estimation.io.bags: rosbag2 writing (Humble-readable) and the minimal readers."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from mb_estimation.io.bags import (
    METADATA_VERSION,
    BagError,
    read_bag_summary,
    read_float64,
    read_joint_states,
    read_topic,
    write_rig_bag,
)

REPO = Path(__file__).resolve().parents[1]
HUMBLE_DIR = REPO.parent / "shared" / "data" / "rosbag2-humble-furuta"
HUMBLE_STEP = HUMBLE_DIR / "step_response_de"

NAMES = ["joint0", "joint1"]
T0 = 1_692_089_273_556_092_201  # a realistic epoch time [ns]


def _rig(n=50, m=40, seed=0):
    rng = np.random.default_rng(seed)
    t_joint = T0 + np.arange(n, dtype=np.int64) * 2_000_000 + 7  # 500 Hz, odd ns
    pos = rng.normal(size=(n, 2))
    vel = rng.normal(size=(n, 2))
    t_volt = T0 + np.arange(m, dtype=np.int64) * 2_500_000 + 1_000_000  # 400 Hz, interleaved
    volt = rng.uniform(-5, 5, size=m)
    return t_joint, pos, vel, t_volt, volt


def _load_metadata(bag):
    return yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_round_trip(tmp_path, storage):
    """Write joint states + Float64 voltage; read back with our readers and rosbags' AnyReader."""
    t_joint, pos, vel, t_volt, volt = _rig()
    bag = write_rig_bag(
        tmp_path / "rig",
        joint_time_ns=t_joint,
        joint_names=NAMES,
        joint_positions=pos,
        joint_velocities=vel,
        joint_states_topic="/joint_states",
        voltage_time_ns=t_volt,
        voltage=volt,
        voltage_topic="/motor_voltage",
        storage=storage,
    )
    assert bag == tmp_path / "rig"
    suffix = ".db3" if storage == "sqlite3" else ".mcap"
    assert sorted(p.name for p in bag.iterdir()) == sorted(["metadata.yaml", "rig" + suffix])
    assert [p.name for p in tmp_path.iterdir()] == ["rig"]  # no temp leftovers

    # our readers
    summary = read_bag_summary(bag)
    assert summary.storage == storage
    assert summary.metadata_version == METADATA_VERSION == 8
    assert set(summary.topics) == {"/joint_states", "/motor_voltage"}
    assert summary.topics["/joint_states"].msgtype == "sensor_msgs/msg/JointState"
    assert summary.topics["/joint_states"].message_count == len(t_joint)
    assert summary.topics["/motor_voltage"].msgtype == "std_msgs/msg/Float64"
    assert summary.topics["/motor_voltage"].message_count == len(t_volt)
    assert summary.message_count == len(t_joint) + len(t_volt)
    assert summary.start_time_ns == min(t_joint[0], t_volt[0])
    assert summary.end_time_ns == max(t_joint[-1], t_volt[-1])
    assert "joint_states" in summary.describe()

    js = read_joint_states(bag, "/joint_states")
    np.testing.assert_array_equal(js.time_ns, t_joint)
    np.testing.assert_array_equal(js.receive_time_ns, t_joint)  # log time = stamp
    assert js.names == NAMES
    np.testing.assert_array_equal(js.positions, pos)
    np.testing.assert_array_equal(js.velocities, vel)
    assert js.efforts is None
    # leading slash optional when unambiguous
    np.testing.assert_array_equal(read_joint_states(bag, "joint_states").time_ns, t_joint)

    tv, v = read_float64(bag, "/motor_voltage")
    np.testing.assert_array_equal(tv, t_volt)
    np.testing.assert_array_equal(v, volt)

    msgs = read_topic(bag, "/motor_voltage", "std_msgs/msg/Float64")
    assert [t for t, _ in msgs] == t_volt.tolist()

    # rosbags' own AnyReader, straight on the bag
    with AnyReader([bag]) as reader:
        assert {c.topic: c.msgtype for c in reader.connections} == {
            "/joint_states": "sensor_msgs/msg/JointState",
            "/motor_voltage": "std_msgs/msg/Float64",
        }
        joint, volts, log_times = [], [], []
        for conn, log_time, raw in reader.messages():
            log_times.append(log_time)
            msg = reader.deserialize(raw, conn.msgtype)
            if conn.topic == "/joint_states":
                joint.append((log_time, msg))
            else:
                volts.append((log_time, msg.data))
        assert log_times == sorted(log_times)
        assert len(joint) == len(t_joint)
        for k, (log_time, msg) in enumerate(joint):
            assert log_time == t_joint[k]
            assert msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec == t_joint[k]
            assert msg.header.frame_id == ""
            assert list(msg.name) == NAMES
            np.testing.assert_array_equal(msg.position, pos[k])
            np.testing.assert_array_equal(msg.velocity, vel[k])
            assert len(msg.effort) == 0
        assert [t for t, _ in volts] == t_volt.tolist()
        np.testing.assert_array_equal([x for _, x in volts], volt)


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_metadata_yaml(tmp_path, storage):
    """metadata.yaml: version 8, storage id, files, counts, Humble-parsable QoS, Humble hashes."""
    t_joint, pos, _, t_volt, volt = _rig(n=5, m=4)
    bag = write_rig_bag(
        tmp_path / "b",
        joint_time_ns=t_joint,
        joint_names=NAMES,
        joint_positions=pos,
        joint_states_topic="joint_states",
        voltage_time_ns=t_volt,
        voltage=volt,
        voltage_topic="voltage",
        storage=storage,
    )
    meta = _load_metadata(bag)
    assert meta["version"] == 8
    assert meta["storage_identifier"] == storage
    suffix = ".db3" if storage == "sqlite3" else ".mcap"
    assert meta["relative_file_paths"] == ["b" + suffix]
    assert meta["files"][0]["path"] == "b" + suffix
    assert meta["message_count"] == 9
    assert meta["starting_time"]["nanoseconds_since_epoch"] == min(t_joint[0], t_volt[0])
    assert meta["duration"]["nanoseconds"] == max(t_joint[-1], t_volt[-1]) - min(
        t_joint[0], t_volt[0]
    )
    humble_typestore = get_typestore(Stores.ROS2_HUMBLE)
    for entry in meta["topics_with_message_count"]:
        tm = entry["topic_metadata"]
        # Humble parses offered_qos_profiles as a YAML string (v9 writes a list, Humble fails)
        assert isinstance(tm["offered_qos_profiles"], str)
        assert tm["serialization_format"] == "cdr"
        assert tm["type_description_hash"] == humble_typestore.hash_rihs01(tm["type"])


@pytest.mark.skipif(not HUMBLE_STEP.is_dir(), reason="Humble sample bags not present")
def test_metadata_matches_humble_layout(tmp_path):
    """Our metadata.yaml holds every key Humble's own has, in the forms Humble parses."""
    humble = _load_metadata(HUMBLE_STEP)
    assert humble["version"] == 5
    t_joint, pos, vel, _, _ = _rig(n=5)
    bag = write_rig_bag(
        tmp_path / "b",
        joint_time_ns=t_joint,
        joint_names=NAMES,
        joint_positions=pos,
        joint_velocities=vel,
        joint_states_topic="joint_states",
    )
    ours = _load_metadata(bag)
    assert set(humble) <= set(ours)
    # the extra keys are newer-version fields Humble's parser ignores
    assert set(ours) - set(humble) == {"custom_data", "ros_distro"}
    h_topic = humble["topics_with_message_count"][0]
    o_topic = ours["topics_with_message_count"][0]
    assert set(h_topic) == set(o_topic)
    assert set(h_topic["topic_metadata"]) <= set(o_topic["topic_metadata"])
    assert set(o_topic["topic_metadata"]) - set(h_topic["topic_metadata"]) == {
        "type_description_hash"
    }
    for key in ("name", "type", "serialization_format", "offered_qos_profiles"):
        assert o_topic["topic_metadata"][key] == h_topic["topic_metadata"][key]
    assert set(humble["files"][0]) == set(ours["files"][0])
    for key in ("compression_format", "compression_mode"):
        assert ours[key] == humble[key] == ""


def test_float64_multiarray_voltage(tmp_path):
    """Voltage as Float64MultiArray at index 1 (zeros before it)."""
    t_joint, pos, _, t_volt, volt = _rig()
    bag = write_rig_bag(
        tmp_path / "b",
        joint_time_ns=t_joint,
        joint_names=NAMES,
        joint_positions=pos,
        joint_states_topic="joint_states",
        voltage_time_ns=t_volt,
        voltage=volt,
        voltage_topic="motor/command",
        voltage_type="std_msgs/msg/Float64MultiArray",
        voltage_index=1,
        storage="mcap",
    )
    summary = read_bag_summary(bag)
    assert summary.topics["motor/command"].msgtype == "std_msgs/msg/Float64MultiArray"
    tv, v = read_float64(bag, "motor/command", index=1)
    np.testing.assert_array_equal(tv, t_volt)
    np.testing.assert_array_equal(v, volt)
    np.testing.assert_array_equal(read_float64(bag, "motor/command", index=0)[1], 0.0)
    with pytest.raises(BagError, match="out of range"):
        read_float64(bag, "motor/command", index=2)
    with AnyReader([bag]) as reader:
        conn = next(c for c in reader.connections if c.topic == "motor/command")
        data = [reader.deserialize(raw, conn.msgtype).data for _, _, raw in reader.messages([conn])]
    np.testing.assert_array_equal(np.array(data), np.column_stack([np.zeros_like(volt), volt]))


def test_joint_state_effort_voltage(tmp_path):
    """Voltage as the first joint's effort in the joint-state messages."""
    t_joint, pos, vel, _, _ = _rig()
    volt = np.linspace(-3, 3, len(t_joint))
    bag = write_rig_bag(
        tmp_path / "b",
        joint_time_ns=t_joint,
        joint_names=NAMES,
        joint_positions=pos,
        joint_velocities=vel,
        joint_states_topic="joint_states",
        voltage=volt,
        voltage_type="sensor_msgs/msg/JointState",
    )
    assert set(read_bag_summary(bag).topics) == {"joint_states"}
    js = read_joint_states(bag, "joint_states")
    np.testing.assert_array_equal(js.efforts, np.column_stack([volt, np.zeros_like(volt)]))
    with pytest.raises(BagError, match="JointState"):
        read_float64(bag, "joint_states")


def test_overwrite_protection(tmp_path):
    """An existing bag is kept unless overwrite=True; a non-bag directory is never replaced."""
    t_joint, pos, _, _, _ = _rig(n=3)
    kw = dict(joint_time_ns=t_joint, joint_names=NAMES, joint_positions=pos)
    bag = write_rig_bag(tmp_path / "b", **kw)
    with pytest.raises(BagError, match="exists already") as info:
        write_rig_bag(tmp_path / "b", **kw, storage="mcap")
    assert "\n" not in str(info.value)
    assert read_bag_summary(bag).storage == "sqlite3"  # untouched
    write_rig_bag(tmp_path / "b", **kw, storage="mcap", overwrite=True)
    assert read_bag_summary(bag).storage == "mcap"
    assert sorted(p.name for p in bag.iterdir()) == ["b.mcap", "metadata.yaml"]
    # never replace something that is not a bag
    other = tmp_path / "notabag"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(BagError, match="not a rosbag2 bag directory"):
        write_rig_bag(other, **kw, overwrite=True)
    assert (other / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(storage="leveldb"), "unknown storage 'leveldb'"),
        (dict(voltage_type="std_msgs/msg/Float32"), "unknown voltage type"),
        (dict(joint_positions=np.zeros((3, 3))), "joint_positions must have shape"),
        (dict(joint_time_ns=np.array([3, 2, 1])), "non-decreasing"),
        (dict(joint_time_ns=np.array([-1, 0, 1])), "negative"),
        (dict(joint_time_ns=np.array([0.5, 1.0, 2.0])), "whole nanoseconds"),
        (dict(voltage=np.ones(2), voltage_time_ns=np.arange(2)), "needs voltage_topic"),
        (dict(voltage=np.ones(2), voltage_topic="v"), "needs voltage_time_ns"),
        (dict(voltage_index=-1), "voltage_index must be an integer >= 0"),
        (dict(joint_names=["a", "a"]), "unique"),
        (dict(joint_states_topic=""), "joint_states_topic"),
        (
            dict(voltage=np.ones(2), voltage_time_ns=np.arange(2), voltage_topic="joint_states"),
            "both",
        ),
    ],
)
def test_write_errors(tmp_path, change, match):
    """Bad arguments give a one-line BagError (a ValueError) and leave nothing on disk."""
    kw = dict(
        joint_time_ns=np.arange(3, dtype=np.int64),
        joint_names=NAMES,
        joint_positions=np.zeros((3, 2)),
        joint_states_topic="joint_states",
    )
    kw.update(change)
    with pytest.raises(BagError, match=match) as info:
        write_rig_bag(tmp_path / "b", **kw)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "b").exists()
    assert list(tmp_path.iterdir()) == []


def test_read_errors(tmp_path):
    """Non-bags, missing topics and wrong types give one-line BagErrors naming the bag's content."""
    with pytest.raises(BagError, match="does not exist"):
        read_bag_summary(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BagError, match="no metadata.yaml"):
        read_bag_summary(tmp_path / "empty")
    (tmp_path / "file.txt").write_text("hello")
    with pytest.raises(BagError, match="not a rosbag2 bag"):
        read_topic(tmp_path / "file.txt", "x")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "metadata.yaml").write_text("rosbag2_bagfile_information: [1")
    with pytest.raises(BagError, match="broken"):
        read_bag_summary(tmp_path / "broken")

    t_joint, pos, _, _, _ = _rig(n=3)
    bag = write_rig_bag(
        tmp_path / "b", joint_time_ns=t_joint, joint_names=NAMES, joint_positions=pos
    )
    with pytest.raises(BagError, match="topic 'nope' not in bag .*joint_states.*3 msgs"):
        read_topic(bag, "nope")
    with pytest.raises(BagError, match="expected std_msgs/msg/Float64"):
        read_topic(bag, "joint_states", "std_msgs/msg/Float64")
    with pytest.raises(BagError, match="expected std_msgs/msg/Float64"):
        read_float64(bag, "joint_states")


@pytest.mark.skipif(not HUMBLE_STEP.is_dir(), reason="Humble sample bags not present")
def test_read_real_humble_bag():
    """A bag recorded by ROS 2 Humble: sim-time header stamps, wall-clock receive times."""
    summary = read_bag_summary(HUMBLE_STEP)
    assert summary.storage == "sqlite3"
    assert summary.metadata_version == 5
    assert list(summary.topics) == ["joint_states"]
    assert summary.topics["joint_states"].msgtype == "sensor_msgs/msg/JointState"
    assert summary.topics["joint_states"].message_count == 5001
    assert summary.message_count == 5001

    js = read_joint_states(HUMBLE_STEP, "joint_states")
    assert js.names == ["joint0", "joint1"]
    assert js.time_ns.shape == js.receive_time_ns.shape == (5001,)
    assert js.positions.shape == js.velocities.shape == (5001, 2)
    assert js.efforts is None
    # header stamps: simulation time, starting ~18.8 s and spanning ~10 s at 2 ms
    stamps_s = js.time_ns * 1e-9
    assert 18.0 < stamps_s[0] < 19.0
    assert stamps_s[-1] - stamps_s[0] == pytest.approx(10.0, abs=0.01)
    assert np.all(np.diff(js.time_ns) > 0)
    # receive (log) times: wall clock, ~1.69e9 s since the epoch
    recv_s = js.receive_time_ns * 1e-9
    assert np.all((recv_s > 1.69e9) & (recv_s < 1.70e9))
    assert js.receive_time_ns[0] == summary.start_time_ns
    assert js.receive_time_ns[-1] == summary.end_time_ns
    assert np.all(np.isfinite(js.positions))
    # the leading-slash spelling finds the same topic
    assert len(read_topic(HUMBLE_STEP, "/joint_states")) == 5001


def test_messages_of_one_layout_are_read_at_once_and_others_one_by_one():
    """io.bags.bulk: the numbers of messages that share the first's bytes elsewhere; else None."""
    from mb_estimation.io.bags.bulk import fixed_layout
    from mb_estimation.io.bags.reader import _JOINT_STATE_NUMBERS

    store = get_typestore(Stores.ROS2_HUMBLE)
    state, header = store.types["sensor_msgs/msg/JointState"], store.types["std_msgs/msg/Header"]
    time = store.types["builtin_interfaces/msg/Time"]
    rng = np.random.default_rng(1)

    def message(k, frame="base", names=("arm", "pendulum"), velocity=2):
        return state(header(time(1_700_000_000 + k, 999_999_999 - k), frame), list(names),
                     rng.normal(size=2), rng.normal(size=velocity), np.zeros(0))

    messages = [message(k) for k in range(5)]
    messages[2].position[0] = np.nan  # a number like any other to the layout
    raws = [bytes(store.serialize_cdr(m, state.__msgtype__)) for m in messages]
    numbers = fixed_layout(store, state.__msgtype__, raws, messages[0], _JOINT_STATE_NUMBERS)
    np.testing.assert_array_equal(numbers["sec"], [1_700_000_000 + k for k in range(5)])
    np.testing.assert_array_equal(numbers["nanosec"], [999_999_999 - k for k in range(5)])
    np.testing.assert_array_equal(numbers["position"], np.stack([m.position for m in messages]))
    np.testing.assert_array_equal(numbers["velocity"], np.stack([m.velocity for m in messages]))
    assert numbers["effort"].shape == (5, 0)
    for odd in (message(5, frame="tool"), message(5, names=("arm", "pendule")),
                message(5, velocity=0)):  # same length, other bytes; other length
        others = raws + [bytes(store.serialize_cdr(odd, state.__msgtype__))]
        assert fixed_layout(store, state.__msgtype__, others, messages[0],
                            _JOINT_STATE_NUMBERS) is None


def test_joint_states_read_at_once_or_one_by_one_are_the_same(tmp_path, monkeypatch):
    import mb_estimation.io.bags.reader as reader

    t_joint, pos, vel, t_volt, volt = _rig(n=30, m=20)
    bag = write_rig_bag(tmp_path / "b", joint_time_ns=t_joint, joint_names=NAMES,
                        joint_positions=pos, joint_velocities=vel, voltage_time_ns=t_volt,
                        voltage=volt, voltage_topic="/motor_voltage")
    at_once = read_joint_states(bag, "/joint_states"), read_float64(bag, "/motor_voltage")
    monkeypatch.setattr(reader, "fixed_layout", lambda *args: None)
    one_by_one = read_joint_states(bag, "/joint_states"), read_float64(bag, "/motor_voltage")
    for field in ("time_ns", "receive_time_ns", "positions", "velocities"):
        np.testing.assert_array_equal(getattr(at_once[0], field), getattr(one_by_one[0], field))
    assert at_once[0].efforts is None and at_once[0].names == one_by_one[0].names == NAMES
    np.testing.assert_array_equal(at_once[0].time_ns, t_joint)
    np.testing.assert_array_equal(at_once[0].positions, pos)
    for mine, theirs in zip(at_once[1], one_by_one[1], strict=True):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_array_equal(at_once[1][1], volt)
