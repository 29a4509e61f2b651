"""Bare-DDS transport: ROS 2 wire format of the IDL types, topic names, QoS and a loopback bus.

Skipped when the ``cyclonedds`` package is absent (``pip install .[dds]``).

Every participant here runs on the loopback interface only: an autouse fixture points
``CYCLONEDDS_URI`` at :func:`loopback_config` before any participant exists.  Cyclone DDS reads
``CYCLONEDDS_URI`` when it creates a *domain* (the first participant of a domain id in the
process), and every test closes its buses, so each test's first participant reads the fixture's
value.  Payloads carry a per-test token so that a concurrent run of these tests on the same host
and domain (which would discover ours over loopback) cannot confuse them.
"""

import os
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytest.importorskip("cyclonedds")

from cyclonedds.qos import Policy  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

from mb_estimation.transport import dds_bus as bus_mod  # noqa: E402
from mb_estimation.transport import dds_messages as m  # noqa: E402
from mb_estimation.transport.dds_bus import (  # noqa: E402
    QOS_PROFILES,
    DdsBus,
    loopback_config,
    resolve_domain_id,
)

#: Test domain (unlikely to be anyone's ROS_DOMAIN_ID); override with MB_TEST_DDS_DOMAIN.
DOMAIN = int(os.environ.get("MB_TEST_DDS_DOMAIN", "77"))
TIMEOUT = 4.0

TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)
RB = TYPESTORE.types


@pytest.fixture(autouse=True)
def _loopback_only(dds_loopback):
    """Every test here keeps DDS on 127.0.0.1 (conftest.dds_loopback)."""


@pytest.fixture()
def token() -> str:
    return uuid.uuid4().hex[:12]


# --- IDL types: names and wire format ---------------------------------------------------------

def test_dds_type_names_follow_rmw_convention():
    for ros_type, cls in m.DDS_TYPES.items():
        pkg, kind, name = ros_type.split("/")
        assert cls.__idl_typename__ == f"{pkg}::{kind}::dds_::{name}_"
    assert m.JointState.__idl_typename__ == "sensor_msgs::msg::dds_::JointState_"


def test_field_names_and_order_match_ros_definitions():
    for ros_type, cls in m.DDS_TYPES.items():
        _, fields = TYPESTORE.fielddefs[ros_type]
        assert list(cls.__dataclass_fields__) == [f[0] for f in fields], ros_type
    consts = {name: value for name, _, value in
              TYPESTORE.fielddefs["diagnostic_msgs/msg/DiagnosticStatus"][0]}
    for name, value in consts.items():
        assert getattr(m.DiagnosticStatus, name) == value


