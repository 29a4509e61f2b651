"""Ingestion of real-world recordings (DESIGN §5): PlotJuggler CSV, stamps, messy samples, gaps."""

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from mb_estimation.config import ConfigError, JointMapping, load_config, parse_config
from mb_estimation.io.bags import BagError, read_joint_states, write_rig_bag
from mb_estimation.io.plotjuggler import PlotJugglerCsv
from mb_estimation.io.recordings import assemble_recording, choose_stamps, read_recording
from mb_estimation.rigs.parameters import RIGS
from mb_estimation.signals import Recording, prepare_recording

REPO = Path(__file__).resolve().parents[1]
PEER = REPO.parent / "shared" / "data" / "peer-furuta-hardware"
HUMBLE_STEP = REPO.parent / "shared" / "data" / "rosbag2-humble-furuta" / "step_response_de"
T0 = 1707670562.5  # Unix time [s]


def _config(**recording):
    """The furuta config reading joint0/joint1 (arm offset 1 rad, pendulum sign -1)."""
    config = load_config("furuta")
    recording.setdefault("joints", {"arm": JointMapping("joint0", offset=1.0),
                                    "pendulum": JointMapping("joint1", sign=-1)})
    settings = dataclasses.replace(config.recording, **recording)
    return dataclasses.replace(config, recording=settings)


def _write_csv(path, stamps, receive, positions, voltage_times=(), voltages=(), extra=""):
    """A PlotJuggler export: joint rows and Float64MultiArray rows interleaved by receive time."""
    header = ["__time", "/effort_control/data.0", "/effort_control/layout/data_offset",
              "/joint_states/header/stamp", "/joint_states/joint0/position",
              "/joint_states/joint0/velocity", "/joint_states/joint1/position"]
    rows = [(r, ["", "", f"{s:.9f}", f"{p[0]:.9f}", "0.5", f"{p[1]:.9f}"])
            for s, r, p in zip(stamps, receive, positions, strict=True)]
    rows += [(t, [f"{v:.9f}", "0", "", "", "", ""]) for t, v in zip(voltage_times, voltages,
                                                                    strict=True)]
    rows.sort(key=lambda row: row[0])
    lines = [",".join(header)] + [",".join([f"{t:.6f}"] + cells) for t, cells in rows]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def _joint_samples(n=200, period=0.002):
    stamps = T0 + period * np.arange(n)
    positions = np.stack([1.0 + np.sin(stamps - T0), -0.1 * np.cos(stamps - T0)], axis=1)
    return stamps, stamps + 4e-4, positions


def test_plotjuggler_csv_maps_joints_holds_voltage_and_trims(tmp_path):
    stamps, receive, positions = _joint_samples()
    path = _write_csv(tmp_path / "r.csv", stamps, receive, positions,
                      voltage_times=[T0 + 0.1005, T0 + 0.3], voltages=[2.0, 3.0])
    recording = read_recording(path, _config(voltage_topic="effort_control",
                                             voltage_type="std_msgs/msg/Float64MultiArray"))
    assert recording.time_s[0] == 0.0
    np.testing.assert_allclose(recording.time_s, stamps - T0, atol=1e-6)  # header stamps
    np.testing.assert_allclose(recording.joint_angles[:, 0], np.sin(stamps - T0), atol=1e-8)
    np.testing.assert_allclose(recording.joint_angles[:, 1], 0.1 * np.cos(stamps - T0),
                               atol=1e-8)
    np.testing.assert_allclose(recording.input_time_s, [0.1005, 0.3], atol=1e-6)
    np.testing.assert_allclose(recording.inputs[:, 0], [2.0, 3.0])
    assert any("voltage unknown before its first message at 0.10" in n
               for n in recording.notes)
    grid = prepare_recording(recording, 0.01, 10.0)
    assert grid.time_s[0] == pytest.approx(0.1005, abs=1e-6)  # starts at the first voltage
    np.testing.assert_allclose(grid.inputs[:19, 0], 2.0)
    np.testing.assert_allclose(grid.inputs[-1, 0], 3.0)


