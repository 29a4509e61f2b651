"""The estimator node over bare DDS on loopback (issue 5): topics, message layout, faults.

The estimator is the fast fake of test_node_core here; test_node_end_to_end runs the real one.
Every participant runs on 127.0.0.1 only (CYCLONEDDS_URI from ``loopback_config``) in its own
domain.
"""

import math
import os
import threading
import time

import numpy as np
import pytest

pytest.importorskip("cyclonedds")

from test_node_core import NAMES, NS, T0, _config, _fake_estimator  # noqa: E402

from mb_estimation.transport.dds_bus import DdsBus  # noqa: E402
from mb_estimation.transport.dds_messages import (  # noqa: E402
    DiagnosticArray,
    Float64,
    Float64MultiArray,
    Header,
    JointState,
    ns_to_stamp,
    stamp_to_ns,
)
from mb_estimation.transport.dds_node import DdsNode  # noqa: E402

DOMAIN = int(os.environ.get("MB_TEST_DDS_NODE_DOMAIN", "79"))


@pytest.fixture(autouse=True)
def _loopback_only(dds_loopback):
    """Every test here keeps DDS on 127.0.0.1 (conftest.dds_loopback)."""


class Listener:
    """A test subscriber on every output topic of the node."""

    def __init__(self, bus, name="mb_estimator"):
        self.messages = {key: [] for key in ("parameters", "fused_parameters",
                                             "shadow_joint_states", "filtered_joint_states",
                                             "diagnostics")}
        self.lock = threading.Lock()
        for key, kind, qos in (("parameters", Float64MultiArray, "default"),
                               ("fused_parameters", Float64MultiArray, "default"),
                               ("shadow_joint_states", JointState, "burst"),
                               ("filtered_joint_states", JointState, "sensor_data")):
            bus.subscribe(f"/{name}/{key}", kind, self._keep(key), qos=qos)
        bus.subscribe("/diagnostics", DiagnosticArray, self._keep("diagnostics"))

    def _keep(self, key):
        def keep(msg):
            with self.lock:
                self.messages[key].append(msg)
        return keep

    def wait(self, key, count, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.messages[key]) >= count:
                    return list(self.messages[key])
            time.sleep(0.02)
        raise AssertionError(f"{key}: {len(self.messages[key])} messages, expected {count}")


def _all_finite(listener):
    for key in ("parameters", "fused_parameters"):
        for msg in listener.messages[key]:
            assert all(math.isfinite(v) for v in msg.data), key
    for key in ("shadow_joint_states", "filtered_joint_states"):
        for msg in listener.messages[key]:
            assert all(math.isfinite(v) for v in [*msg.position, *msg.velocity]), key


def _publish_rig(bus, seconds, rate_hz=500.0, voltage_type=Float64):
    joints = bus.publisher("/joint_states", JointState, qos="sensor_data")
    voltage = bus.publisher("/control_voltage", voltage_type)
    for publisher in (joints, voltage):
        assert publisher.wait_for_subscribers(1, 10.0)
    for k in range(int(seconds * rate_hz)):
        t = k / rate_hz
        stamp = T0 + int(round(t * NS))
        value = Float64(data=1.0) if voltage_type is Float64 else JointState()
        voltage(value, timestamp_ns=stamp)
        joints(JointState(header=Header(stamp=ns_to_stamp(stamp)), name=list(NAMES),
                          position=[0.5 * math.sin(1.3 * t) + 0.2 * t, 0.1 * math.cos(2 * t)]))
        time.sleep(0.0003)  # a rig's pace, roughly: best effort drops what bursts past depth 5