def _rb_header(sec, nanosec, frame_id):
    return RB["std_msgs/msg/Header"](
        stamp=RB["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec), frame_id=frame_id)


def _joint_state_pair(frame_id):
    names = ["arm", "pendulum", "\u00e4xis"]  # a non-ASCII name: strings are UTF-8 on the wire
    pos, vel, eff = [0.1, -0.25, 3.0], [1.5, 2.5, -1e-9], [0.0, 3.25, 1e300]
    ours = m.JointState(header=m.Header(stamp=m.Time(sec=-3, nanosec=999_999_999),
                                        frame_id=frame_id),
                        name=names, position=pos, velocity=vel, effort=eff)
    ref = RB["sensor_msgs/msg/JointState"](
        header=_rb_header(-3, 999_999_999, frame_id), name=names,
        position=np.array(pos), velocity=np.array(vel), effort=np.array(eff))
    return ours, ref, "sensor_msgs/msg/JointState"


def _multiarray_pair(frame_id):
    dims = [("params", 3, 6), (frame_id, 2, 2)]
    data = [1.0, -2.0, 0.5, 4.0, 1e-3, 7.0]
    ours = m.Float64MultiArray(
        layout=m.MultiArrayLayout(
            dim=[m.MultiArrayDimension(label=lb, size=sz, stride=st) for lb, sz, st in dims],
            data_offset=1),
        data=data)
    ref = RB["std_msgs/msg/Float64MultiArray"](
        layout=RB["std_msgs/msg/MultiArrayLayout"](
            dim=[RB["std_msgs/msg/MultiArrayDimension"](label=lb, size=sz, stride=st)
                 for lb, sz, st in dims],
            data_offset=1),
        data=np.array(data))
    return ours, ref, "std_msgs/msg/Float64MultiArray"


def _diagnostics_pair(frame_id):
    statuses = [
        (m.DiagnosticStatus.OK, "estimator", "running", "rig1", [("rate", "250"), ("k", "")]),
        (m.DiagnosticStatus.STALE, frame_id, "", "x", []),
        # rosbags packs ROS 'byte' as a signed char, so 127 is the largest level it encodes;
        # ROS 2 'byte' is octet/uint8_t (255 is checked below without rosbags).
        (127, "large level", "m", "", [("a", "b")]),
    ]
    ours = m.DiagnosticArray(
        header=m.Header(stamp=m.Time(sec=1_700_000_000, nanosec=5), frame_id=frame_id),
        status=[m.DiagnosticStatus(level=lv, name=n, message=msg, hardware_id=hw,
                                   values=[m.KeyValue(key=k, value=v) for k, v in kv])
                for lv, n, msg, hw, kv in statuses])
    ref = RB["diagnostic_msgs/msg/DiagnosticArray"](
        header=_rb_header(1_700_000_000, 5, frame_id),
        status=[RB["diagnostic_msgs/msg/DiagnosticStatus"](
            level=lv, name=n, message=msg, hardware_id=hw,
            values=[RB["diagnostic_msgs/msg/KeyValue"](key=k, value=v) for k, v in kv])
            for lv, n, msg, hw, kv in statuses])
    return ours, ref, "diagnostic_msgs/msg/DiagnosticArray"


def _float64_pair(frame_id):
    del frame_id
    return m.Float64(data=-12.5), RB["std_msgs/msg/Float64"](data=-12.5), "std_msgs/msg/Float64"


@pytest.mark.parametrize("make", [_joint_state_pair, _multiarray_pair, _diagnostics_pair,
                                  _float64_pair])
# frame_id lengths 0..9 move everything after it through every 4- and 8-byte alignment.
@pytest.mark.parametrize("frame_id", ["", "a", "ab", "abc", "base_link"])
def test_cdr_bytes_equal_rosbags(make, frame_id):
    ours, ref, ros_type = make(frame_id)
    got = ours.serialize()
    want = bytes(TYPESTORE.serialize_cdr(ref, ros_type))
    # Both start with the same 4-byte encapsulation header: 00 01 = CDR (XCDR1) little endian,
    # options 00 00.  Neither pads the end: Cyclone pads to 4 bytes only when writing the
    # sample (DataWriter.write), which is not part of the message's CDR.
    assert got[:4] == want[:4] == b"\x00\x01\x00\x00"
    assert got == want
    # And each side reads the other's bytes back to the same message.
    assert type(ours).deserialize(want) == ours
    back = TYPESTORE.deserialize_cdr(got, ros_type)
    assert TYPESTORE.serialize_cdr(back, ros_type) == want


@pytest.mark.parametrize("level", [m.DiagnosticStatus.ERROR, 255])
def test_diagnostic_level_is_one_unsigned_byte(level):
    status = m.DiagnosticStatus(level=level)
    # header, level byte, 3 bytes padding, then the length (1) of the empty 'name' string.
    raw = status.serialize()
    assert raw[:12] == b"\x00\x01\x00\x00" + bytes([level]) + b"\x00" * 3 + b"\x01\x00\x00\x00"
    assert m.DiagnosticStatus.deserialize(raw).level == level


# --- helpers ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("ros", "dds"), [
    ("/joint_states", "rt/joint_states"),
    ("joint_states", "rt/joint_states"),
    ("/mb_estimator/parameters", "rt/mb_estimator/parameters"),
    ("mb_estimator/diagnostics_2", "rt/mb_estimator/diagnostics_2"),
])
def test_ros_topic_name(ros, dds):
    assert m.ros_topic_name(ros) == dds