def test_columns_without_the_leading_slash_and_a_voltage_on_another_clock(tmp_path):
    """Other loggers write ``joint_states/<joint>/position``; a voltage far off is refused."""
    stamps, receive, positions = _joint_samples()
    path = _write_csv(tmp_path / "r.csv", stamps, receive, positions,
                      voltage_times=[T0 + 0.1005, T0 + 0.3], voltages=[2.0, 3.0])
    lines = path.read_text().splitlines()
    (tmp_path / "bare.csv").write_text("\n".join(  # and a trailing comma: no topic "/"
        [",".join(" " + name.lstrip("/") for name in lines[0].split(",")) + ",",
         *lines[1:]]) + "\n")
    config = _config(voltage_topic="effort_control",
                     voltage_type="std_msgs/msg/Float64MultiArray")
    plain, bare = read_recording(path, config), read_recording(tmp_path / "bare.csv", config)
    assert PlotJugglerCsv(tmp_path / "bare.csv").topics() == ["/effort_control", "/joint_states"]
    np.testing.assert_array_equal(bare.joint_angles, plain.joint_angles)
    np.testing.assert_array_equal(bare.inputs, plain.inputs)
    # the voltage stamped from zero, the joint states from the epoch: no overlap at all
    far = _write_csv(tmp_path / "far.csv", stamps, receive, positions,
                     voltage_times=[0.1005, 0.3], voltages=[2.0, 3.0])
    with pytest.raises(BagError, match=r"far.csv: the voltage's stamps end 1.71e\+09 s before "
                                       r"the first joint state: .* different clocks"):
        read_recording(far, config)
    # held from a little before the first joint state: read as it is
    early = _write_csv(tmp_path / "early.csv", stamps, receive, positions,
                       voltage_times=[T0 - 5.0], voltages=[2.0])
    np.testing.assert_allclose(read_recording(early, config).input_time_s, [-5.0], atol=1e-6)


def test_a_voltage_topic_in_a_namespace_is_found_in_a_csv(tmp_path):
    """``/rig/effort_control/data.0``: the topic ``/rig/effort_control``, not ``/rig``."""
    stamps, receive, positions = _joint_samples()
    path = _write_csv(tmp_path / "r.csv", stamps, receive, positions,
                      voltage_times=[T0 + 0.1005, T0 + 0.3], voltages=[2.0, 3.0])
    text = path.read_text().replace("/effort_control/", "/rig/effort_control/")
    (tmp_path / "ns.csv").write_text(text)
    recording = read_recording(tmp_path / "ns.csv", _config(
        voltage_topic="/rig/effort_control", voltage_type="std_msgs/msg/Float64MultiArray"))
    np.testing.assert_allclose(recording.inputs[:, 0], [2.0, 3.0])
    assert not any("unforced" in note for note in recording.notes)


def test_stamps_on_another_clock_fall_back_to_receive_time():
    receive = np.arange(100, dtype=np.int64) * 2_000_000 + 1_690_000_000 * 10**9
    sim_time = np.arange(100, dtype=np.int64) * 2_000_000 + 18 * 10**9
    times, note = choose_stamps(sim_time, receive, "auto", shared_with_receive_clock=True)
    assert times is receive and "another clock" not in note and "away from the receive" in note
    # with nothing else on the receive clock, sim-time stamps are fine
    times, note = choose_stamps(sim_time, receive, "auto", shared_with_receive_clock=False)
    assert times is sim_time and note is None
    # zero stamps (a driver that does not set them) and a frozen stamp fail the check
    times, note = choose_stamps(np.zeros(100, np.int64), receive, "auto",
                                shared_with_receive_clock=False)
    assert times is receive and "zero stamps" in note
    assert choose_stamps(sim_time, receive, "header", shared_with_receive_clock=True)[0] \
        is sim_time
    assert choose_stamps(sim_time, receive, "receive", shared_with_receive_clock=False)[0] \
        is receive
    with pytest.raises(BagError, match="no header stamps"):
        choose_stamps(None, receive, "header", shared_with_receive_clock=False)


def test_non_finite_duplicate_and_out_of_order_samples(tmp_path):
    stamps, receive, positions = _joint_samples()
    positions[10:15, 1] = np.nan
    positions[20, 0] = np.inf
    order = np.arange(len(stamps))
    order[[50, 51]] = order[[51, 50]]  # two samples stamped out of their receive order
    stamps, positions = stamps[order], positions[order]
    stamps = np.concatenate([stamps, stamps[100:102]])  # two repeated stamps
    receive = np.concatenate([receive, receive[100:102] + 1e-4])
    positions = np.concatenate([positions, positions[100:102]])
    path = _write_csv(tmp_path / "r.csv", stamps, receive, positions, [T0 - 1.0], [0.0])
    recording = read_recording(path, _config(voltage_topic="effort_control",
                                             voltage_type="std_msgs/msg/Float64MultiArray"))
    notes = " | ".join(recording.notes)
    assert "dropped 6 of 202 joint-state samples with non-finite values" in notes
    assert "out of order: sorted" in notes
    assert "dropped 2 joint-state samples with a repeated time stamp" in notes
    assert len(recording.time_s) == 194 and np.all(np.diff(recording.time_s) > 0)
    assert np.all(np.isfinite(recording.joint_angles))

    positions[:, 0] = np.nan
    _write_csv(path, stamps, receive, positions, [T0], [0.0])
    with pytest.raises(BagError, match="all 202 joint-state samples are NaN or infinite"):
        read_recording(path, _config(voltage_topic="effort_control",
                                     voltage_type="std_msgs/msg/Float64MultiArray"))


