"""Offline calibration by replay over rclpy (issue 15): bag → replay → rclpy node → estimate.

``mb-estimation replay`` plays the bags; ``mb-estimation node`` estimates.

* a ``simulate`` bag of furuta_synthetic, replayed in a loop: the node resets
  its buffers on the stamps' jump back, keeps its fused estimate through it and persists it;
* a ROS 2 Humble bag of ../shared/data (topic ``joint_states`` without a leading slash,
  simulation-time header stamps in a wall-clock bag, no input topic): its samples reach the
  node on their header stamps, windows are cut on them with the input the data's README gives
  (the config's ``voltage_script``), estimated, fused and persisted. The peer simulator's values
  are not published, so the estimate itself is not checked.
"""

import os
from pathlib import Path

import pytest
import yaml
from configs import write_config
from processes import Process, compile_node_programs, mb_estimation, wait_until
from ros_listener import listening

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("diagnostic_msgs")

REPO = Path(__file__).resolve().parents[1]
HUMBLE = REPO.parent / "shared" / "data" / "rosbag2-humble-furuta"
DOMAIN = int(os.environ.get("MB_TEST_ROS_REPLAY_DOMAIN", "89"))


@pytest.fixture
def diagnostics(ros_network):
    with listening(DOMAIN) as probe:
        yield probe


def _environment(cache):
    return dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN), MB_ESTIMATION_CACHE_DIR=cache)


def test_looped_replay_of_a_simulated_bag_over_rclpy(diagnostics, node_compile_cache,
                                                     tmp_path):
    from mb_estimation.cli import main as cli

    state_file = tmp_path / "fused.yaml"
    config = write_config(tmp_path / "truth.yaml", node={"state_file": str(state_file)})
    bag = tmp_path / "multisine"
    assert cli(["simulate", "multisine", "--config", config, "--output", str(bag),
                "--duration", "6", "--rate", "100"]) == 0
    env = _environment(node_compile_cache)
    node = Process(mb_estimation("node", "--config", config,
                                 "--set", "J_Azz=0.0035,J_Byy=0.0045"), env)
    replay = None
    try:
        node.wait_for("mb_estimation node ready", 300)
        replay = Process(mb_estimation("replay", str(bag), "--loop", "--rate", "2"), env)
        # the loop goes back (a reset), and windows are accepted and fused across it
        assert wait_until(lambda: diagnostics.count("time_jumps") >= 2
                          and diagnostics.count("fused_windows") >= 2, 120, period=0.5), \
            f"{sorted(diagnostics.diagnostics.items())}\n{node.tail()}\n{replay.tail()}"
        fused_before = diagnostics.count("fused_windows")
        jumps = diagnostics.count("time_jumps")
        assert wait_until(lambda: diagnostics.count("time_jumps") > jumps, 30, period=0.5)
        assert diagnostics.count("fused_windows") >= fused_before  # the estimate survived the reset
        assert diagnostics.count("resets") == 0  # a time jump is not a ~/reset
    finally:
        if replay is not None:
            replay.stop()
        node.stop()
    persisted = yaml.safe_load(state_file.read_text())
    assert persisted, node.tail()


@pytest.fixture(scope="module")
def humble_config(tmp_path_factory):
    """The Humble bag's rig as its README describes it; the node's state file beside it."""
    folder = tmp_path_factory.mktemp("humble")
    return write_config(
        folder / "humble.yaml", "examples/odrive_furuta.yaml",
        parameters={"K": 1.0},  # the script gives the torque [N m]: volts of a 1 N m/V motor
        recording={
            "joint_states_topic": "joint_states",  # as recorded: no leading slash
            "joints": {"arm": {"name": "joint0"}, "pendulum": {"name": "joint1"}},
            # not in the bag (../shared/data/README.md): 0.43 N m for one 2 ms tick
            "voltage_script": [[0.0, 0.43], [0.002, 0.0]]},
        # 4.5 s windows: the bag's 10.000 s of stamps hold two of them even when a best-effort
        # sample or two at either end is lost (5 s windows needed both the first and the last)
        node={"warm_up": False, "state_file": str(folder / "fused.yaml"), "window_s": 4.5,
              "stride_s": 4.5},
        # what an impulse determines (its pendulum inertia ends at its bound: no estimate)
        free={"J_Azz": {}, "K": {}})


@pytest.fixture(scope="module")
def compiled_beforehand(humble_config, node_compile_cache):
    """The node's programs compiled before it is started and timed."""
    compile_node_programs(node_compile_cache, "--config", humble_config)


@pytest.mark.skipif(not HUMBLE.is_dir(), reason="../shared/data not present")
# a 500 Hz best-effort replay, timed: the node starts from its compiled programs
@pytest.mark.usefixtures("compiled_beforehand")
def test_replay_of_a_humble_bag_reaches_the_rclpy_node(diagnostics, humble_config,
                                                       node_compile_cache):
    state_file = Path(humble_config).parent / "fused.yaml"
    path = humble_config
    env = _environment(node_compile_cache)
    node = Process(mb_estimation("node", "--config", path), env)
    try:
        node.wait_for("mb_estimation node ready", 120)
        replay = Process(mb_estimation("replay", str(HUMBLE / "impulse_response_de")),
                         env)  # 500 Hz, as recorded
        assert replay.process.wait(120) == 0, replay.tail()
        # best effort, as a driver publishes joint states: allow a rare loss on a busy machine
        assert wait_until(lambda: diagnostics.count("joint_samples") >= 0.99 * 5001, 20,
                          period=0.5), \
            f"{sorted(diagnostics.diagnostics.items())}\n{node.tail()}"
        # 10 s of header stamps (simulation time, not the bag's wall clock): two windows, the
        # input from the script, estimated and fused
        assert wait_until(lambda: diagnostics.count("windows_done") >= 2, 120, period=0.5), \
            (diagnostics.diagnostics, node.tail())
        assert diagnostics.count("windows_accepted") >= 1, (diagnostics.diagnostics, node.tail())
        assert "no voltage" not in diagnostics.value("last_error")
        assert diagnostics.count("time_jumps") == 0 and diagnostics.count("samples_late") == 0
    finally:
        node.stop()
    persisted = yaml.safe_load(state_file.read_text())
    assert persisted["windows"] >= 1 and persisted["values"]["J_Azz"][0] > 0, persisted


def test_ctrl_c_ends_a_replay_cleanly(ros_network, tmp_path):
    """SIGINT while it waits for a subscriber: exit 0 at once with its summary.

    Not rclpy's "publisher's context is invalid" traceback (its own signal handler shut the
    context down under the player).
    """
    import signal

    import numpy as np

    from mb_estimation.io.bags import write_rig_bag

    stamps = 1_700_000_000 * 10**9 + np.arange(200, dtype=np.int64) * 10_000_000
    bag = write_rig_bag(tmp_path / "bag", joint_time_ns=stamps, joint_names=["arm", "pendulum"],
                        joint_positions=np.zeros((200, 2)))
    replay = Process(mb_estimation("replay", str(bag), "--loop"),
                     _environment(str(tmp_path / "cache")))
    try:
        wait_until(lambda: replay.process.poll() is not None, 3.0)  # imported, waiting
        replay.process.send_signal(signal.SIGINT)
        assert replay.process.wait(5) == 0, replay.tail()
    finally:
        replay.stop()
    replay.wait_for("published", 1.0)
    assert not any("Traceback" in line for line in replay.lines), replay.tail()