@pytest.mark.parametrize("bad", ["", "/", "//a", "a//b", "a/", "~/x", "/{node}/x", "/1abc",
                                 "a b", "a-b"])
def test_ros_topic_name_rejects_invalid(bad):
    with pytest.raises(ValueError):
        m.ros_topic_name(bad)


@pytest.mark.parametrize("ns", [0, 1, 999_999_999, 1_000_000_000, 1_712_345_678_123_456_789,
                                -1, -1_500_000_000])
def test_stamp_round_trip(ns):
    stamp = m.ns_to_stamp(ns)
    assert 0 <= stamp.nanosec < 1_000_000_000
    assert m.stamp_to_ns(stamp) == ns
    assert m.ns_to_stamp(-1) == m.Time(sec=-1, nanosec=999_999_999)


def test_stamp_overflow():
    with pytest.raises(OverflowError):
        m.ns_to_stamp(2**31 * 1_000_000_000)
    assert m.ns_to_stamp(1.5e9) == m.Time(sec=1, nanosec=500_000_000)


def test_resolve_domain_id(monkeypatch):
    assert resolve_domain_id() == 0
    monkeypatch.setenv("ROS_DOMAIN_ID", " 42 ")
    assert resolve_domain_id() == 42
    assert resolve_domain_id(7) == 7
    monkeypatch.setenv("ROS_DOMAIN_ID", "")
    assert resolve_domain_id() == 0
    monkeypatch.setenv("ROS_DOMAIN_ID", "x")
    with pytest.raises(ValueError):
        resolve_domain_id()
    with pytest.raises(ValueError):
        resolve_domain_id(233)


# --- QoS -------------------------------------------------------------------------------------

def test_qos_profiles_match_rmw():
    assert QOS_PROFILES == {"default": (True, 10), "sensor_data": (False, 5), "burst": (True, 2000)}
    default = bus_mod._qos("default", writer=True)
    assert isinstance(default[Policy.Reliability], Policy.Reliability.Reliable)
    assert default[Policy.History] == Policy.History.KeepLast(10)
    assert default[Policy.Durability] == Policy.Durability.Volatile
    assert default[Policy.WriterDataLifecycle] == Policy.WriterDataLifecycle(autodispose=False)
    sensor = bus_mod._qos("sensor_data", writer=False)
    assert sensor[Policy.Reliability] == Policy.Reliability.BestEffort
    assert sensor[Policy.History] == Policy.History.KeepLast(5)
    assert sensor[Policy.Durability] == Policy.Durability.Volatile
    assert sensor[Policy.DataRepresentation] == Policy.DataRepresentation(
        use_cdrv0_representation=True)
    with pytest.raises(ValueError, match="unknown QoS profile"):
        bus_mod._qos("reliable", writer=True)


def test_entities_carry_ros_names_and_qos():
    with DdsBus(DOMAIN) as bus:
        pub = bus.publisher("/joint_states", m.JointState, qos="sensor_data")
        sub = bus.subscribe("/mb_estimator/parameters", m.Float64MultiArray, lambda s: None)
        assert pub.writer.topic.get_name() == "rt/joint_states"
        assert pub.writer.topic.get_type_name() == "sensor_msgs::msg::dds_::JointState_"
        assert sub.reader.topic.get_name() == "rt/mb_estimator/parameters"
        assert sub.reader.topic.get_type_name() == "std_msgs::msg::dds_::Float64MultiArray_"
        wq, rq = pub.writer.get_qos(), sub.reader.get_qos()
        assert wq[Policy.Reliability] == Policy.Reliability.BestEffort
        assert wq[Policy.History] == Policy.History.KeepLast(5)
        assert isinstance(rq[Policy.Reliability], Policy.Reliability.Reliable)
        assert rq[Policy.History] == Policy.History.KeepLast(10)
        with pytest.raises(ValueError, match="already used"):
            bus.subscribe("/joint_states", m.Float64, lambda s: None)


