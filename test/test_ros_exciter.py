"""The exciter node on rclpy: it plays the file; every stop zeroes the input within one period.

In this process, in the session's loopback-only network namespace (conftest): a stand-in rig
publishes joint states at 100 Hz (its arm angle, a NaN, or nothing, as the test says) and
records every input the node publishes with its arrival time (the file is at 50 Hz); a
stand-in estimator offers ``~/calibrate_now``. The exciter node runs on an executor of its
own. Its rules without ROS: test_exciter.py; the whole loop with a simulated rig and the
estimator: test_ros_loop.py.
"""

import math
import os
import threading
import time

import numpy as np
import pytest
import yaml
from configs import write_config
from processes import REPO, wait_until

rclpy = pytest.importorskip("rclpy")

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor  # noqa: E402
from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from mb_estimation.online.exciter import ExcitationRun  # noqa: E402
from mb_estimation.ros.ros_exciter import (  # noqa: E402
    ESTIMATOR_SEEN_S,
    PARAMETERS,
    SETTLE_S,
    ExciterNode,
)

DOMAIN = int(os.environ.get("MB_TEST_ROS_EXCITER_DOMAIN", "90"))
RATE = 50.0  # the input's rate [Hz]: one sample period is 20 ms
PERIOD = 1.0 / RATE
JOINT_RATE = 100.0
TIMEOUT = 0.1
JOINTS = "/exciter_test/joint_states"
INPUT = "/exciter_test/u"
ESTIMATOR = "/exciter_test_estimator"
#: the node's relative input and output names to the rig's topics (the launch file's job)
REMAPS = ["--ros-args", "-r", f"joint_states:={JOINTS}", "-r", f"control_voltage:={INPUT}"]


class StandIn(Node):
    """The rig (joint states out, inputs in, timed) and the estimator's ``~/calibrate_now``."""

    def __init__(self, context):
        super().__init__("exciter_test_rig", context=context)
        self.lock = threading.Lock()
        self.inputs = []  # (arrival [s, monotonic], value)
        self.joint_arrivals = []
        self.calibrations = []
        self.arm = 0.4  # what the rig reports; None: nothing (a lost stream)
        self.pendulum = 0.0
        self.publisher = self.create_publisher(JointState, JOINTS, qos_profile_sensor_data)
        self.create_subscription(Float64, INPUT, self._input, 10)
        self.create_subscription(JointState, JOINTS, self._joint_state, qos_profile_sensor_data)
        self.create_service(Trigger, f"{ESTIMATOR}/calibrate_now", self._calibrate)
        self._running = True
        self._thread = threading.Thread(target=self._publish, daemon=True)
        self._thread.start()

    def _publish(self):
        next_due = time.monotonic()
        while self._running:
            with self.lock:
                arm, pendulum = self.arm, self.pendulum
            if arm is not None:
                message = JointState(name=["arm_joint", "pendulum_joint"],
                                     position=[arm, pendulum], velocity=[0.0, 0.0])
                message.header.stamp = self.get_clock().now().to_msg()
                self.publisher.publish(message)
            next_due += 1.0 / JOINT_RATE
            time.sleep(max(0.0, next_due - time.monotonic()))

    def _input(self, message):
        with self.lock:
            self.inputs.append((time.monotonic(), message.data))

    def _joint_state(self, message):
        with self.lock:
            self.joint_arrivals.append(time.monotonic())

    def _calibrate(self, request, response):
        self.calibrations.append(time.monotonic())
        response.success, response.message = True, "window from 12.000 s queued"
        return response

    def received(self, since=0.0):
        with self.lock:
            return [(t, value) for t, value in self.inputs if t >= since]

    def set(self, **values):
        with self.lock:
            for name, value in values.items():
                setattr(self, name, value)

    def close(self):
        self._running = False
        self._thread.join(2.0)


def _spun(node, context):
    """``node`` spun by an executor in a thread of its own, until the context shuts down."""
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)

    def spin():
        try:
            executor.spin()
        except ExternalShutdownException:
            pass

    threading.Thread(target=spin, daemon=True).start()
    return executor


@pytest.fixture(scope="module")
def context(ros_network):
    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=DOMAIN)
    yield context
    rclpy.try_shutdown(context=context)


@pytest.fixture(scope="module")
def rig(context):
    stand_in = StandIn(context)
    executor = _spun(stand_in, context)
    yield stand_in
    stand_in.close()
    executor.shutdown(timeout_sec=2.0)
    stand_in.destroy_node()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exciter")
    config = write_config(folder / "rig.yaml", recording={
        "joint_states_topic": JOINTS, "voltage_topic": INPUT,
        "joints": {"arm": {"name": "arm_joint", "sign": -1},
                   "pendulum": {"name": "pendulum_joint"}}})
    inputs = 0.5 * np.sin(2 * np.pi * 0.9 * np.arange(int(4 * RATE)) / RATE + 1.0)
    (folder / "excitation.csv").write_text("time_s,input\n" + "".join(
        f"{k / RATE!r},{u!r}\n" for k, u in enumerate(inputs.tolist())))
    return {"config": config, "excitation": str(folder / "excitation.csv"), "inputs": inputs,
            "folder": folder}