def test_gaps_are_bridged_without_shifting_time():
    time_s = np.arange(0.0, 2.0, 0.002)
    keep = (time_s < 0.8) | (time_s > 0.95)  # 150 ms of dropped samples
    angles = np.stack([np.sin(time_s), np.cos(time_s)], 1)
    recording = Recording("gap", time_s[keep], angles[keep], np.array([0.0]), np.ones((1, 1)))
    grid = prepare_recording(recording, 0.01, 10.0)
    np.testing.assert_allclose(grid.time_s, 0.01 * np.arange(len(grid.time_s)), atol=1e-12)
    unobserved = grid.time_s[grid.observed == 0.0]
    assert unobserved.min() > 0.798 and unobserved.max() < 0.952  # between the samples
    assert len(unobserved) == 15  # 0.80 .. 0.94 (a sample sits at 0.95)
    # a single dropped sample is no gap at this step
    keep = np.ones(len(time_s), bool)
    keep[300] = False
    grid = prepare_recording(Recording("one", time_s[keep], angles[keep], np.array([0.0]),
                                       np.ones((1, 1))), 0.01, 10.0)
    assert grid.observed.all()


def test_calibrate_counts_gap_steps_on_the_grid_it_fits_on(tmp_path):
    """The note counts the steps of the fit's grid in the gap (consistent: the sample period)."""
    from mb_estimation.api import read_recordings
    from mb_estimation.setup import set_up

    stamps, receive, positions = _joint_samples(n=1000)
    keep = (stamps - T0 < 0.8) | (stamps - T0 > 0.95)  # 150 ms of dropped samples
    path = _write_csv(tmp_path / "r.csv", stamps[keep], receive[keep], positions[keep],
                      [T0], [0.0])
    config = _config(voltage_topic="effort_control",
                     voltage_type="std_msgs/msg/Float64MultiArray")
    paper = dataclasses.replace(config, advanced=dataclasses.replace(config.advanced,
                                                                     estimator="paper"))
    for setting, steps in ((config, 75), (paper, 15)):  # at 2 ms and at 10 ms (as above)
        setup = set_up(setting, read_recordings(setting, [path]))
        notes, grids = setup.notes, setup.grids
        assert grids[0].dt == pytest.approx(0.002 if setting is config else 0.01, rel=1e-3)
        assert any(f"{steps} of " in note and "fall in gaps" in note for note in notes), notes


def test_voltage_script_replaces_the_voltage_topic(tmp_path):
    stamps, receive, positions = _joint_samples()
    path = _write_csv(tmp_path / "r.csv", stamps, receive, positions)
    recording = read_recording(path, _config(voltage_script=((0.0, 0.43), (0.002, 0.0))))
    np.testing.assert_allclose(recording.input_time_s, [0.0, 0.002])
    np.testing.assert_allclose(recording.inputs[:, 0], [0.43, 0.0])
    assert any("voltage_script" in n for n in recording.notes)
    raw = {"rig": "furuta", "parameters": dict(load_config("furuta").to_dict()["parameters"])}
    parsed = parse_config({**raw, "recording": {"voltage_script": 0.43}})
    assert parsed.recording.voltage_script == ((0.0, 0.43),)
    with pytest.raises(ConfigError, match=r"recording.voltage_script: times must increase"):
        parse_config({**raw, "recording": {"voltage_script": [[1.0, 0.0], [0.5, 1.0]]}})
    with pytest.raises(ConfigError, match=r"recording.voltage_script\[1\]"):
        parse_config({**raw, "recording": {"voltage_script": [[0.0, 1.0], [0.5]]}})


