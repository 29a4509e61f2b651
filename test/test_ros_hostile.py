"""The rclpy node under a broken driver, and stopped at any moment (SIGINT and SIGTERM).

A node on a rig must survive any input: ``mb-estimation node`` fed 1 kHz joint
states of which about half are malformed (``hostile_driver.py``) keeps its resident memory
bounded, publishes nothing non-finite and counts every fault under its own name; stopped by
SIGINT or SIGTERM while listening, compiling, estimating a window or after such a flood, it
exits 0 within 5 s without a traceback, and the estimate it persisted stays loadable.
"""

import os
import signal
import time

import numpy as np
import pytest
from processes import Process, mb_estimation, wait_until

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("diagnostic_msgs")

from hostile_driver import COUNTERS, Session, node_environment, resident_bytes  # noqa: E402

from mb_estimation.online.fusion import ParameterEstimate, load_estimate, save_estimate  # noqa

DOMAIN = int(os.environ.get("MB_TEST_ROS_HOSTILE_DOMAIN", "87"))
#: The memory bound a node keeps [bytes]: its buffers (2 rings of node.buffer_s at
#: node.max_rate_hz, 2.4 MB here), at most node.pending_windows windows of at most 1.2
#: window_s of samples, one window's solver (compiled programs and their buffers) and the
#: interpreter with JAX, XLA and rclpy (about 0.45 GB measured).
MEMORY_BOUND = 1.5e9
EXIT_WITHIN_S = 5.0
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def _node(env, folder, warm_up=True):
    from configs import write_config

    config = write_config(folder / "hostile.yaml", node={
        "state_file": str(folder / "fused.yaml"), "warm_up": warm_up})
    return Process(mb_estimation("node", "--config", config, "--free", "J_Azz,J_Byy"), env)


def _seed_estimate(folder):
    """A persisted estimate the node starts from (its file must stay loadable)."""
    estimate = ParameterEstimate(names=("J_Azz", "J_Byy"), values={
        "J_Azz": np.array([0.003]), "J_Byy": np.array([0.004])},
        covariance=np.diag([1e-10, 1e-10]), windows=3)
    save_estimate(folder / "fused.yaml", estimate)


def _stop(node, number) -> float:
    """Send ``number``; seconds until the node exited (AssertionError if not within 20 s)."""
    sent = time.monotonic()
    node.process.send_signal(number)
    assert wait_until(lambda: node.process.poll() is not None, 20.0, 0.02), \
        f"the node did not exit within 20 s of the signal:\n{node.tail()}"
    return time.monotonic() - sent


def _assert_clean_exit(node, seconds, folder):
    print(f"exit {seconds:.2f} s after the signal")
    node.stop()
    assert node.process.returncode == 0, f"exit status {node.process.returncode}:\n{node.tail()}"
    assert seconds <= EXIT_WITHIN_S, f"exit took {seconds:.1f} s:\n{node.tail()}"
    assert not any("Traceback" in line or "RCLError" in line for line in node.lines), \
        node.tail(60)
    estimate = load_estimate(folder / "fused.yaml")
    assert estimate is not None and tuple(estimate.names) == ("J_Azz", "J_Byy")


def _flood(seed, seconds, number, env, folder):
    _seed_estimate(folder)
    node = _node(env, folder)
    session = None
    try:
        node.wait_for("mb_estimation node ready", 300)
        session = Session(DOMAIN, seed)
        session.driver.start()
        peak, started = 0, time.monotonic()
        while time.monotonic() - started < seconds:
            peak = max(peak, resident_bytes(node.process.pid))
            assert peak <= MEMORY_BOUND, f"node memory {peak / 1e9:.2f} GB after " \
                f"{time.monotonic() - started:.1f} s of the hostile stream"
            time.sleep(0.25)
        session.driver.stop()
        assert wait_until(lambda: all(int(session.watch.diagnostics.get(counter, 0)) > 0
                                      for counter in COUNTERS.values()), 5.0), \
            f"not every fault counted: {session.watch.diagnostics}"
        assert session.watch.counts.get("/mb_estimator/filtered_joint_states", 0) > 0
        assert not session.watch.non_finite, f"non-finite on {set(session.watch.non_finite)}"
        _assert_clean_exit(node, _stop(node, number), folder)
    finally:
        if session is not None:
            session.close()
        node.stop()


@pytest.mark.parametrize("name", SIGNALS)
def test_a_hostile_stream_keeps_memory_bounded_outputs_finite_and_is_counted(
        name, ros_network, node_compile_cache, tmp_path):
    _flood(0, 8.0, SIGNALS[name], node_environment(DOMAIN, node_compile_cache), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_minute_of_hostile_stream(seed, ros_network, node_compile_cache, tmp_path):
    _flood(seed, 60.0, signal.SIGINT, node_environment(DOMAIN, node_compile_cache), tmp_path)


@pytest.mark.parametrize("name", SIGNALS)
@pytest.mark.parametrize("moment", ["listening", "compiling", "estimating"])
def test_the_node_stops_cleanly_at_any_moment(moment, name, ros_network, node_compile_cache,
                                              tmp_path):
    """Listening (no compile), compiling (an empty compile cache), estimating a window."""
    _seed_estimate(tmp_path)
    if moment == "compiling":
        cache = tmp_path / "empty_cache"
        cache.mkdir()
        env = node_environment(DOMAIN, str(cache))
    else:
        env = node_environment(DOMAIN, node_compile_cache)
    node = _node(env, tmp_path, warm_up=moment != "listening")
    session = None
    try:
        if moment == "estimating":
            node.wait_for("mb_estimation node ready", 300)
            session = Session(DOMAIN, seed=0, fault_fraction=0.0)
            session.driver.start()
            assert wait_until(lambda: session.driver.sent >= 5_300, 30.0, 0.01)
            assert not any("window 1 " in line for line in node.lines), \
                f"the first window was done before the signal:\n{node.tail()}"
        elif moment == "compiling":
            node.wait_for("mb_estimation node compiling the solver", 120)
        else:
            node.wait_for("mb_estimation node ready", 120)
        _assert_clean_exit(node, _stop(node, SIGNALS[name]), tmp_path)
    finally:
        if session is not None:
            session.close()
        node.stop()