@pytest.fixture
def exciter(context, rig, files):
    """A configured, active exciter node on an executor of its own; the rig reset to rest."""
    rig.set(arm=0.4, pendulum=0.0)
    node = ExciterNode(context=context, cli_args=REMAPS, parameter_overrides=[
        Parameter("config", value=files["config"]),
        Parameter("excitation", value=files["excitation"]),
        Parameter("estimator", value=ESTIMATOR), Parameter("max_arm_rad", value=1.0),
        Parameter("ramp_s", value=0.2), Parameter("timeout_s", value=TIMEOUT)])
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    executor = _spun(node, context)
    started = time.monotonic()  # before the subscription: every answer is after it
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert wait_until(lambda: sum(v != 0.0 for _, v in rig.received(started)) >= 10, 5.0), \
        "the exciter does not play"
    yield node, started
    executor.shutdown(timeout_sec=2.0)
    node.destroy_node()


def _first_zero_after(rig, moment, wait=1.0):
    """Arrival of the first zero input after ``moment``, once ``wait`` s of inputs are in."""
    time.sleep(wait)
    received = rig.received(moment)
    zeros = [t for t, value in received if value == 0.0]
    assert zeros, f"no zero input after the event: {received[:5]}"
    assert all(value == 0.0 for t, value in received if t >= zeros[0]), "it played on"
    return zeros[0]


def test_it_answers_each_joint_state_with_the_files_input_faded_in(exciter, rig, files):
    node, started = exciter
    time.sleep(1.0)
    played = ExcitationRun(files["inputs"], rate_hz=RATE, ramp_s=0.2,
                           max_input=float(np.max(np.abs(files["inputs"])))).played()
    received = [(t, value) for t, value in rig.received(started) if value != 0.0]
    indices = [played.tolist().index(value) for _, value in received]  # each one of the file's
    assert indices[0] <= 2 and indices == sorted(indices)  # from its start, in order
    span = received[-1][0] - received[0][0]
    assert len(received) / span == pytest.approx(JOINT_RATE, rel=0.2)  # one per joint state
    assert (indices[-1] - indices[0]) / span == pytest.approx(RATE, rel=0.2)  # the file's rate


def test_the_stop_service_brings_the_input_to_zero_within_one_period(exciter, rig, context):
    node, _ = exciter
    caller = Node("exciter_test_caller", context=context)
    executor = _spun(caller, context)
    try:
        client = caller.create_client(Trigger, f"/{node.get_name()}/stop")
        assert client.wait_for_service(timeout_sec=5.0)
        called = time.monotonic()
        future = client.call_async(Trigger.Request())
        assert wait_until(future.done, 5.0) and future.result().success
        zero = _first_zero_after(rig, called)
    finally:
        executor.shutdown(timeout_sec=2.0)
        caller.destroy_node()
    print(f"~/stop: zero {1e3 * (zero - called):.1f} ms after the call")
    assert zero - called <= PERIOD, (zero - called, node.exciter.reason)
    assert node.exciter.reason == "stopped on ~/stop"


@pytest.mark.parametrize("fault, reason", [
    ({"pendulum": math.nan}, "not finite"),
    ({"arm": 0.4 - 1.2}, "the arm left its limit"),  # the arm's sign is -1: its excursion 1.2
], ids=["non-finite", "arm limit"])
def test_a_bad_joint_state_brings_the_input_to_zero_within_one_period(exciter, rig, fault,
                                                                      reason):
    node, _ = exciter
    with rig.lock:
        before = len(rig.joint_arrivals)
    rig.set(**fault)
    assert wait_until(lambda: len(rig.joint_arrivals) > before, 2.0)
    with rig.lock:
        sent = rig.joint_arrivals[before]  # the bad joint state's arrival here
    zero = _first_zero_after(rig, sent - PERIOD)
    print(f"{reason}: zero {1e3 * (zero - sent):.1f} ms after the joint state")
    assert zero - sent <= PERIOD, (zero - sent, node.exciter.reason)
    assert reason in node.exciter.reason


def test_a_lost_joint_state_stream_brings_the_input_to_zero_within_one_period(exciter, rig):
    node, _ = exciter
    rig.set(arm=None)
    time.sleep(2 / JOINT_RATE)
    with rig.lock:
        last = rig.joint_arrivals[-1]
    zero = _first_zero_after(rig, last)
    print(f"lost stream: zero {1e3 * (zero - last - TIMEOUT):.1f} ms after the timeout")
    assert zero - (last + TIMEOUT) <= PERIOD, (zero - last, node.exciter.reason)
    assert "no joint state for" in node.exciter.reason