def test_bad_recordings_give_one_clear_error(tmp_path):
    config = _config(voltage_topic="effort_control",
                     voltage_type="std_msgs/msg/Float64MultiArray")
    with pytest.raises(BagError, match="the file does not exist"):
        read_recording(tmp_path / "missing.csv", config)
    (tmp_path / "plain.csv").write_text("a,b\n1,2\n")
    with pytest.raises(BagError, match="not a PlotJuggler CSV export"):
        read_recording(tmp_path / "plain.csv", config)
    stamps, receive, positions = _joint_samples()
    path = _write_csv(tmp_path / "r.csv", stamps, receive, positions, [T0], [1.0])
    with pytest.raises(BagError, match="no joint states of topic '/js'.*topics: "
                                       "/effort_control, /joint_states"):
        read_recording(path, _config(joint_states_topic="js"))
    renamed = _config(voltage_topic="effort_control",
                      voltage_type="std_msgs/msg/Float64MultiArray",
                      joints={"arm": JointMapping("arm"), "pendulum": JointMapping("joint1")})
    with pytest.raises(BagError, match="joint 'arm' .* it has joint0, joint1"):
        read_recording(path, renamed)


def test_a_recording_without_its_input_is_unforced_and_says_so(tmp_path):
    """No messages on the voltage topic (a free swing): input 0 throughout, one note naming it.

    A CSV export or a bag without the topic, and a bag with the topic but no message on it.
    """
    stamps, receive, positions = _joint_samples()
    csv = _write_csv(tmp_path / "r.csv", stamps, receive, positions)
    time_ns = (stamps * 1e9).astype(np.int64)
    bag = write_rig_bag(tmp_path / "bag", joint_time_ns=time_ns,
                        joint_names=["joint0", "joint1"], joint_positions=positions)
    config = _config()
    silent = assemble_recording("silent", read_joint_states(bag, "/joint_states"),
                                (np.zeros(0, np.int64), np.zeros(0)), config.recording,
                                RIGS["furuta"])
    for recording, why in (
            (read_recording(csv, config), r"no /control_voltage in the recording \(its "
                                          r"topics: /effort_control, /joint_states\)"),
            (read_recording(bag, config), r"no /control_voltage in the recording \(its "
                                          r"topics: joint_states\)"),
            (silent, r"/control_voltage has no messages")):
        path = recording.name
        grid = prepare_recording(recording, 0.01, 20.0)
        assert np.all(grid.inputs == 0.0), path
        assert grid.time_s[0] == pytest.approx(0.0, abs=0.011)  # no data lost before an input
        unforced = [note for note in recording.notes if "unforced" in note]
        assert len(unforced) == 1 and re.match(why + r": unforced, input 0", unforced[0]), (
            recording.notes)


def test_a_misspelt_input_topic_is_refused_not_read_as_unforced(tmp_path):
    """A voltage topic one letter off one the recording has: an error naming it, no free swing."""
    stamps, receive, positions = _joint_samples()
    csv = _write_csv(tmp_path / "r.csv", stamps, receive, positions, [T0], [1.0])
    time_ns = (stamps * 1e9).astype(np.int64)
    bag = write_rig_bag(tmp_path / "bag", joint_time_ns=time_ns,
                        joint_names=["joint0", "joint1"], joint_positions=positions,
                        voltage_time_ns=time_ns[:1], voltage=np.ones(1),
                        voltage_topic="/control_voltage")
    for path, typo, found in ((csv, "/effort_controll", "/effort_control"),
                              (bag, "control_voltag", "/control_voltage")):
        config = _config(voltage_topic=typo, voltage_type="std_msgs/msg/Float64MultiArray"
                         if path == csv else "std_msgs/msg/Float64")
        with pytest.raises(BagError, match=f"no voltage topic '{typo}', but it has "
                                           f"'{found}': a typo in recording.voltage_topic"):
            read_recording(path, config)


def test_a_voltage_of_another_type_than_declared_is_read_and_said(tmp_path):
    stamps, _, positions = _joint_samples()
    time_ns = (stamps * 1e9).astype(np.int64)
    bag = write_rig_bag(tmp_path / "bag", joint_time_ns=time_ns,
                        joint_names=["joint0", "joint1"], joint_positions=positions,
                        voltage_time_ns=time_ns[:1], voltage=np.full(1, 0.5),
                        voltage_topic="/control_voltage")  # Float64
    declared = _config(voltage_topic="/control_voltage",
                       voltage_type="std_msgs/msg/Float64MultiArray")
    recording = read_recording(bag, declared)
    assert recording.inputs[0, 0] == 0.5
    assert ("/control_voltage holds std_msgs/msg/Float64, not recording.voltage_type "
            "std_msgs/msg/Float64MultiArray: read as the recording has it") in recording.notes
    as_recorded = _config(voltage_topic="/control_voltage", voltage_type="std_msgs/msg/Float64")
    assert not any("voltage_type" in note for note in read_recording(bag, as_recorded).notes)


