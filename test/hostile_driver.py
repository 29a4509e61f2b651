"""A broken driver on rclpy: joint states and voltages, about half of them malformed.

Used by test_ros_hostile.py and benchmarks/perf/bench_hostile_node.py. The stream is a swinging rig
at ``rate_hz`` whose joint states are, one in two, one of: NaN or ±inf positions, 1e300
positions, unknown joint names, fewer positions than names, an empty message, a header stamp
5 s in the past, zero, or 1e6 s ahead; every tenth message also publishes a voltage of 0.5,
NaN, 1e308 or -2 (std_msgs/Float64). :class:`OutputWatch` subscribes to everything the node
publishes and counts non-finite numbers.
"""

from __future__ import annotations

import math
import os
import threading
import time

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray

NAMES = ["arm", "pendulum"]
FAULTS = ("non-finite", "1e300", "unknown names", "short positions", "empty",
          "stamp 5 s behind", "stamp zero", "stamp 1e6 s ahead")
#: The node's diagnostics counter for each fault (what the node must count it as).
COUNTERS = {
    "non-finite": "samples_non_finite", "1e300": "samples_out_of_range",
    "unknown names": "samples_unknown_joints", "short positions": "samples_short",
    "empty": "samples_empty", "stamp 5 s behind": "samples_stamp_behind",
    "stamp zero": "samples_stamp_zero", "stamp 1e6 s ahead": "samples_stamp_ahead",
    "voltage NaN": "voltage_non_finite", "voltage 1e308": "voltage_out_of_range",
}


def hostile_messages(seed: int, rate_hz: float, start_ns: int, fault_fraction: float = 0.5):
    """Endless ``(k, stamp_ns, names, positions, voltage or None)`` of the stream.

    ``fault_fraction`` of the joint states malformed (0: a clean rig, 1 V with each).
    """
    rng = np.random.default_rng(seed)
    k = 0
    while True:
        t = k / rate_hz
        stamp = start_ns + int(round(t * 1e9))
        names = list(NAMES)
        positions = [0.5 * math.sin(1.3 * t) + 0.2 * t, 0.4 * math.cos(2.0 * t)]
        if rng.random() < fault_fraction:
            fault = FAULTS[int(rng.integers(len(FAULTS)))]
            if fault == "non-finite":
                positions[int(rng.integers(2))] = float(rng.choice([math.nan, math.inf,
                                                                    -math.inf]))
            elif fault == "1e300":
                positions[int(rng.integers(2))] = 1e300
            elif fault == "unknown names":
                names = ["joint0", "joint1"]
            elif fault == "short positions":
                positions = positions[:1]
            elif fault == "empty":
                names, positions = [], []
            elif fault == "stamp 5 s behind":
                stamp -= 5_000_000_000
            elif fault == "stamp zero":
                stamp = 0
            else:
                stamp += 10**6 * 1_000_000_000
        if not fault_fraction:
            voltage = 1.0
        elif k % 10 == 0:
            voltage = float(rng.choice([0.5, math.nan, 1e308, -2.0]))
        else:
            voltage = None
        yield k, stamp, names, positions, voltage
        k += 1


class HostileDriver(Node):
    """Publishes :func:`hostile_messages` on /joint_states and /control_voltage at ``rate_hz``.

    Runs on a thread of its own (:meth:`start`, :meth:`stop`); ``sent`` counts joint states.
    """

    def __init__(self, context, seed: int = 0, rate_hz: float = 1000.0,
                 fault_fraction: float = 0.5) -> None:
        super().__init__("hostile_driver", context=context)
        self._joints = self.create_publisher(JointState, "/joint_states",
                                             qos_profile_sensor_data)
        self._voltage = self.create_publisher(Float64, "/control_voltage", 10)
        self._messages = hostile_messages(seed, rate_hz, time.time_ns(), fault_fraction)
        self._period_s = 1.0 / rate_hz
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.sent = 0

    def start(self, wait_s: float = 10.0) -> None:
        """Publish from now on, once the node subscribes (or after ``wait_s``)."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not (
                self._joints.get_subscription_count() and self._voltage.get_subscription_count()):
            time.sleep(0.05)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        message = JointState()
        next_time = time.monotonic()
        for _, stamp, names, positions, voltage in self._messages:
            if self._stop.is_set():
                return
            sec, nanosec = divmod(stamp, 1_000_000_000)
            message.header.stamp.sec = int(sec)
            message.header.stamp.nanosec = int(nanosec)
            message.name = names
            message.position = positions
            self._joints.publish(message)
            if voltage is not None:
                self._voltage.publish(Float64(data=voltage))
            self.sent += 1
            next_time += self._period_s
            delay = next_time - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.5:  # far behind: do not burst to catch up
                next_time = time.monotonic()


class OutputWatch(Node):
    """Everything the estimator node ``node_name`` publishes: counts and non-finite numbers."""

    def __init__(self, context, node_name: str = "mb_estimator") -> None:
        super().__init__("output_watch", context=context)
        self.counts: dict[str, int] = {}
        self.non_finite: list[str] = []
        self.diagnostics: dict[str, str] = {}
        self._lock = threading.Lock()
        deep = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)
        for topic, kind, qos in (
                (f"/{node_name}/parameters", Float64MultiArray, 10),
                (f"/{node_name}/fused_parameters", Float64MultiArray, 10),
                (f"/{node_name}/shadow_joint_states", JointState,
                 QoSProfile(depth=2000, reliability=ReliabilityPolicy.RELIABLE)),
                (f"/{node_name}/filtered_joint_states", JointState, deep),
                ("/diagnostics", DiagnosticArray, 10)):
            self.create_subscription(kind, topic, self._callback(topic), qos)

    def _callback(self, topic):
        def receive(message):
            if isinstance(message, DiagnosticArray):
                values = {}
                for status in message.status:
                    values.update({item.key: item.value for item in status.values})
                numbers = []
            elif isinstance(message, JointState):
                values = None
                numbers = [*message.position, *message.velocity, *message.effort]
            else:
                values = None
                numbers = list(message.data)
            with self._lock:
                self.counts[topic] = self.counts.get(topic, 0) + 1
                if values:
                    self.diagnostics.update(values)
                if not all(math.isfinite(x) for x in numbers):
                    self.non_finite.append(topic)
        return receive


class Session:
    """An rclpy context of its own with a driver and a watch spun on one background thread."""

    def __init__(self, domain_id: int, seed: int = 0, rate_hz: float = 1000.0,
                 fault_fraction: float = 0.5) -> None:
        self.context = rclpy.context.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.watch = OutputWatch(self.context)
        self.driver = HostileDriver(self.context, seed, rate_hz, fault_fraction)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.watch)
        self._spinner = threading.Thread(target=self.executor.spin, daemon=True)
        self._spinner.start()

    def close(self) -> None:
        self.driver.stop()
        self.executor.shutdown(timeout_sec=2.0)
        self.driver.destroy_node()
        self.watch.destroy_node()
        rclpy.try_shutdown(context=self.context)


def resident_bytes(pid: int) -> int:
    """The resident memory of process ``pid`` [bytes] (Linux /proc), 0 once it has ended."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def node_environment(domain_id: int, cache_dir: str) -> dict[str, str]:
    """The environment of a node process on ``domain_id`` with its compile cache."""
    return dict(os.environ, ROS_DOMAIN_ID=str(domain_id), MB_ESTIMATION_CACHE_DIR=cache_dir,
                ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
