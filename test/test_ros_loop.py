"""The experiment run on a simulated rig over rclpy: exciter → rig → estimator → calibrate_now.

Three processes as a user would start them, in the session's loopback-only network namespace
(conftest): ``mb-estimation node`` (the estimator, from Table 1's start values),
``mb-estimation rig-sim --driven`` (furuta_synthetic on rigid hinges at 100 Hz, obeying the
input topic) and ``exciter.launch.py`` (the real launch system) playing an 8 s multisine file on
the input topic from the rig's first joint state, then calling the estimator's
``~/calibrate_now``. This process only listens: the fused estimate must reach the rig's inertias
within 3 %.
"""

import os
import signal
import sys
import threading

import numpy as np
import pytest
from configs import TABLE_1, TABLE_1_SET, TRUTH, write_config
from processes import LAUNCH_SCRIPT, REPO, Process, mb_estimation, wait_until

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("launch_ros")

from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

DOMAIN = int(os.environ.get("MB_TEST_ROS_LOOP_DOMAIN", "91"))
RATE_HZ = 100.0
DURATION_S = 8.0
FREE = ",".join(TABLE_1)


def _fused(messages):
    """{name: value} of the newest fused estimate, or None."""
    if not messages:
        return None
    message = messages[-1]
    names = message.layout.dim[1].label.split(",")
    return dict(zip(names, np.reshape(message.data, (2, len(names)))[0], strict=True))


def _window_lines(process):
    """The node's log lines of its windows (accepted or rejected), in order."""
    return [line for line in process.lines if "]: window " in line]


def test_an_experiment_run_on_the_rig_calibrates_it(ros_network, node_compile_cache,
                                                     ament_prefix, tmp_path):
    from mb_estimation.scenarios import multisine_torque

    config = write_config(tmp_path / "rig.yaml", hinges="rigid",
                          node={"window_s": 4.0, "stride_s": 4.0})
    time_s = np.arange(int(DURATION_S * RATE_HZ)) / RATE_HZ
    inputs = np.asarray(multisine_torque(time_s))  # furuta_synthetic's K is 1: torque [N m]
    excitation = tmp_path / "excitation.csv"
    excitation.write_text("time_s,input\n" + "".join(
        f"{t!r},{u!r}\n" for t, u in zip(time_s.tolist(), inputs.tolist(), strict=True)))
    env = dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN), MB_ESTIMATION_CACHE_DIR=node_compile_cache)

    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=DOMAIN)
    listener = Node("mb_estimation_loop_listener", context=context)
    fused, lock = [], threading.Lock()

    def keep(message):
        with lock:
            fused.append(message)

    listener.create_subscription(Float64MultiArray, "/mb_estimator/fused_parameters", keep, 10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(listener)
    threading.Thread(target=executor.spin, daemon=True).start()
    node = Process(mb_estimation("node", "--config", config, "--free", FREE,
                                 "--set", TABLE_1_SET), env)
    rig = exciter = None
    try:
        node.wait_for("mb_estimation node ready", 300)
        rig = Process(mb_estimation("rig-sim", "--config", config, "--driven",
                                    "--rate", str(RATE_HZ)), env)
        exciter = Process([sys.executable, "-c", LAUNCH_SCRIPT,
                           str(REPO / "launch" / "exciter.launch.py"), f"config:={config}",
                           f"excitation:={excitation}",  # no arm limit: it turns freely
                           "timeout_s:=0.5"], env)  # a simulated rig on a busy machine lags
        exciter.wait_for("mb_estimation exciter ready", 60)
        exciter.wait_for("exciter done", DURATION_S + 120)
        windows = _window_lines(node)
        exciter.wait_for("/mb_estimator/calibrate_now: window from", 30)
        with lock:
            before = len(fused)
        assert wait_until(lambda: len(_window_lines(node)) > len(windows), 60), node.tail()
        calibrated = _window_lines(node)[len(windows)]  # calibrate_now's (queued at once)
        assert "accepted" in calibrated, node.tail()
        assert wait_until(lambda: len(fused) > before, 10), node.tail()
        with lock:
            values = _fused(fused)
        errors = {name: values[name] / truth - 1 for name, truth in TRUTH.items()}
        print(f"exciter → rig-sim --driven → node → calibrate_now: {calibrated}\nfused "
              f"{values}, relative errors {errors}")
        assert max(map(abs, errors.values())) < 0.03, (values, node.tail())
        assert not any("exciter stopped" in line for line in exciter.lines), exciter.tail()
    finally:
        if exciter is not None:  # SIGINT: the launch system stops the node it started
            exciter.stop(signal_first=signal.SIGINT)
        if rig is not None:
            rig.stop()
        node.stop()
        executor.shutdown(timeout_sec=2.0)
        listener.destroy_node()
        rclpy.try_shutdown(context=context)
