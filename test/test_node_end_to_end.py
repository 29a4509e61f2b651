"""End to end over real DDS on loopback (issue 5): rig-sim or replay → node → a subscriber.

Three processes as a user would run them: ``mb-estimation rig-sim`` (or ``replay``) publishes,
``mb-estimation node --transport dds`` estimates with the real estimator from Table 1's start
values, and this test subscribes to everything the node publishes. All traffic stays on
127.0.0.1 (CYCLONEDDS_URI from ``loopback_config``) in a domain of its own.

The simulated rig is furuta_synthetic as a rig would be (SPOOK at 1e-4 s, its own stiff 1e-6
hinges, published at 100 Hz): no estimator's model class. The node runs the consistent path at
its 1 ms step (test_node_windows.py) and must find the rig's own inertias.
"""

import math
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from configs import TABLE_1, TABLE_1_SET, TRUTH
from processes import Process, mb_estimation

pytest.importorskip("cyclonedds")

from mb_estimation.transport.dds_bus import DdsBus, loopback_config  # noqa: E402
from mb_estimation.transport.dds_messages import (  # noqa: E402
    DiagnosticArray,
    Float64MultiArray,
    JointState,
)

REPO = Path(__file__).resolve().parents[1]
DOMAIN = int(os.environ.get("MB_TEST_DDS_E2E_DOMAIN", "84"))
CONFIG = str(REPO / "config" / "furuta_synthetic.yaml")
NODE = ["node", "--config", CONFIG, "--free", ",".join(TABLE_1), "--set", TABLE_1_SET]

@pytest.fixture(scope="module")
def environment(node_compile_cache):
    """Loopback-only DDS and one compile cache for the node processes."""
    env = dict(os.environ, CYCLONEDDS_URI=loopback_config(),
               MB_ESTIMATION_CACHE_DIR=node_compile_cache)
    env.pop("ROS_DOMAIN_ID", None)
    return env


@pytest.fixture(autouse=True)
def _loopback_only(dds_loopback):
    """Every test here keeps DDS on 127.0.0.1 (conftest.dds_loopback)."""


class Listener:
    """Subscribes to every output of the node; keeps counts and the newest messages."""

    def __init__(self, bus):
        self.lock = threading.Lock()
        self.count = {}
        self.latest = {}
        self.non_finite = []
        for topic, kind, qos in (
                ("/mb_estimator/parameters", Float64MultiArray, "default"),
                ("/mb_estimator/fused_parameters", Float64MultiArray, "default"),
                ("/mb_estimator/shadow_joint_states", JointState, "burst"),
                ("/mb_estimator/filtered_joint_states", JointState, "sensor_data"),
                ("/diagnostics", DiagnosticArray, "default")):
            bus.subscribe(topic, kind, self._keep(topic), qos=qos)

    def _keep(self, topic):
        def keep(msg):
            numbers = list(getattr(msg, "data", [])) + list(getattr(msg, "position", [])) + \
                list(getattr(msg, "velocity", []))
            with self.lock:
                self.count[topic] = self.count.get(topic, 0) + 1
                self.latest[topic] = msg
                if not all(math.isfinite(v) for v in numbers):
                    self.non_finite.append(topic)
        return keep

    def fused(self):
        with self.lock:
            msg = self.latest.get("/mb_estimator/fused_parameters")
        if msg is None:
            return None
        names = msg.layout.dim[1].label.split(",")
        values = np.reshape(msg.data, (2, len(names)))
        return dict(zip(names, values[0], strict=True)), dict(zip(names, values[1], strict=True))

    def diagnostics(self):
        with self.lock:
            msg = self.latest.get("/diagnostics")
        return {} if msg is None else {kv.key: kv.value for kv in msg.status[0].values}


def _errors(fused):
    return {name: abs(fused[name] / truth - 1.0) for name, truth in TRUTH.items()}


def _listened_before_ready(lines):
    """The node subscribed first and was ready once its warm-up compile was done."""
    listening = next(i for i, line in enumerate(lines) if "listening on" in line)
    ready = next(i for i, line in enumerate(lines) if "ready after" in line)
    assert listening < ready and "solver compiled in" in lines[ready], lines


def _run(publisher_args, environment, *, settle_s):
    """Start the node, then the publisher; wait until the fused estimate is within 5 %."""
    with DdsBus(DOMAIN) as bus:
        listener = Listener(bus)
        node = Process(mb_estimation(*NODE, "--duration", "400", "--domain-id", str(DOMAIN)),
                       environment)
        publisher = None
        try:
            node.wait_for("ready after", 300)
            _listened_before_ready(node.lines)
            publisher = Process(mb_estimation(*publisher_args, "--domain-id", str(DOMAIN)),
                                environment)
            deadline = time.monotonic() + settle_s
            fused = None
            while time.monotonic() < deadline:
                estimate = listener.fused()
                if estimate is not None:
                    fused = estimate[0]
                    if max(_errors(fused).values()) < 0.05 and \
                            int(listener.diagnostics().get("windows_accepted", 0)) >= 2:
                        break
                time.sleep(0.5)
            diagnostics = listener.diagnostics()
        finally:
            if publisher is not None:
                publisher.stop()
            node.stop()
        counts = dict(listener.count)
        non_finite = list(listener.non_finite)
    log = "\n".join(node.lines[-20:])
    assert fused is not None, f"no fused estimate\n{log}"
    return fused, diagnostics, counts, non_finite, log


def test_rig_sim_to_node_over_dds(environment):
    rig_sim = ["rig-sim", "--config", CONFIG, "--scenario", "swingup", "--rate", "100",
               "--duration", "120"]
    fused, diagnostics, counts, non_finite, log = _run(rig_sim, environment, settle_s=90)
    errors = _errors(fused)
    print(f"rig-sim → node: fused {fused}, relative errors {errors}, diagnostics {diagnostics}")
    assert max(errors.values()) < 0.05, f"{fused} (relative errors {errors})\n{log}"
    for topic in ("/mb_estimator/parameters", "/mb_estimator/fused_parameters",
                  "/mb_estimator/shadow_joint_states", "/mb_estimator/filtered_joint_states",
                  "/diagnostics"):
        assert counts.get(topic, 0) > 0, (topic, counts)
    assert non_finite == []
    assert int(diagnostics["windows_accepted"]) >= 2


def test_looped_replay_of_a_simulated_bag_to_node_over_dds(environment, tmp_path):
    bag = tmp_path / "swingup"
    from mb_estimation.cli import main

    assert main(["simulate", "swingup", "--config", CONFIG, "--output", str(bag),
                 "--duration", "10", "--rate", "100"]) == 0
    replay = ["replay", str(bag), "--loop"]
    fused, diagnostics, counts, non_finite, log = _run(replay, environment, settle_s=90)
    errors = _errors(fused)
    print(f"replay → node: fused {fused}, relative errors {errors}, diagnostics {diagnostics}")
    assert max(errors.values()) < 0.05, f"{fused} (relative errors {errors})\n{log}"
    assert int(diagnostics.get("time_jumps", 0)) >= 1, diagnostics  # the loop went back
    assert counts.get("/mb_estimator/fused_parameters", 0) >= 2 and non_finite == []