def test_node_publishes_every_topic_in_the_documented_layout():
    with DdsBus(DOMAIN) as rig, DdsBus(DOMAIN) as test:
        node = DdsNode(_config(), DdsBus(DOMAIN), estimator=_fake_estimator)
        listener = Listener(test)
        node.start()
        try:
            _publish_rig(rig, 10.6)
            parameters = listener.wait("parameters", 2)
            fused = listener.wait("fused_parameters", 2)
            listener.wait("shadow_joint_states", 501)
            filtered = listener.wait("filtered_joint_states", 200)  # best effort: some lost
            diagnostics = listener.wait("diagnostics", 2)
        finally:
            node.close()
    names = ["J_Axx", "J_Ayy", "J_Azz", "J_Byy", "J_Bzz", "K", "b1", "b2", "mu1", "mu2",
             "tilt_rx", "tilt_ry", "tilt_rz"]  # furuta.yaml's free parameters
    for msg in (parameters[-1], fused[-1]):
        n = len(names)
        dims = msg.layout.dim
        assert (dims[0].label, dims[0].size, dims[0].stride) == ("value,std", 2, 2 * n)
        assert (dims[1].label, dims[1].size, dims[1].stride) == (",".join(names), n, n)
        assert len(msg.data) == 2 * n
        matrix = np.reshape(msg.data, (2, n))
        assert np.all(matrix[1] > 0)  # standard deviations
        np.testing.assert_allclose(matrix[0, 10:], 0.0, atol=1e-12)  # tilt: identity
    shadow = listener.messages["shadow_joint_states"]
    assert stamp_to_ns(shadow[0].header.stamp) == T0 and list(shadow[0].name) == list(NAMES)
    assert len(filtered[0].position) == 2
    status = diagnostics[-1].status[0]
    values = {kv.key: kv.value for kv in status.values}
    assert status.name == "mb_estimator: estimator" and int(values["windows_accepted"]) >= 1
    _all_finite(listener)


def test_wrong_voltage_type_and_bad_samples_are_reported_in_diagnostics():
    """A voltage topic of the wrong type never delivers: discovery finds it; NaNs are counted."""
    with DdsBus(DOMAIN) as rig, DdsBus(DOMAIN) as test:
        node = DdsNode(_config(window_s=1.0, stride_s=1.0, buffer_s=5.0), DdsBus(DOMAIN),
                       estimator=_fake_estimator)
        listener = Listener(test)
        node.start()
        try:
            joints = rig.publisher("/joint_states", JointState, qos="sensor_data")
            wrong = rig.publisher("/control_voltage", JointState)
            assert joints.wait_for_subscribers(1, 10.0)
            for k in range(1500):
                stamp = T0 + k * 1_000_000
                position = [float("nan") if k % 100 == 7 else 0.3 * math.sin(k * 1e-2), 0.0]
                names = ["joint0", "joint1"] if k == 3 else list(NAMES)
                joints(JointState(header=Header(stamp=ns_to_stamp(stamp)), name=names,
                                  position=position))
                wrong(JointState())
                time.sleep(0.0003)
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                d = node.core.diagnostics()
                if "is not std_msgs/msg/Float64" in d.get("last_error", "")\
                        or d.get("message_errors", 0) and d.get("windows_done", 0):
                    break
                time.sleep(0.1)
            d = node.core.diagnostics()
        finally:
            node.close()
    assert d["message_errors"] >= 1, d
    assert d["samples_non_finite"] >= 10 and d["samples_unknown_joints"] >= 1, d
    assert d["windows_rejected"] >= 1 and d["windows_accepted"] == 0
    assert listener.messages["parameters"] == []
    _all_finite(listener)


def test_a_dds_that_cannot_start_is_one_line(tmp_path, monkeypatch, capsys):
    """A CYCLONEDDS_URI naming an interface this machine does not have: no traceback."""
    from mb_estimation.cli import main
    from mb_estimation.io.bags import write_rig_bag

    bag = write_rig_bag(tmp_path / "bag", joint_time_ns=T0 + np.arange(3) * 1_000_000,
                        joint_names=list(NAMES), joint_positions=np.zeros((3, 2)))
    monkeypatch.setenv("CYCLONEDDS_URI", "<CycloneDDS><Domain><General><Interfaces>"
                       "<NetworkInterface address=\"10.255.255.1\"/></Interfaces></General>"
                       "</Domain></CycloneDDS>")
    for command in (["replay", str(bag)], ["node", "--config", "furuta"]):
        assert main([*command, "--domain-id", str(DOMAIN + 13)]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith("mb-estimation: error: cannot start DDS"), err


def test_a_node_window_shorter_than_three_steps_is_one_line(capsys):
    """EstimatorCore's check of node.window_s against the step: exit status 2, no traceback."""
    from mb_estimation.cli import main

    assert main(["node", "--config", "furuta", "--dt", "2", "--domain-id",
                 str(DOMAIN + 14)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("mb-estimation: error: node.window_s 5.0 s is shorter than three estimation "
                   "steps of 2.0 s"), err