@pytest.mark.skipif(not PEER.is_dir(), reason="shared/data not present")
def test_real_plotjuggler_export():
    """The peer rig's 2 V step: 500 Hz, voltage first published 2.741 s in, held at 2 V."""
    config = load_config(REPO / "config" / "examples" / "odrive_furuta.yaml")
    recording = read_recording(PEER / "hardware_step_response_2V.csv", config)
    assert len(recording.time_s) == 3423
    assert np.median(np.diff(recording.time_s)) == pytest.approx(0.002, abs=1e-4)
    np.testing.assert_allclose(recording.inputs[:, 0], 2.0)
    assert recording.input_time_s[0] == pytest.approx(2.741, abs=2e-3)
    assert any("voltage unknown before" in n for n in recording.notes)
    grid = prepare_recording(recording, 0.01, config.advanced.filter_cutoff_hz)
    assert grid.observed.all() and grid.time_s[-1] - grid.time_s[0] > 4.0


@pytest.mark.skipif(not HUMBLE_STEP.is_dir(), reason="shared/data not present")
def test_real_humble_bag_with_scripted_input():
    """Sim-time stamps in a wall-clock bag, no voltage topic: the input comes from the config."""
    config = _config(joint_states_topic="joint_states", voltage_script=((0.0, 0.43),))
    recording = read_recording(HUMBLE_STEP, config)
    assert recording.time_s[-1] == pytest.approx(10.0, abs=0.01)  # header stamps kept
    assert len(recording.time_s) == 5001
    np.testing.assert_allclose(recording.inputs[:, 0], [0.43])


def test_driver_velocities_are_ignored_unless_asked_for(tmp_path):
    """Asked for, the driver's velocities (low-passed) give the initial state velocities."""
    from mb_estimation.estimation.parameters import FreeParameters
    from mb_estimation.estimation.residuals import ModelStructure
    from mb_estimation.estimation.solver import states_from_angles_and_rates
    from mb_estimation.multibody import joint_rates
    from mb_estimation.rigs import get_rig, parameter_arrays

    t = np.arange(2000) * 1e-3
    positions = np.stack([np.sin(2 * t), 0.3 * np.cos(3 * t)], axis=1)
    velocities = np.stack([2 * np.cos(2 * t), -0.9 * np.sin(3 * t)], axis=1)
    velocities += np.random.default_rng(0).normal(0.0, 0.5, velocities.shape)  # a noisy driver
    stamps = (1_700_000_000 + t) * 1e9
    bag = write_rig_bag(tmp_path / "bag", joint_time_ns=stamps.astype(np.int64),
                        joint_names=["joint0", "joint1"], joint_positions=positions,
                        joint_velocities=velocities, joint_states_topic="/joint_states",
                        voltage_time_ns=stamps.astype(np.int64), voltage=np.zeros(len(t)),
                        voltage_topic="/control_voltage")
    ignored = read_recording(bag, _config())
    assert ignored.joint_rates is None
    assert prepare_recording(ignored, 0.01, 10.0).initial_rates is None
    config = _config(use_driver_velocities=True)
    recording = read_recording(bag, config)
    np.testing.assert_allclose(recording.joint_rates, velocities * [1, -1])  # pendulum sign -1
    grid = prepare_recording(recording, 0.01, 10.0)
    truth = np.stack([2 * np.cos(2 * grid.time_s), 0.9 * np.sin(3 * grid.time_s)], axis=1)
    inner = slice(10, -10)  # the filter's ends
    error = (grid.initial_rates - truth)[inner]
    assert np.sqrt(np.mean(error**2)) < 0.1  # the driver's noise of 0.5 rad/s low-passed
    rig = get_rig(config.rig, config.friction)
    structure = ModelStructure(rig, FreeParameters.of(rig.spec, ()))
    states = states_from_angles_and_rates(structure, parameter_arrays(config.parameters), {},
                                          grid.filtered_angles, grid.initial_rates)
    system = structure.system(parameter_arrays(config.parameters), {})
    rates = np.array([joint_rates(system, jax_state) for jax_state in _rows(states, 5)])
    np.testing.assert_allclose(rates, grid.initial_rates[:5], atol=1e-9)
    bare = write_rig_bag(tmp_path / "bare", joint_time_ns=stamps.astype(np.int64),
                         joint_names=["joint0", "joint1"], joint_positions=positions,
                         voltage_time_ns=stamps.astype(np.int64), voltage=np.zeros(len(t)),
                         voltage_topic="/control_voltage")
    with pytest.raises(BagError, match="use_driver_velocities is set but the joint states"):
        read_recording(bare, config)


def _rows(states, count):
    """The first ``count`` time steps of stacked body states, one BodyStates each."""
    import jax

    return [jax.tree_util.tree_map(lambda leaf, k=k: leaf[k], states) for k in range(count)]
