"""The online node's core without a transport (issue 5): windows, worker, faults, fusion.

The estimator is replaced by a fast fake here (its result depends on the window's data, so a
wrong window shows); test_node_windows.py runs the real one on windows of a simulated rig,
test_node_end_to_end.py and test_ros_end_to_end.py in a running node.
"""

import dataclasses
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from mb_estimation.config import ConfigError, load_config
from mb_estimation.config.overrides import with_node_values
from mb_estimation.estimation import EstimationResult, RecordingEstimate
from mb_estimation.online import messages
from mb_estimation.online.core import EstimatorCore, NodeOutputs, with_node
from mb_estimation.online.intake import STAMP_CONFIRMATIONS
from mb_estimation.online.windows import window_step

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
NAMES = ("arm", "pendulum")


def _config(**node):
    config = load_config("furuta")
    node.setdefault("warm_up", False)
    return with_node(config, **node)


def _fake_estimator(config, recording, *, value=None, status="gradient", delay_s=0.0):
    """A result whose J_Azz is the window's mean arm angle (so each window's data shows)."""
    time.sleep(delay_s)
    free = tuple(config.free)
    parameters = dict(config.parameters)
    for name in free:
        parameters[name] = np.atleast_1d(np.asarray(parameters[name], dtype=float))
    parameters["J_Azz"] = np.array([float(np.mean(recording.joint_angles[:, 0]))
                                    if value is None else value])
    size = sum(np.size(parameters[n]) - (1 if np.size(parameters[n]) == 4 else 0) for n in free)
    grid = np.arange(0.0, config.node.window_s + 1e-9, window_step(config))
    angles = np.stack([np.interp(grid, recording.time_s, a) for a in recording.joint_angles.T],
                      axis=1)
    states = RecordingEstimate(recording.name, grid, angles, np.gradient(angles, grid, axis=0),
                               np.zeros((len(grid), 2, 3)), np.zeros((len(grid), 2, 4)),
                               np.zeros((len(grid), 2, 3)), np.zeros((len(grid), 2, 3)),
                               1e-6, 1e-6)
    return EstimationResult(
        parameters=parameters, free=free,
        std={n: np.full(3 if np.size(parameters[n]) == 4 else 1, 1e-4) for n in free},
        excited={n: True for n in free}, covariance=np.eye(size) * 1e-8, recordings=(states,),
        cost=2e-6, observation_mse=1e-6, impulse_mse=1e-6, iterations=3,
        status=status, message=status, history=())


class Collect:
    """NodeOutputs that remember what was published."""

    def __init__(self):
        self.parameters, self.fused, self.shadow, self.filtered, self.diagnostics = \
            [], [], [], [], []
        self.windows, self.rates = [], []
        self.outputs = NodeOutputs(
            window=self.windows.append,
            parameters=lambda e, s: self.parameters.append((e, s)),
            fused_parameters=lambda e, s: self.fused.append((e, s)),
            parameter_rates=lambda d, s: self.rates.append((d, s)),
            shadow_joint_states=lambda *a: self.shadow.append(a),
            filtered_joint_states=lambda *a: self.filtered.append(a),
            diagnostics=self.diagnostics.append)


def _feed(core, seconds, *, start_ns=T0, rate_hz=1000.0, voltage=True, still=False,
          names=NAMES, angle=None, jump=(np.inf, 0.0), motion_from_s=0.0):
    """``jump``: from ``jump[0]`` s on, the arm reads ``jump[1]`` rad more (a driver restart).

    The arm's motion starts at its time ``motion_from_s`` (another feed's end: it goes on).
    """
    count = int(round(seconds * rate_hz))
    for k in range(count):
        t = k / rate_hz
        stamp = start_ns + int(round(t * NS))
        if voltage:
            core.on_voltage(stamp, 1.0)
        arm = 0.0 if still else (0.5 * np.sin(1.3 * (t + motion_from_s))
                                 + 0.2 * (t + motion_from_s))
        arm += jump[1] if t >= jump[0] else 0.0
        positions = (arm if angle is None else angle, 0.1 * np.cos(2.0 * t) if not still else 0.0)
        core.on_joint_state(stamp, names, positions)


def _run(core, seconds, **feed):
    core.start()
    try:
        _feed(core, seconds, **feed)
        _wait_idle(core)
    finally:
        core.stop()