# --- loopback configuration ------------------------------------------------------------------

def test_loopback_config_xml():
    root = ET.fromstring(loopback_config(DOMAIN, max_participants=40))
    dom = root.find("Domain")
    assert dom.get("Id") == str(DOMAIN)
    assert dom.find("General/Interfaces/NetworkInterface").get("address") == "127.0.0.1"
    assert dom.find("General/AllowMulticast").text == "false"
    assert dom.find("Discovery/Peers/Peer").get("address") == "127.0.0.1"
    assert dom.find("Discovery/ParticipantIndex").text == "auto"
    assert dom.find("Discovery/MaxAutoParticipantIndex").text == "40"
    assert dom.find("Tracing") is None
    assert ET.fromstring(loopback_config()).find("Domain").get("Id") == "any"


@pytest.mark.parametrize("route", ["env", "argument"])
def test_loopback_config_is_used(route, tmp_path, monkeypatch):
    trace = tmp_path / "cyclone & trace.log"  # '&' checks the XML escaping of the path
    config = loopback_config(DOMAIN, trace_file=trace)
    if route == "env":
        monkeypatch.setenv("CYCLONEDDS_URI", config)
        bus = DdsBus(DOMAIN)
    else:
        bus = DdsBus(DOMAIN, config=config)
    with bus:
        bus.publisher("/joint_states", m.JointState)
    log = trace.read_text()
    assert "Domain/General/Interfaces/NetworkInterface[@address]: 127.0.0.1" in log
    assert "Domain/General/AllowMulticast/#text: false" in log
    assert "Domain/Discovery/Peers/Peer[@Address]: 127.0.0.1" in log
    selected = [line for line in log.splitlines() if "selected interfaces:" in line]
    assert selected and all(line.split("selected interfaces:")[1].split()[0] == "lo"
                            for line in selected), selected
    assert f"domainid {DOMAIN}" in log


def test_explicit_config_conflicts_are_refused():
    a = DdsBus(DOMAIN, config=loopback_config(DOMAIN))
    try:
        with DdsBus(DOMAIN, config=loopback_config(DOMAIN)) as b:  # same config: shared domain
            assert b.participant.domain_id == DOMAIN
        with pytest.raises(ValueError, match="another config"):
            DdsBus(DOMAIN, config=loopback_config(DOMAIN, max_participants=5))
    finally:
        a.close()
    assert DOMAIN not in bus_mod._DOMAINS


# --- round trips over DDS --------------------------------------------------------------------

class _Inbox:
    """Collects messages whose marker matches this test's token."""

    def __init__(self, match):
        self.match = match
        self.items = []
        self.event = threading.Event()

    def __call__(self, msg):
        if self.match(msg):
            self.items.append(msg)
            self.event.set()


