"""Two DDS implementations, one wire (issue 15): Cyclone DDS and rclpy's Fast DDS talk both ways.

* the DDS-transport node (``node --transport dds``, Cyclone DDS) fed by an rclpy (Fast DDS)
  publisher and listened to by an rclpy subscriber in this test;
* the rclpy node (``node --transport ros``) fed by the package's Cyclone DDS players
  (``DdsSink``, as ``rig-sim``/``replay --transport dds`` use them), listened to the same way.

What crosses the wire is checked, not the estimate (test_node_end_to_end.py and
test_ros_end_to_end.py do that): the node's diagnostics count the joint states and voltages it
received, and its filtered joint states (one per received sample, stamped as the sample) reach
the rclpy subscriber. The nodes skip the compile warm-up (``node.warm_up: false``) and the
inputs are plain sinusoids, so each direction takes seconds. Without
:data:`~mb_estimation.transport.dds_bus.ROS_INTEROPERABILITY` nothing crosses
(``test_samples_cross_only_with_the_interoperability_setting``).
"""

import os
import time

import numpy as np
import pytest
from configs import write_config
from processes import Process, mb_estimation, wait_until
from ros_listener import listening

pytest.importorskip("cyclonedds")
rclpy = pytest.importorskip("rclpy")
pytest.importorskip("diagnostic_msgs")

from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from mb_estimation.transport.dds_bus import loopback_config  # noqa: E402

DOMAIN = int(os.environ.get("MB_TEST_INTEROP_DOMAIN", "88"))
BEST_EFFORT = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)


@pytest.fixture
def listener(ros_network):
    with listening(DOMAIN) as probe:
        yield probe


@pytest.fixture(scope="module")
def config_path(tmp_path_factory):
    """furuta_synthetic without the start-up compile: the test is about the wire."""
    return write_config(tmp_path_factory.mktemp("interop") / "furuta_wire.yaml",
                        node={"warm_up": False, "window_s": 12.0, "stride_s": 12.0})  # none solved


def _messages(config_path: str, seconds: float = 4.0, rate_hz: float = 100.0):
    """A rig's joint states and voltages at ``rate_hz``, stamped from now (no simulation)."""
    from mb_estimation.config import load_config
    from mb_estimation.transport import players

    config = load_config(config_path)
    names = tuple(config.recording.joints[joint].name for joint in config.rig_spec.joints)
    start = time.time_ns()
    for k in range(int(seconds * rate_hz)):
        t, stamp = k / rate_hz, start + int(k * 1e9 / rate_hz)
        angles = np.array([0.3 * np.sin(2.0 * t), np.pi + 0.2 * np.sin(3.0 * t)])
        rates = np.array([0.6 * np.cos(2.0 * t), 0.6 * np.cos(3.0 * t)])
        yield players.TimedMessage(stamp, config.recording.joint_states_topic,
                                   players.JOINT_STATE,
                                   players.JointStatePayload(names, angles, rates, np.array([])))
        yield players.TimedMessage(stamp, config.recording.voltage_topic, players.FLOAT64,
                                   float(np.sin(5.0 * t)))


@pytest.mark.parametrize("node_transport", ["dds", "ros"],
                         ids=["cyclone node, fastdds publisher",
                              "fastdds node, cyclone players"])
def test_the_node_and_its_inputs_talk_across_middlewares(node_transport, config_path,
                                                         listener):
    """The other middleware feeds the node; the node's outputs reach rclpy."""
    from mb_estimation.config import load_config
    from mb_estimation.transport import players
    from mb_estimation.transport.dds_bus import DdsBus
    from mb_estimation.transport.ros_node import ros_sink

    env = dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN), CYCLONEDDS_URI=loopback_config())
    node = Process(mb_estimation("node", "--transport", node_transport, "--config",
                                 config_path), env)
    topics = players.rig_sim_topics(load_config(config_path))
    try:
        node.wait_for("ready" if node_transport == "dds" else "mb_estimation node ready", 120)
        if node_transport == "dds":  # fed by rclpy (Fast DDS), from this process
            sink = ros_sink(listener.node)
            for topic, kind in topics.items():
                sink.publisher(topic, kind)
            assert sink.wait_for_subscribers(1, 20.0), node.tail()
            players.play(_messages(config_path), sink, rate=1.0)
        else:  # fed by the Cyclone DDS players, from this process
            with DdsBus(DOMAIN, config=loopback_config()) as bus:
                sink = players.DdsSink(bus)
                for topic, kind in topics.items():
                    sink.publisher(topic, kind)
                assert sink.wait_for_subscribers(1, 20.0), node.tail()
                players.play(_messages(config_path), sink, rate=1.0)
        wait_until(lambda: listener.count("joint_samples") >= 300
                   and len(listener.filtered()) >= 300, 10, period=0.5)
    finally:
        node.stop()
    samples, voltages = listener.count("joint_samples"), listener.count("voltage_samples")
    filtered = listener.filtered()
    print(f"node --transport {node_transport}: {samples} joint states and {voltages} voltages "
          f"received of 400 sent, {len(filtered)} filtered states heard over rclpy")
    assert samples >= 300 and voltages >= 300, node.tail()  # the inputs reached the node
    assert len(filtered) >= 300, node.tail()  # and its output reached rclpy
    assert len(set(filtered)) == len(filtered)


@pytest.mark.parametrize("interoperable", [True, False], ids=["with", "without"])
def test_samples_cross_only_with_the_interoperability_setting(interoperable, listener,
                                                              monkeypatch):
    """The measurement behind ROS_INTEROPERABILITY, in this process, both ways."""
    import time

    from mb_estimation.transport import dds_bus, dds_messages

    if not interoperable:
        monkeypatch.setattr(dds_bus, "ROS_INTEROPERABILITY",
                            '<CycloneDDS><Domain Id="any"/></CycloneDDS>')
    heard_by_cyclone, heard_by_fastdds = [], []
    publisher = listener.node.create_publisher(JointState, "/interop/to_cyclone", BEST_EFFORT)
    listener.node.create_subscription(JointState, "/interop/to_fastdds",
                                      heard_by_fastdds.append, BEST_EFFORT)
    with dds_bus.DdsBus(DOMAIN, config=loopback_config()) as bus:
        bus.subscribe("/interop/to_cyclone", dds_messages.JointState, heard_by_cyclone.append,
                      qos="sensor_data")
        publish = bus.publisher("/interop/to_fastdds", dds_messages.JointState,
                                qos="sensor_data")
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            publisher.publish(JointState(name=["arm"], position=[1.0]))
            publish(dds_messages.JointState(name=["arm"], position=[2.0]))
            time.sleep(0.05)
    print(f"{'with' if interoperable else 'without'} the setting: Cyclone heard "
          f"{len(heard_by_cyclone)}, Fast DDS heard {len(heard_by_fastdds)} of ~120 each")
    if interoperable:
        assert len(heard_by_cyclone) > 50 and len(heard_by_fastdds) > 50
    else:
        assert heard_by_cyclone == [] and heard_by_fastdds == []