def _wait_idle(core, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = core.diagnostics()
        if d["pending_windows"] == 0 and d["windows_done"] + d["windows_dropped"] >= \
                core.intake.window_index:
            return
        time.sleep(0.01)
    raise AssertionError(f"worker did not finish: {core.diagnostics()}")


def test_windows_are_cut_on_stamps_estimated_fused_and_published():
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    _run(core, 12.0)
    d = core.diagnostics()
    assert d["windows_done"] == d["windows_accepted"] == 2 and d["windows_dropped"] == 0
    # window k covers [5(k-1), 5k] s: its fake J_Azz is the mean arm angle there
    t = np.arange(0, 5.0, 1e-3)
    expected = [np.mean(0.5 * np.sin(1.3 * s) + 0.2 * s) for s in (t, t + 5.0)]
    got = [float(e.values["J_Azz"][0]) for e, _ in out.parameters]
    np.testing.assert_allclose(got, expected, atol=2e-3)
    assert [s for _, s in out.parameters] == [T0 + 5 * NS, T0 + 10 * NS]
    fused = out.fused[-1][0]
    assert fused.windows == 2 and expected[0] < float(fused.values["J_Azz"][0]) < expected[1]
    stamps, names, angles, rates = out.shadow[0]
    assert names == NAMES and stamps[0] == T0 and stamps[-1] == T0 + 5 * NS
    assert np.all(np.isfinite(angles)) and np.all(np.isfinite(rates))
    assert len(out.filtered) == 12000  # one per sample, at the input rate
    assert all(np.all(np.isfinite(a)) and np.all(np.isfinite(r)) for _, _, a, r in out.filtered)
    assert d["filter_reanchored"] == 2


def test_shadow_states_are_published_at_the_samples_not_at_every_grid_point():
    """A 100 Hz rig under the 1 ms estimation grid: one shadow state per sample, at its stamp."""
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    _run(core, 6.0, rate_hz=100.0)
    stamps, _, angles, rates = out.shadow[0]
    assert window_step(core.config) == 1e-3
    np.testing.assert_array_equal(stamps, T0 + np.arange(501) * NS // 100)
    assert angles.shape == rates.shape == (501, 2)


def test_a_rig_at_rest_is_skipped_and_says_so():
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    _run(core, 5.5, still=True)
    d = core.diagnostics()
    assert d["windows_rejected"] == 1 and "rig at rest" in d["last_error"]
    assert out.parameters == [] and out.fused == []


@pytest.mark.parametrize("jump_rad", [1.5, -0.3])
def test_a_window_holding_a_jump_is_rejected_and_the_fused_estimate_kept(jump_rad):
    """The arm's reading jumps at 7 s (a driver restart): its window is rejected.

    Window 2 (5-10 s) names the jump, the fused estimate stays window 1's, window 3 is fused.
    """
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    _run(core, 16.0, jump=(7.0, jump_rad))
    d = core.diagnostics()
    assert d["windows_done"] == 3 and d["windows_accepted"] == 2, d
    assert [e.windows for e, _ in out.fused] == [1, 2]
    assert [s for _, s in out.parameters] == [T0 + 5 * NS, T0 + 15 * NS]
    rejected = [outcome for outcome in out.windows if not outcome.accepted]
    assert len(rejected) == 1 and rejected[0].start_ns == T0 + 5 * NS
    assert f"a jump no rig makes: arm moved {abs(jump_rad):.3g} rad in 1 ms" in \
        rejected[0].reason


def test_the_fastest_motion_a_rig_makes_is_no_jump():
    """At the speed limit and 100 Hz (1 rad per sample), no window is rejected for a jump."""
    out = Collect()
    core = EstimatorCore(_config(max_joint_speed_rad_s=100.0), out.outputs,
                         estimator=_fake_estimator)
    core.start()
    try:
        for k in range(601):
            stamp = T0 + k * NS // 100
            core.on_voltage(stamp, 1.0)
            core.on_joint_state(stamp, NAMES, (0.99 * k, 0.1))
        _wait_idle(core)
    finally:
        core.stop()
    assert core.diagnostics()["windows_accepted"] == 1, core.diagnostics()


def test_faults_are_counted_and_the_node_keeps_running():
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    core.start()
    try:
        core.on_joint_state(T0 - 10, NAMES, (np.nan, 0.0))
        core.on_joint_state(T0 - 5, ("joint0", "joint1"), (0.0, 0.0))
        core.on_voltage(T0 - 5, float("nan"))
        core.on_message_error("/control_voltage: expected std_msgs/msg/Float64, got JointState")
        _feed(core, 5.5)
        _wait_idle(core)
    finally:
        core.stop()
    d = core.diagnostics()
    assert d["samples_non_finite"] == 1 and d["samples_unknown_joints"] == 1
    assert d["voltage_non_finite"] == 1 and d["message_errors"] == 1
    assert d["windows_accepted"] == 1  # the good data still gives its window


def test_a_silent_voltage_topic_rejects_windows_with_a_reason():
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    _run(core, 5.5, voltage=False)
    d = core.diagnostics()
    assert d["windows_rejected"] == 1 and "no voltage received on /control_voltage" in \
        d["last_error"]
    assert out.parameters == []


def test_the_first_window_starts_where_the_voltage_is_known():
    """A voltage that begins after the joint states moves the first window to its start.

    (A driver or a middleware late to deliver it.) That window is estimated, not rejected for
    an input unknown at its start.
    """
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    late_ns = int(0.2 * NS)
    core.start()
    try:
        _feed(core, 0.2, voltage=False)
        _feed(core, 5.5, start_ns=T0 + late_ns, motion_from_s=0.2)
        _wait_idle(core)
    finally:
        core.stop()
    d = core.diagnostics()
    assert d["windows_accepted"] == 1 and d["windows_rejected"] == 0, d["last_error"]


def test_an_estimator_failure_keeps_the_last_good_estimate():
    out = Collect()
    calls = []

    def flaky(config, recording):
        calls.append(1)
        if len(calls) == 2:
            raise FloatingPointError("solver blew up")
        if len(calls) == 3:
            return _fake_estimator(config, recording, value=float("nan"))
        return _fake_estimator(config, recording)

    core = EstimatorCore(_config(), out.outputs, estimator=flaky)
    _run(core, 20.5)
    d = core.diagnostics()
    assert d["windows_done"] == 4 and d["windows_accepted"] == 2 and d["windows_rejected"] == 2
    assert len(out.fused) == 2 and out.fused[-1][0].windows == 2
    for estimate, _ in out.parameters + out.fused:
        assert all(np.all(np.isfinite(v)) for v in estimate.values.values())
    reasons = [entry.get("last_window") for entry in out.diagnostics]
    assert any("estimator failed: FloatingPointError: solver blew up" in r for r in reasons)
    assert any("non-finite estimate" in r for r in reasons)


def test_unconverged_and_costly_windows_are_rejected():
    out = Collect()
    core = EstimatorCore(_config(), out.outputs,
                         estimator=lambda c, r: _fake_estimator(c, r, status="max_iterations"))
    _run(core, 5.5)
    assert "not converged (max_iterations" in core.diagnostics()["last_error"]
    core = EstimatorCore(_config(max_cost=1e-7), out.outputs, estimator=_fake_estimator)
    _run(core, 5.5)
    assert "above node.max_cost" in core.diagnostics()["last_error"] and out.parameters == []


def test_a_parameter_left_at_its_bound_rejects_the_window():
    """J_Azz at its lower bound: no estimate, whatever its std (as calibrate's verdict reads it).

    Fused, the bound would pull the estimate there and reach the controllers as a value.
    """
    import dataclasses

    config = _config()
    lower = config.free["J_Azz"].lower

    def at_bound(std):
        def estimator(c, r):
            result = _fake_estimator(c, r, value=lower)
            return dataclasses.replace(result, std={**result.std, "J_Azz": np.array([std])})
        return estimator

    for std in (0.02, 1e-9):  # a large std, and one that holds it there firmly
        out = Collect()
        core = EstimatorCore(config, out.outputs, estimator=at_bound(std))
        _run(core, 5.5)
        assert core.diagnostics()["last_error"] == (
            f"window 1: J_Azz at its lower bound {lower:.3g}: the window asks for a value "
            "beyond it, so it is no estimate")
        assert out.parameters == [] and core.fused is None


def test_a_slow_worker_drops_windows_and_never_blocks_the_callbacks():
    """15 windows of 0.2 s arrive while the worker is stuck on the first one."""
    out = Collect()
    config = _config(window_s=0.2, stride_s=0.2, buffer_s=1.0, pending_windows=1,
                     min_motion_rad=0.0)
    release = threading.Event()

    def stuck(config, recording):
        release.wait(30.0)
        return _fake_estimator(config, recording)

    core = EstimatorCore(config, out.outputs, estimator=stuck)
    core.start()
    latencies = []
    try:
        for k in range(3001):  # 3 s of 1 kHz data, as fast as the callbacks take it
            stamp = T0 + k * 1_000_000
            started = time.perf_counter()
            core.on_voltage(stamp, 1.0)
            core.on_joint_state(stamp, NAMES, (0.3 * np.sin(k * 1e-2), 0.1))
            latencies.append(time.perf_counter() - started)
            assert core.diagnostics()["pending_windows"] <= 1
            if k == 250:
                time.sleep(0.2)  # let the worker pick up the first window and get stuck
        stuck_diagnostics = core.diagnostics()
        release.set()
        _wait_idle(core)
    finally:
        core.stop()
    d = core.diagnostics()
    assert stuck_diagnostics["windows_done"] == 0 and stuck_diagnostics["pending_windows"] == 1
    assert d["windows_dropped"] == 13 and d["windows_done"] == 2, d  # 15 = 1 + 13 + 1
    # the callbacks never waited on the stuck estimate (generous bounds for a loaded CI)
    assert max(latencies) < 0.05, max(latencies)
    assert np.percentile(latencies, 99) < 0.005, np.percentile(latencies, 99)
    assert d["buffered_samples"] == 2000  # bounded: buffer_s × max_rate_hz
    assert d["max_callback_s"] < 0.05


def test_the_warm_up_compiles_beside_the_intake_and_the_first_window_waits_for_it():
    """start() returns at once and the worker compiles beside the intake.

    Samples are filtered while it warms up, and a window cut meanwhile is estimated after the
    warm-up, not dropped.
    """
    out = Collect()
    release = threading.Event()
    calls = []

    def warming(config, recording):
        calls.append(recording.name)
        if recording.name == "warm-up":
            assert release.wait(30.0)
        return _fake_estimator(config, recording)

    core = EstimatorCore(_config(warm_up=True), out.outputs, estimator=warming)
    started = time.perf_counter()
    core.start()
    try:
        assert time.perf_counter() - started < 1.0
        _feed(core, 5.5)
        waiting = core.diagnostics()
        assert waiting["warming_up"] is True and "warm_up_s" not in waiting
        assert waiting["pending_windows"] == 1 and waiting["windows_done"] == 0
        assert len(out.filtered) == 5500  # the real-time filter did not wait
        release.set()
        _wait_idle(core)
    finally:
        core.stop()
    d = core.diagnostics()
    assert calls[0] == "warm-up" and len(calls) == 2
    assert "warming_up" not in d and d["warm_up_s"] > 0
    assert d["windows_accepted"] == 1 and d["windows_dropped"] == 0
    assert messages.diagnostic_level(waiting)[1].startswith("compiling the solver")
    assert messages.warm_up_message(waiting) is None
    assert messages.warm_up_message(d).startswith(f"solver compiled in {d['warm_up_s']:.1f} s")


EXIT_SCRIPT = """
import sys, time
from pathlib import Path
from mb_estimation.config import ConfigError, load_config
from mb_estimation.config.overrides import with_node_values
from mb_estimation.online.core import EstimatorCore, with_node

def slow_warm_up(config, recording):
    time.sleep(1.0)
    Path(sys.argv[1]).write_text(recording.name)
    raise RuntimeError("only compiling")

core = EstimatorCore(with_node(load_config("furuta"), warm_up=True), estimator=slow_warm_up)
core.start()  # and the program ends without stop()
"""


def test_a_program_that_ends_during_the_warm_up_waits_for_it_then_exits(tmp_path):
    """A program that ends during the warm-up exits cleanly once the warm-up is done.

    The worker is no daemon (XLA must not be compiling as the interpreter shuts down), and an
    idle worker leaves by itself once the main thread has ended: no hang, no crash.
    """
    marker = tmp_path / "warmed_up"
    started = time.monotonic()
    finished = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(marker)],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert marker.read_text() == "warm-up"  # the warm-up ran to its end
    assert time.monotonic() - started < 30.0


def test_stamps_jumping_back_reset_buffers_and_filters():
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    core.start()
    try:
        _feed(core, 5.5)
        core.on_joint_state(T0 + 5_400_000_000, NAMES, (0.0, 0.0))  # late: dropped
        core.on_joint_state(T0 + 5_499_000_000, NAMES, (0.0, 0.0))  # repeated: dropped
        _feed(core, 5.5)  # the bag loops: stamps start again at T0
        _wait_idle(core)
    finally:
        core.stop()
    d = core.diagnostics()
    assert d["time_jumps"] == 1 and d["samples_late"] == 1 and d["samples_repeated"] == 1
    assert "jumped back" in d["last_reset"]
    assert d["windows_accepted"] == 2  # one window before the jump, one after


def test_fused_estimate_is_persisted_and_reloaded(tmp_path):
    state = tmp_path / "state" / "fused.yaml"
    state.parent.mkdir()
    out = Collect()
    core = EstimatorCore(_config(state_file=str(state)), out.outputs, estimator=_fake_estimator)
    _run(core, 10.5)
    assert state.exists()
    fused = out.fused[-1][0]
    again = Collect()
    restarted = EstimatorCore(_config(state_file=str(state)), again.outputs,
                              estimator=_fake_estimator)
    restarted.start()
    restarted.stop()
    assert again.fused and again.fused[0][0].windows == fused.windows == 2
    np.testing.assert_allclose(again.fused[0][0].values["J_Azz"], fused.values["J_Azz"])
    np.testing.assert_array_equal(again.rates[0][0].rates, out.rates[-1][0].rates)
    assert again.rates[0][0].time_s == out.rates[-1][0].time_s == (T0 + 10 * NS) / NS


def test_a_drifting_parameter_is_published_with_its_rate_and_raises_the_alarm():
    """The fake J_Azz is the window's mean arm angle, which climbs 1 rad per 5 s window."""
    out = Collect()
    config = _config(drift_noise_by_parameter="J_Azz=1000", drift_alarm_s=10.0)
    core = EstimatorCore(config, out.outputs, estimator=_fake_estimator)
    _run(core, 25.5)
    rates = [(d.rates[d.estimate.names.index("J_Azz")], s) for d, s in out.rates]
    assert [s for _, s in rates] == [T0 + k * 5 * NS for k in range(1, 6)]
    assert rates[0][0] == 0.0 and rates[-1][0] == pytest.approx(0.2 * 3600, rel=0.05)
    snapshot = core.diagnostics()
    assert snapshot["drift_alarm"] == "J_Azz"
    assert snapshot["rate_per_hour.J_Azz"].startswith("7")
    from mb_estimation.online.messages import diagnostic_level
    level, message = diagnostic_level(snapshot)
    assert level == 1 and message.startswith("drifting: J_Azz")


def test_the_drift_settings_are_checked():
    with pytest.raises(ConfigError, match="drift_noise_by_parameter names m1, not free"):
        EstimatorCore(_config(drift_noise_by_parameter="m1=0.1"), Collect().outputs)
    with pytest.raises(ConfigError, match="node.forgetting: is gone"):
        with_node_values(load_config("furuta"), {"forgetting": 0.9})


def test_reset_and_calibrate_now():
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    core.start()
    try:
        ok, message = core.calibrate_now()
        assert not ok and "no joint states" in message
        _feed(core, 3.0)
        ok, message = core.calibrate_now()
        assert not ok and "needs 5 s" in message
        _feed(core, 3.0, start_ns=T0 + 3 * NS, motion_from_s=3.0)  # the motion goes on
        ok, message = core.calibrate_now()
        assert ok, message
        _wait_idle(core)
        assert core.fused is not None
        core.reset()
        assert core.fused is None and core.diagnostics()["buffered_samples"] == 0
    finally:
        core.stop()


def test_calibrate_now_counts_each_sample_once():
    """A window asked for 2 s after the last one adds 2 s of data; asked again, nothing."""
    from mb_estimation.online.windows import new_data_s, with_window

    out = Collect()
    config = _config()
    core = EstimatorCore(config, out.outputs, estimator=_fake_estimator)
    core.start()
    try:
        _feed(core, 7.0)  # a window over 0-5 s, then 2 s more
        _wait_idle(core)
        for _ in range(2):
            assert core.calibrate_now()[0]
            _wait_idle(core)
    finally:
        core.stop()
    d = core.diagnostics()
    assert d["windows_accepted"] == 2 and d["windows_stale"] == 1, d
    assert d["last_window"] == "3: dropped: every sample of it is already in the fused estimate"
    (first, _), (asked, _) = out.parameters
    first_end, asked_end = (T0 + 5 * NS) / NS, (T0 + 6_999_000_000) / NS  # the last sample's
    fused_first = with_window(config, None, first, first_end, new_data_s(config, None))
    expected = with_window(config, fused_first, asked, asked_end, 1.999).estimate
    assert core.fused.windows == 2 and len(out.fused) == 2
    np.testing.assert_allclose(core.fused.covariance, expected.covariance, rtol=1e-6,
                               atol=1e-20)
    with_stride = with_window(config, fused_first, asked, asked_end).estimate
    assert core.fused.covariance[0, 0] > 1.1 * with_stride.covariance[0, 0]


def test_nothing_is_published_after_stop():
    """A window being estimated when the node stops is dropped.

    A node configured anew after a cleanup must not publish the old one's window.
    """
    d, core, out = _window_interrupted(
        lambda core: (threading.Thread(target=core.stop).start(), time.sleep(0.2)))
    assert d["windows_stale"] == 1 and d.get("windows_accepted", 0) == 0
    assert out.parameters == out.fused == out.shadow == out.windows == []
    assert core.fused is None


def test_callbacks_from_several_threads():
    """Joint states and voltage arrive on different transport threads."""
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    core.start()
    try:
        stamps = [T0 + k * 1_000_000 for k in range(6000)]
        voltage = threading.Thread(target=lambda: [core.on_voltage(s, 1.0) for s in stamps])
        voltage.start()
        voltage.join()
        for k, s in enumerate(stamps):
            core.on_joint_state(s, NAMES, (0.5 * np.sin(k * 1e-3), 0.1))
        _wait_idle(core)
    finally:
        core.stop()
    assert core.diagnostics()["windows_accepted"] == 1


@pytest.mark.parametrize(("estimator", "window_s", "step_s"),
                         [("consistent", 0.002, 1e-3), ("paper", 0.02, 0.01)])
def test_window_must_hold_three_steps(estimator, window_s, step_s):
    config = _config(window_s=window_s)
    config = dataclasses.replace(config, advanced=dataclasses.replace(config.advanced,
                                                                      estimator=estimator))
    assert window_step(config) == step_s
    with pytest.raises(ValueError, match=f"shorter than three estimation steps of {step_s} s"):
        EstimatorCore(config, estimator=_fake_estimator)


def test_sample_ring_is_bounded_ordered_and_trims_the_newest():
    from mb_estimation.online.buffers import SampleRing

    ring = SampleRing(5, 1)
    for k in range(8):
        ring.append(k * 10, (k,))
    stamps, values = ring.ordered()
    assert list(stamps) == [30, 40, 50, 60, 70] and list(values[:, 0]) == [3, 4, 5, 6, 7]
    assert [list(s) for s in (ring.between(45, 60)[0], ring.between(0, 35)[0])] == \
        [[40, 50, 60], [30, 40]]
    ring.drop_after(45)
    assert list(ring.ordered()[0]) == [30, 40] and ring.last_stamp_ns == 40
    ring.append(41, (9,))
    assert list(ring.ordered()[0]) == [30, 40, 41]
    ring.clear()
    assert len(ring) == 0 and ring.last_stamp_ns is None


def test_fused_values_stay_in_the_box():
    """Correlated windows at a bound (b1 = 0) must not fuse to a value outside the box."""
    config = _config()

    def at_bound(config, recording):
        result = _fake_estimator(config, recording)
        parameters = dict(result.parameters, b1=np.array([0.0]))
        p = result.covariance.shape[0]
        covariance = np.eye(p) * 1e-8
        i, j = config.free_names.index("b1"), config.free_names.index("J_Azz")
        covariance[i, j] = covariance[j, i] = 0.9e-8  # b1 strongly correlated with J_Azz
        return dataclasses.replace(result, parameters=parameters, covariance=covariance)

    out = Collect()
    core = EstimatorCore(config, out.outputs, estimator=at_bound)
    _run(core, 15.5)
    assert len(out.fused) == 3
    assert all(float(e.values["b1"][0]) >= config.free["b1"].lower for e, _ in out.fused)


def test_wrapped_driver_angles_are_continued_for_the_filter():
    """A pendulum balancing at π whose driver wraps to (−π, π]: no 2π jumps reach the filter."""
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    t = np.arange(3000) * 1e-3
    pendulum = np.pi + 0.05 * np.sin(2 * np.pi * t)
    wrapped = np.angle(np.exp(1j * pendulum))
    assert np.ptp(wrapped) > 6.0  # it does wrap
    for k in range(len(t)):
        core.on_voltage(T0 + k * 1_000_000, 1.0)
        core.on_joint_state(T0 + k * 1_000_000, NAMES, (0.1 * t[k], wrapped[k]))
    d = core.diagnostics()
    assert d["filter_gated"] == 0 and d["filter_reinitialised"] == 0, d
    filtered = np.array([angles[1] for _, _, angles, _ in out.filtered])
    np.testing.assert_allclose(filtered[100:], pendulum[100:], atol=5e-3)


def test_parameter_matrix_layout_tilt_as_rotation_vector_and_no_infinities():
    from mb_estimation.online.fusion import ParameterEstimate
    from mb_estimation.online.messages import diagnostic_level, multiarray_layout, parameter_matrix

    angle = 0.2
    tilt = np.array([np.cos(angle / 2), np.sin(angle / 2), 0.0, 0.0])  # 0.2 rad about x
    covariance = np.diag([1e-6, 4e-6, 9e-6, np.inf])
    estimate = ParameterEstimate(("J_Azz", "tilt"), {"J_Azz": np.array([0.003]), "tilt": tilt},
                                 covariance)
    labels, matrix = parameter_matrix(estimate)
    assert labels == ("J_Azz", "tilt_rx", "tilt_ry", "tilt_rz")
    np.testing.assert_allclose(matrix[0], [0.003, angle, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(matrix[1], [1e-3, 2e-3, 3e-3, -1.0])  # -1: not determined
    assert multiarray_layout(labels) == [("value,std", 2, 8), ("J_Azz,tilt_rx,tilt_ry,tilt_rz",
                                                               4, 4)]
    snapshot = {"windows_accepted": 1, "windows_done": 2, "windows_dropped": 0}
    assert diagnostic_level({**snapshot, "last_window": "2: accepted"})[0] == 0
    assert diagnostic_level({**snapshot, "last_window": "2: rig at rest"})[0] == 1
    assert diagnostic_level({**snapshot, "last_window": "2: estimator failed: X"})[0] == 2


def test_a_failing_output_or_fusion_never_stops_the_worker():
    """A transport that raises on publish: counted, reported, the next windows still run."""
    def broken(*_):
        raise OSError("DDS write timed out")

    core = EstimatorCore(_config(), NodeOutputs(parameters=broken), estimator=_fake_estimator)
    _run(core, 15.5)
    d = core.diagnostics()
    assert d["windows_done"] == 3 and d["windows_accepted"] == 3
    assert d["output_errors"] == 3 and "publishing parameters: DDS write timed out" in \
        d["last_error"]
    assert core.fused is not None and core.fused.windows == 3


def _window_interrupted(interrupt):
    """A window held in the estimator while ``interrupt(core)`` happens, then let go."""
    started, release = threading.Event(), threading.Event()

    def slow(config, recording):
        started.set()
        release.wait(10.0)
        return _fake_estimator(config, recording)

    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=slow)
    core.start()
    try:
        _feed(core, 5.5)
        assert started.wait(10.0)
        interrupt(core)
        release.set()
        _wait_idle(core)
    finally:
        core.stop()
    return core.diagnostics(), core, out


def test_a_window_in_flight_during_a_reset_is_discarded():
    d, core, out = _window_interrupted(lambda core: core.reset())
    assert d["windows_stale"] == 1 and core.fused is None and out.fused == []
    assert d.get("filter_reanchored", 0) == 0


def test_a_window_in_flight_during_a_time_jump_is_fused_without_its_shadow_states():
    """A time jump (a looped bag, a restarted driver) while a window is estimated.

    Its samples were one stretch of the rig, so its parameters count; its states' stamps
    belong to the time base left behind.
    """
    # the stamps go back 5.5 s, as a looped 5.5 s bag does
    d, core, out = _window_interrupted(lambda core: _feed(core, 0.5))
    assert d["time_jumps"] == 1 and d.get("windows_stale", 0) == 0
    assert d["windows_accepted"] == 1 and core.fused is not None and core.fused.windows == 1
    assert len(out.parameters) == 1 and len(out.fused) == 1
    assert out.shadow == [] and d.get("filter_reanchored", 0) == 0


def test_a_voltage_script_is_the_input_timed_from_the_first_joint_state():
    """A bag recorded without its input: the config's script, restarted on a time jump."""
    from mb_estimation.online.adapter import input_handlers

    config = _config()
    config = dataclasses.replace(config, recording=dataclasses.replace(
        config.recording, voltage_script=((0.0, 0.43), (0.002, 0.0))))
    core = EstimatorCore(config, estimator=_fake_estimator)
    assert input_handlers(core)[1] is None  # no voltage topic to subscribe to
    start = T0 + 7 * NS
    for k in range(4):  # 1 ms apart: the 0.43 tick lasts 2 ms
        core.on_joint_state(start + k * 1_000_000, NAMES, (0.0, 0.0))
    again = [T0 + k * 1_000_000 for k in range(STAMP_CONFIRMATIONS)]
    for stamp in again:  # the bag again, from its start: a time jump once these confirm it
        core.on_joint_state(stamp, NAMES, (0.0, 0.0))
    stamps, values = core.intake.voltage.ordered()
    assert list(stamps) == again  # what was before the jump is of another time base
    assert list(values[:, 0]) == [0.43, 0.43] + [0.0] * (STAMP_CONFIRMATIONS - 2)
    core = EstimatorCore(config, estimator=_fake_estimator)
    for k in range(4):
        core.on_joint_state(start + k * 1_000_000, NAMES, (0.0, 0.0))
    stamps, values = core.intake.voltage.ordered()
    assert list(values[:, 0]) == [0.43, 0.43, 0.0, 0.0]


@pytest.mark.parametrize("order", ["voltage after the next joint state",
                                   "voltage before its joint state"])
def test_voltages_are_paired_by_publication_order_not_arrival(order):
    """Voltage k (published after joint state k) gets joint state k's stamp however it arrives.

    The rig publishes J0 V0 J1 V1 ...; an rclpy executor may deliver J0 J1 V0 J2 V1 ... (a
    voltage after the next joint state) or V0 J0 V1 J1 ...; the source timestamps place each.
    """
    core = EstimatorCore(_config(), estimator=_fake_estimator)
    count, step = 6, 1_000_000
    joints = [(2 * k, ("J", k)) for k in range(count)]
    voltages = [(2 * k + 1, ("V", k)) for k in range(count)]
    if order == "voltage after the next joint state":
        delivered = [joints[0]] + [m for k in range(count - 1)
                                   for m in (joints[k + 1], voltages[k])]
    else:
        delivered = [m for k in range(count) for m in (voltages[k], joints[k])]
    for source, (kind, k) in delivered:
        if kind == "J":
            core.on_joint_state(T0 + k * step, NAMES, (0.0, 0.0), source_ns=1_000 + source)
        else:
            core.on_voltage_message(float(k), source_ns=1_000 + source)
    stamps, values = core.intake.voltage.ordered()
    assert len(stamps) >= count - 2
    assert [int(v) for v in values[:, 0]] == [(s - T0) // step for s in stamps]


def test_a_voltage_published_just_before_its_joint_state_is_of_that_instant():
    """A bag storing V_k and J_k under one time, V_k first (as replayed): V_k takes J_k's stamp.

    As ``calibrate`` reads that bag (the input from that time on); taken as published after
    J_{k-1}, the input was one sample early (a damping estimate biased by many std).
    A voltage published at mid-interval (a tie) takes the joint state before it.
    """
    core = EstimatorCore(_config(), estimator=_fake_estimator)
    count, step, period = 6, 1_000_000, 2_000_000
    for k in range(count):
        core.on_voltage_message(float(k), source_ns=10**9 + k * period - period // 20)
        core.on_joint_state(T0 + k * step, NAMES, (0.0, 0.0), source_ns=10**9 + k * period)
    core.on_voltage_message(99.0, source_ns=10**9 + (count - 1) * period + period // 2)
    core.on_joint_state(T0 + count * step, NAMES, (0.0, 0.0), source_ns=10**9 + count * period)
    stamps, values = core.intake.voltage.ordered()
    assert [int(v) for v in values[:, 0]] == [*range(count), 99]
    assert list(stamps) == [T0 + k * step for k in range(count)] + [T0 + (count - 1) * step]


def test_the_first_voltage_is_known_from_the_first_joint_state_on():
    """At start the first voltage takes the joint state before it, even late in the interval.

    (Else the first window would lack its input at its start.) Later ones take the nearest.
    """
    core = EstimatorCore(_config(), estimator=_fake_estimator)
    step, period = 1_000_000, 2_000_000
    for k in range(3):
        core.on_joint_state(T0 + k * step, NAMES, (0.0, 0.0), source_ns=10**9 + k * period)
        core.on_voltage_message(float(k), source_ns=10**9 + k * period + 9 * period // 10)
    core.on_joint_state(T0 + 3 * step, NAMES, (0.0, 0.0), source_ns=10**9 + 3 * period)
    stamps, values = core.intake.voltage.ordered()
    assert list(stamps) == [T0, T0 + 2 * step, T0 + 3 * step]
    assert list(values[:, 0]) == [0.0, 1.0, 2.0]


def test_voltage_messages_and_efforts_become_held_voltages():
    """Float64MultiArray at voltage_index, a JointState effort, both on the joint stamps."""
    config = _config()
    array = dataclasses.replace(config, recording=dataclasses.replace(
        config.recording, voltage_type="std_msgs/msg/Float64MultiArray", voltage_index=1))
    core = EstimatorCore(array, estimator=_fake_estimator)
    core.on_voltage_message([0.0, 9.0])  # before any joint state: superseded by the next
    core.on_voltage_message([0.0, 2.5])  # before any joint state: from the first joint stamp
    core.on_joint_state(T0, NAMES, (0.0, 0.0))
    core.on_joint_state(T0 + 1000, NAMES, (0.0, 0.0))
    core.on_voltage_message([0.0, 3.5])  # held from the newest joint stamp
    core.on_voltage_message([1.0])  # too short for index 1
    stamps, values = core.intake.voltage.ordered()
    assert list(stamps) == [T0, T0 + 1000] and list(values[:, 0]) == [2.5, 3.5]
    assert "data has 1 entries, voltage_index 1" in core.diagnostics()["last_error"]
    effort = dataclasses.replace(config, recording=dataclasses.replace(
        config.recording, voltage_type="sensor_msgs/msg/JointState", voltage_joint="arm"))
    core = EstimatorCore(effort, estimator=_fake_estimator)
    core.on_joint_state(T0, NAMES, (0.0, 0.0), efforts=(4.0, 0.0))
    core.on_joint_state(T0 + 1, NAMES, (0.0, 0.0), efforts=())
    stamps, values = core.intake.voltage.ordered()
    assert list(stamps) == [T0] and list(values[:, 0]) == [4.0]
    assert core.diagnostics()["message_errors"] == 1


def test_a_blocked_shadow_publisher_does_not_stall_the_worker():
    """The worker hands a window's shadow states over and goes on; a backlog is dropped."""
    from mb_estimation.online.adapter import SHADOW_BACKLOG_WINDOWS, ShadowFanout

    release, published, errors = threading.Event(), [], []

    def publish_one(stamp, names, angle, rate):
        release.wait(10.0)  # a reliable writer waiting for a slow reader
        published.append(stamp)

    fanout = ShadowFanout(publish_one, errors.append)
    window = (np.arange(3), NAMES, np.zeros((3, 2)), np.zeros((3, 2)))
    started = time.perf_counter()
    for _ in range(SHADOW_BACKLOG_WINDOWS + 3):  # the first is taken, then the backlog fills
        fanout(*window)
    assert time.perf_counter() - started < 0.5
    release.set()
    fanout.close()
    assert fanout.dropped >= 2 and len(errors) == fanout.dropped
    assert len(published) == 3 * (SHADOW_BACKLOG_WINDOWS + 3 - fanout.dropped)
    assert fanout.with_dropped({"windows_done": 1}) == {
        "windows_done": 1, "shadow_windows_dropped": fanout.dropped}


def test_a_window_whose_last_joint_state_is_a_nanosecond_short_of_its_end_is_cut():
    """Stamps rounded to the nanosecond (a bag spanning 9.999999999 s): both windows."""
    out = Collect()
    core = EstimatorCore(_config(), out.outputs, estimator=_fake_estimator)
    core.start()
    try:
        _feed(core, 10.0, rate_hz=500.0)  # the last sample at 9.998 s ...
        core.on_voltage(T0 + 10 * NS - 1, 1.0)
        core.on_joint_state(T0 + 10 * NS - 1, NAMES, (0.2 * 10.0, 0.0))  # ... then 10 s − 1 ns
        _wait_idle(core)
    finally:
        core.stop()
    assert core.diagnostics()["windows_accepted"] == 2


def test_a_windows_log_line_says_not_determined_where_its_topic_publishes_minus_one():
    """The log (and /rosout) never shows ``± inf``: as the topics, no std where none is."""
    from types import SimpleNamespace

    from mb_estimation.online.messages import window_message
    from mb_estimation.online.windows import WindowOutcome

    result = SimpleNamespace(iterations=4, status="gradient", free=("J_Azz", "K"),
                             parameters={"J_Azz": 0.003, "K": 1.0},
                             std={"J_Azz": 2e-6, "K": np.inf}, std_include_model_error=False)
    line = window_message(WindowOutcome(3, 0, True, "accepted", 0.25, result))
    assert line == ("window 3 accepted after 0.25 s (4 iterations, gradient): J_Azz 0.003 ± 2e-06, "
                    "K 1 (not determined)")
    # the std that include the model's error are said to
    result.std, result.std_include_model_error = {"J_Azz": 9e-6, "K": np.inf}, True
    line = window_message(WindowOutcome(3, 0, True, "accepted", 0.25, result))
    assert line.endswith("J_Azz 0.003 ± 9e-06, K 1 (not determined) (std with the model's "
                         "error: the residuals stay correlated in time)")


@pytest.mark.parametrize(("second", "disagrees"), [(0.003 + 1e-5, False), (0.004, True)])
def test_a_window_that_contradicts_the_fused_estimate_is_said(second, disagrees):
    """Two windows 0.07 and 7 std of their difference apart: the second one warns, fused still.

    (A model error the windows' std do not hold lets them lie far apart, and the fused value
    between them would say nothing of it.)
    """
    from mb_estimation.online.messages import DIAGNOSTIC_OK, DIAGNOSTIC_WARN, diagnostic_level

    values = iter([0.003, second])
    out = Collect()
    core = EstimatorCore(_config(), out.outputs,
                         estimator=lambda c, r: _fake_estimator(c, r, value=next(values)))
    _run(core, 10.5)
    snapshot = core.diagnostics()
    assert snapshot["windows_accepted"] == 2 and len(out.fused) == 2
    level, text = diagnostic_level(snapshot)
    if disagrees:
        assert snapshot["windows_disagreeing"] == 1 and level == DIAGNOSTIC_WARN
        assert "last accepted: window 2: its values and the fused ones differ beyond" in text
    else:
        assert "windows_disagreeing" not in snapshot and level == DIAGNOSTIC_OK, text