def test_played_to_its_end_it_asks_the_estimator_to_calibrate_once(exciter, rig):
    node, started = exciter
    calls = len(rig.calibrations)
    duration = node.exciter.run.duration_s
    assert wait_until(lambda: len(rig.calibrations) > calls, duration + SETTLE_S + 5.0)
    time.sleep(0.5)
    assert len(rig.calibrations) == calls + 1
    assert node.exciter.state == "done"
    end = started + duration
    assert rig.calibrations[-1] >= end + SETTLE_S - 0.1
    tail = rig.received(end + 2 * PERIOD)
    assert tail and all(value == 0.0 for _, value in tail)


def test_deactivated_it_stops_and_activated_again_it_plays_from_the_start(exciter, rig,
                                                                           files):
    node, _ = exciter
    deactivated = time.monotonic()
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert node.exciter.reason == "deactivated"
    time.sleep(0.3)
    # Arrival times, not publication times: an input published just before the transition
    # can arrive after it (the stand-in's callbacks wait their turn). Its last word is zero,
    # and once a zero arrived, nothing else did.
    values = [value for _, value in rig.received(deactivated)]
    assert values and values[-1] == 0.0, values
    assert all(value == 0.0 for value in values[values.index(0.0):]), values
    time.sleep(0.3)
    assert len(rig.received(deactivated)) == len(values)  # inactive: it publishes nothing more
    again = time.monotonic()
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    assert wait_until(lambda: sum(v != 0.0 for _, v in rig.received(again)) >= 10, 5.0)
    played = ExcitationRun(files["inputs"], rate_hz=RATE, ramp_s=0.2,
                           max_input=float(np.max(np.abs(files["inputs"])))).played()
    first = next(value for _, value in rig.received(again) if value != 0.0)
    assert played.tolist().index(first) <= 2  # a fresh run, from the file's start


def test_shut_down_it_zeroes_the_input_and_publishes_nothing_more(exciter, rig):
    """Finalized, it leaves the command topic to the next driver: no timer, no publisher."""
    node, _ = exciter
    down = time.monotonic()
    node.trigger_shutdown()
    assert node.finalized and not list(node.timers)
    assert INPUT not in {publisher.topic_name for publisher in node.publishers}
    time.sleep(0.3)
    values = [value for _, value in rig.received(down)]
    assert values and values[-1] == 0.0, values
    time.sleep(0.3)
    assert len(rig.received(down)) == len(values)


class WarningsKept:
    """A node's logger that also keeps its warnings."""

    def __init__(self, logger):
        self.logger, self.warnings = logger, []

    def warning(self, message):
        self.warnings.append(message)
        return self.logger.warning(message)

    def __getattr__(self, name):
        return getattr(self.logger, name)


@pytest.mark.parametrize("estimator", [ESTIMATOR, "/exciter_test_nobody"])
def test_an_estimator_not_running_soon_after_activation_is_warned_of(context, rig, files,
                                                                      estimator):
    """Seen 2 s after activation: quiet; not seen: a warning that the run goes uncalibrated."""
    now = [100.0]
    node = ExciterNode(context=context, node_name="exciter_test_lonely", clock=lambda: now[0],
                       parameter_overrides=[Parameter("config", value=files["config"]),
                                            Parameter("excitation", value=files["excitation"]),
                                            Parameter("estimator", value=estimator)])
    logger = WarningsKept(node.get_logger())
    node.get_logger = lambda: logger
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        if estimator == ESTIMATOR:
            assert wait_until(node._calibrate_client.service_is_ready, 5.0)
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        now[0] += ESTIMATOR_SEEN_S - 0.1
        node._tick()
        assert logger.warnings == []
        now[0] += 0.2
        node._tick()
        node._tick()
        if estimator == ESTIMATOR:
            assert logger.warnings == []
        else:
            (warning,) = logger.warnings
            assert f"{estimator}/calibrate_now is not available 2 s after activation" in warning
    finally:
        node.destroy_node()


def test_a_configuration_it_cannot_play_fails_to_configure(context, files, tmp_path):
    effort = write_config(tmp_path / "effort.yaml", recording={
        "voltage_type": "sensor_msgs/msg/JointState", "voltage_joint": "arm_joint",
        "joints": {"arm": {"name": "arm_joint"}, "pendulum": {"name": "pendulum_joint"}}})
    for overrides in ([Parameter("config", value=files["config"])],
                      [Parameter("config", value=effort),
                       Parameter("excitation", value=files["excitation"])],
                      [Parameter("config", value=files["config"]),
                       Parameter("excitation", value=str(tmp_path / "missing.csv"))]):
        node = ExciterNode(context=context, node_name="exciter_test_refused",
                           parameter_overrides=overrides)
        try:
            assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        finally:
            node.destroy_node()


def test_the_shipped_parameter_file_names_every_parameter_with_its_type():
    text = (REPO / "config" / "ros" / "exciter_node.yaml").read_text()
    given = yaml.safe_load(text)["/**"]["ros__parameters"]
    assert set(given) == set(PARAMETERS)
    for name, (default, _) in PARAMETERS.items():
        assert type(given[name]) is type(default), name