def _publish_until(publish, msg, inbox, timeout=TIMEOUT):
    """Publish ``msg`` every 50 ms until ``inbox`` has one (best effort may drop early ones)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        publish(msg)
        if inbox.event.wait(0.05):
            return True
    return False


def test_round_trip_between_two_participants(token):
    js_in = _Inbox(lambda s: s.header.frame_id == token)
    par_in = _Inbox(lambda s: s.layout.dim and s.layout.dim[0].label == token)
    with DdsBus(DOMAIN) as tx, DdsBus(DOMAIN) as rx:
        assert tx.participant.guid != rx.participant.guid
        rx.subscribe("/joint_states", m.JointState, js_in, qos="sensor_data")
        rx.subscribe("/mb_estimator/parameters", m.Float64MultiArray, par_in)
        pub_js = tx.publisher("/joint_states", m.JointState, qos="sensor_data")
        pub_par = tx.publisher("/mb_estimator/parameters", m.Float64MultiArray)
        assert pub_js.wait_for_subscribers(1, TIMEOUT)
        assert pub_par.wait_for_subscribers(1, TIMEOUT)

        js = m.JointState(header=m.Header(stamp=m.ns_to_stamp(1_712_000_000_123_456_789),
                                          frame_id=token),
                          name=["arm", "pendulum"], position=[0.5, -3.0], velocity=[1.0, 2.0],
                          effort=[0.25, 0.0])
        par = m.Float64MultiArray(
            layout=m.MultiArrayLayout(dim=[m.MultiArrayDimension(label=token, size=3, stride=3)]),
            data=[1.0, 2.0, 3.5])
        assert _publish_until(pub_js, js, js_in)
        pub_par(par)  # reliable, matched: one write is enough
        assert par_in.event.wait(TIMEOUT)

    assert js_in.items[0] == js
    assert m.stamp_to_ns(js_in.items[0].header.stamp) == 1_712_000_000_123_456_789
    assert js_in.items[0].sample_info.valid_data
    assert par_in.items == [par]


def test_callback_errors_are_contained(token, caplog):
    seen = _Inbox(lambda s: s.data == 1.0)

    def explode(msg):
        seen(msg)
        raise RuntimeError("boom")

    with DdsBus(DOMAIN) as tx, DdsBus(DOMAIN) as rx:
        sub = rx.subscribe(f"/mb_test_{token}", m.Float64, explode)
        pub = tx.publisher(f"/mb_test_{token}", m.Float64)
        assert pub.wait_for_subscribers(1, TIMEOUT)
        pub(m.Float64(data=1.0))
        assert seen.event.wait(TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while sub.errors < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sub.errors == 1 and sub.received == 1
        # the dispatcher survived: a later message still arrives
        seen2 = _Inbox(lambda s: s.data == 2.0)
        sub.callback = seen2
        pub(m.Float64(data=2.0))
        assert seen2.event.wait(TIMEOUT)
    assert "boom" in caplog.text
    tx.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        pub(m.Float64(data=3.0))
    with pytest.raises(RuntimeError, match="closed"):
        tx.publisher("/x", m.Float64)


_CHILD = """
import sys, time
from mb_estimation.transport import dds_messages as m
from mb_estimation.transport.dds_bus import DdsBus, loopback_config
domain, token = int(sys.argv[1]), sys.argv[2]
with DdsBus(domain, config=loopback_config(domain)) as bus:
    pub = bus.publisher("/mb_estimator/parameters", m.Float64MultiArray)
    if not pub.wait_for_subscribers(1, 4.0):
        sys.exit("no subscriber matched")
    msg = m.Float64MultiArray(
        layout=m.MultiArrayLayout(dim=[m.MultiArrayDimension(label=token, size=2, stride=2)]),
        data=[4.0, -1.0])
    pub(msg)
    time.sleep(0.3)  # let the reliable writer deliver before the participant goes
"""


def test_round_trip_across_processes_over_udp_loopback(token):
    """A second process publishes: the samples really go through UDP on 127.0.0.1."""
    inbox = _Inbox(lambda s: s.layout.dim and s.layout.dim[0].label == token)
    with DdsBus(DOMAIN) as rx:
        rx.subscribe("/mb_estimator/parameters", m.Float64MultiArray, inbox)
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, str(DOMAIN), token],
            env={**os.environ, "CYCLONEDDS_URI": ""}, capture_output=True, text=True,
            timeout=30)
        assert child.returncode == 0, child.stderr
        assert inbox.event.wait(TIMEOUT)
    assert inbox.items[0].data == [4.0, -1.0]
