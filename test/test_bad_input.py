"""Bad input to ``calibrate`` gives one clear line on stderr and a non-zero exit (issue 4).

Each case is a recording or config a user could really hand the tool; none may end in a
traceback.
"""

import importlib.util
import os
import re
from pathlib import Path

import numpy as np
import pytest

from mb_estimation.cli import main
from mb_estimation.config import load_config
from mb_estimation.io.bags import write_rig_bag
from mb_estimation.io.recordings import read_recording

REPO = Path(__file__).resolve().parents[1]
CONFIG = str(REPO / "config" / "furuta.yaml")
T0_NS = 1_700_000_000 * 10**9


def _bag(path, n=300, positions=None, names=("arm", "pendulum"), voltage=True, **kwargs):
    """A 1 kHz furuta.yaml recording: joint states and a Float64 voltage on its topics."""
    stamps = T0_NS + np.arange(n, dtype=np.int64) * 1_000_000
    if positions is None:
        t = np.arange(n) * 1e-3
        positions = np.stack([np.sin(t), 0.1 * np.cos(3 * t)], axis=1)
    return write_rig_bag(
        path, joint_time_ns=stamps, joint_names=list(names), joint_positions=positions,
        joint_states_topic="/joint_states",
        voltage_time_ns=stamps if voltage else None,
        voltage=np.ones(n) if voltage else None,
        voltage_topic="/control_voltage" if voltage else None, **kwargs)


def _calibrate(capsys, recording, *options, config=CONFIG, output):
    status = main(["calibrate", str(recording), "--config", config, "--output", str(output),
                   "--quiet", "--max-iterations", "1", *options])
    err = capsys.readouterr().err.strip()
    return status, err


def _config_with(tmp_path, replace):
    text = (REPO / "config" / "furuta.yaml").read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def _assert_one_line(status, err, pattern):
    assert status != 0
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("mb-estimation: error: ")
    assert re.search(pattern, err), err


def test_path_missing_or_not_a_recording(tmp_path, capsys):
    status, err = _calibrate(capsys, tmp_path / "missing", output=tmp_path / "o")
    _assert_one_line(status, err, "no such recording")
    status, err = _run(capsys, "replay", str(tmp_path / "missing"))
    _assert_one_line(status, err, r"no such recording \(a bag folder or .db3/.mcap file\)$")
    (tmp_path / "notes.txt").write_text("hello")
    status, err = _calibrate(capsys, tmp_path / "notes.txt", output=tmp_path / "o")
    _assert_one_line(status, err, "not a rosbag2 bag")
    (tmp_path / "folder").mkdir()
    status, err = _calibrate(capsys, tmp_path / "folder", output=tmp_path / "o")
    _assert_one_line(status, err, "no metadata.yaml")


def test_corrupt_database(tmp_path, capsys):
    bag = _bag(tmp_path / "bag")
    (database,) = bag.glob("*.db3")
    database.write_bytes(b"\x00garbage" * 100)
    status, err = _calibrate(capsys, bag, output=tmp_path / "o")
    _assert_one_line(status, err, "bag")
    truncated = _bag(tmp_path / "bag2")
    (database,) = truncated.glob("*.db3")
    database.write_bytes(database.read_bytes()[:3000])
    status, err = _calibrate(capsys, truncated, output=tmp_path / "o")
    _assert_one_line(status, err, "bag")


def test_no_joint_state_topic_lists_topics_and_types(tmp_path, capsys):
    bag = _bag(tmp_path / "bag")
    config = _config_with(tmp_path, {"joint_states_topic: /joint_states":
                                     "joint_states_topic: /robot/joint_states"})
    status, err = _calibrate(capsys, bag, config=config, output=tmp_path / "o")
    _assert_one_line(status, err, r"/robot/joint_states.*/joint_states.*JointState.*"
                     r"/control_voltage.*Float64")


def test_wrong_message_type(tmp_path, capsys):
    bag = _bag(tmp_path / "bag")
    config = _config_with(tmp_path, {"voltage_topic: /control_voltage":
                                     "voltage_topic: /joint_states"})
    status, err = _calibrate(capsys, bag, config=config, output=tmp_path / "o")
    _assert_one_line(status, err, r"/joint_states.*JointState.*expected std_msgs/msg/Float64")
    config = _config_with(tmp_path, {"joint_states_topic: /joint_states":
                                     "joint_states_topic: /control_voltage"})
    status, err = _calibrate(capsys, bag, config=config, output=tmp_path / "o")
    _assert_one_line(status, err, r"/control_voltage.*Float64.*JointState")


def test_joint_name_absent_lists_names(tmp_path, capsys):
    bag = _bag(tmp_path / "bag", names=("joint0", "joint1"))
    status, err = _calibrate(capsys, bag, output=tmp_path / "o")
    _assert_one_line(status, err, r"'arm'.*joint0, joint1")


def test_all_non_finite_is_an_error_part_is_dropped_and_reported(tmp_path, capsys):
    bag = _bag(tmp_path / "nan", positions=np.full((300, 2), np.nan))
    status, err = _calibrate(capsys, bag, output=tmp_path / "o")
    _assert_one_line(status, err, "all 300 joint-state samples are NaN or infinite")
    t = np.arange(300) * 1e-3
    positions = np.stack([np.sin(t), 0.1 * np.cos(3 * t)], axis=1)
    positions[100:110, 1] = np.inf
    bag = _bag(tmp_path / "some", positions=positions)
    recording = read_recording(bag, load_config(CONFIG))
    assert len(recording.time_s) == 290
    assert "dropped 10 of 300 joint-state samples with non-finite values" in recording.notes


def test_too_short_for_one_step(tmp_path, capsys, monkeypatch):
    from mb_estimation import api

    def compiling(*_):
        raise AssertionError("compiling began before the recordings were checked")

    monkeypatch.setattr(api, "compiling_meanwhile", compiling)
    # 3 samples, 2 ms: three points at the finest step (1 ms, the sample period), two at the
    # consistent path's first level (2 ms): too short for it, said before anything compiles
    bag = _bag(tmp_path / "bag", n=3)
    status, err = _calibrate(capsys, bag, output=tmp_path / "o")
    _assert_one_line(status, err, "too short")
    bag = _bag(tmp_path / "long")
    status, err = _calibrate(capsys, bag, "--start", "0.299", output=tmp_path / "o")
    _assert_one_line(status, err, "too short|nothing left|--start")


def test_a_lone_stamp_far_away_is_one_line_before_any_allocation(tmp_path, capsys):
    """A joint state stamped 1e6 s after the others: the recording is mostly gap."""
    from mb_estimation.io.bags import write_rig_bag

    stamps = T0_NS + np.arange(300, dtype=np.int64) * 1_000_000
    stamps[-1] += 10**6 * 10**9
    t = np.arange(300) * 1e-3
    bag = write_rig_bag(
        tmp_path / "bag", joint_time_ns=stamps, joint_names=["arm", "pendulum"],
        joint_positions=np.stack([np.sin(t), 0.1 * np.cos(3 * t)], axis=1),
        joint_states_topic="/joint_states", voltage_time_ns=stamps[:-1], voltage=np.ones(299),
        voltage_topic="/control_voltage")
    status, err = _calibrate(capsys, bag, output=tmp_path / "o")
    _assert_one_line(status, err, r"no joint state for 1e\+06 s.*--start/--end")


def test_the_low_pass_allocates_for_the_samples_not_for_a_gap():
    """Each stretch between gaps on its own: a 1e6 s gap costs nothing, smooths nothing over."""
    from mb_estimation.signals.preprocess import lowpass

    time_s = np.concatenate([np.arange(500) * 1e-3, 1e6 + np.arange(500) * 1e-3])
    values = np.concatenate([np.zeros(500), np.ones(500)])[:, None]
    smoothed = lowpass(time_s, values, 10.0)
    np.testing.assert_allclose(smoothed[:500], 0.0, atol=1e-12)
    np.testing.assert_allclose(smoothed[500:], 1.0, atol=1e-12)


def test_no_voltage_and_no_motion(tmp_path, capsys):
    """No voltage is a free swing (unforced); with nothing moving either, nothing to fit."""
    bag = _bag(tmp_path / "bag", positions=np.zeros((300, 2)), voltage=False)
    status, err = _calibrate(capsys, bag, output=tmp_path / "o")
    _assert_one_line(status, err, r"no joint moves \(the arm \(it spans 0 rad\), the pendulum")


def test_a_free_input_gain_without_any_input(tmp_path, capsys):
    """K free on a free swing alone: refused before the fit, not fitted to any value."""
    bag = _bag(tmp_path / "bag", voltage=False)
    status, err = _calibrate(capsys, bag, "--free", "K,b2", output=tmp_path / "o")
    _assert_one_line(status, err, r"K \(the input's gain\) is free but no recording has an "
                                  r"input.*Leave it out of the free set")


def test_no_iterations_is_refused(tmp_path, capsys):
    """--max-iterations 0 would write the start's values as a calibration: refused."""
    status, err = _calibrate(capsys, _bag(tmp_path / "bag"), "--max-iterations", "0",
                             output=tmp_path / "o")
    _assert_one_line(status, err, r"max_iterations: must be an integer >= 1, got 0")


def test_config_that_does_not_match_the_recording(tmp_path, capsys):
    """A Furuta config on a single-pendulum bag, a voltage index past the data, a free name."""
    bag = _bag(tmp_path / "pendulum", positions=np.zeros((300, 1)), names=("pendulum",))
    status, err = _calibrate(capsys, bag, output=tmp_path / "o")
    _assert_one_line(status, err, r"'arm'.*it has pendulum")
    bag = _bag(tmp_path / "array", voltage_type="std_msgs/msg/Float64MultiArray")
    config = _config_with(tmp_path, {
        "voltage_type: std_msgs/msg/Float64": "voltage_type: std_msgs/msg/Float64MultiArray",
        "voltage_index: 0": "voltage_index: 2"})
    status, err = _calibrate(capsys, bag, config=config, output=tmp_path / "o")
    _assert_one_line(status, err, r"index 2")
    status, err = _calibrate(capsys, bag, "--free", "J_Q", output=tmp_path / "o")
    _assert_one_line(status, err, "J_Q")


def test_an_empty_export_names_what_is_missing(tmp_path, capsys):
    """A PlotJuggler export with a header and no rows: not numpy's "zero-size array"."""
    export = tmp_path / "empty.csv"
    export.write_text("__time,/joint_states/arm/position,/joint_states/pendulum/position,"
                      "/control_voltage/data\n")
    status, err = _calibrate(capsys, export, output=tmp_path / "o")
    _assert_one_line(status, err, r"empty\.csv: no joint states on /joint_states$")
    # with a header-stamp column too: the stamps are chosen after the emptiness check
    stamped = tmp_path / "empty_stamped.csv"
    stamped.write_text("__time,/joint_states/header/stamp,/joint_states/arm/position,"
                       "/joint_states/pendulum/position,/control_voltage/data\n")
    status, err = _calibrate(capsys, stamped, output=tmp_path / "o2")
    _assert_one_line(status, err, r"empty_stamped\.csv: no joint states on /joint_states$")


def _run(capsys, *argv):
    status = main(list(argv))
    return status, capsys.readouterr().err.strip()


def test_impossible_simulations_are_one_line(tmp_path, capsys):
    """The simulate and rig-sim commands: settings the simulator cannot run (before rclpy)."""
    output = str(tmp_path / "bag")
    status, err = _run(capsys, "simulate", "release", "--config", CONFIG, "--dt", "-0.003",
                       "--output", output)
    _assert_one_line(status, err, r"dt \(-0.003\) and rate \(1000.0 Hz\) must be positive")
    status, err = _run(capsys, "simulate", "swingup", "--config", "pendulum", "--output", output)
    _assert_one_line(status, err, r"scenario 'swingup' needs a motor")
    status, err = _run(capsys, "simulate", "release", "--config", CONFIG, "--duration", "0",
                       "--output", output)
    _assert_one_line(status, err, r"duration must be positive")
    status, err = _run(capsys, "rig-sim", "--config", CONFIG, "--scenario", "release",
                       "--rate", "-5")
    _assert_one_line(status, err, r"rate_hz must be a positive number, got -5.0$")
    status, err = _run(capsys, "rig-sim", "--config", CONFIG, "--scenario", "release",
                       "--duration", "0")
    _assert_one_line(status, err, r"duration_s must be positive")
    assert not (tmp_path / "bag").exists()


def test_rig_sim_refuses_an_input_it_cannot_play_in_one_line(tmp_path, capsys):
    played = tmp_path / "excitation.csv"
    played.write_text("time_s,input\n0.0,0.1\n0.01,0.2\n0.02,0.1\n")
    status, err = _run(capsys, "rig-sim", "--config", CONFIG, "--input", str(played),
                       "--rate", "200")
    _assert_one_line(status, err, r"excitation.csv is sampled at 100 Hz, --rate is 200")
    status, err = _run(capsys, "rig-sim", "--config", "pendulum", "--input", str(played))
    _assert_one_line(status, err, r"a played input needs a motor")
    with pytest.raises(SystemExit):  # one source: a scenario, an input file or the topic
        main(["rig-sim", "--config", CONFIG, "--scenario", "release", "--driven"])
    assert "not allowed with argument --scenario" in capsys.readouterr().err
    if importlib.util.find_spec("rclpy") is not None:
        status, err = _run(capsys, "rig-sim", "--config", "pendulum", "--driven")
        _assert_one_line(status, err, r"a played input needs a motor")


def test_a_bad_parameters_file_is_one_line(tmp_path, capsys):
    (tmp_path / "parameters.yaml").write_text("a: [1\n")
    status, err = _run(capsys, "simulate", "release", "--config", CONFIG, "--parameters",
                       str(tmp_path), "--output", str(tmp_path / "bag"))
    _assert_one_line(status, err, r"parameters\.yaml: not valid YAML")
    (tmp_path / "parameters.yaml").write_text("a: 1\n")
    status, err = _run(capsys, "simulate", "release", "--config", CONFIG, "--parameters",
                       str(tmp_path), "--output", str(tmp_path / "bag"))
    _assert_one_line(status, err, r"not a parameters\.yaml written by mb-estimation calibrate")


def test_a_programming_error_is_not_an_input_error(monkeypatch, capsys):
    """Exit status 2 is for input only: any other ValueError propagates (a traceback)."""
    import pytest

    from mb_estimation import api

    def broken(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(api, "write_simulated_bag", broken)
    with pytest.raises(ValueError, match="a bug"):
        main(["simulate", "release", "--config", CONFIG, "--output", "unused"])
    assert capsys.readouterr().err == ""


def test_input_errors_are_user_errors():
    """The types exit status 2 stands for: UserError and its subclasses, all ValueErrors."""
    from mb_estimation.config import ConfigError
    from mb_estimation.errors import RecordingError, SimulationError, UserError
    from mb_estimation.io.bags import BagError
    from mb_estimation.io.parameter_files import ParametersFileError

    for error in (ConfigError, BagError, RecordingError, SimulationError, ParametersFileError):
        assert issubclass(error, UserError) and issubclass(error, ValueError)


def test_an_output_that_cannot_be_a_folder_is_one_line_before_the_fit(tmp_path, capsys):
    bag = _bag(tmp_path / "bag")
    taken = tmp_path / "a_file"
    taken.write_text("not a folder")
    status, err = _calibrate(capsys, bag, output=taken)
    _assert_one_line(status, err, "exists and is not a folder")
    status, err = _calibrate(capsys, bag, output="/proc/no_such_folder/out")
    _assert_one_line(status, err, "/proc/no_such_folder/out: cannot write there")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if not os.access(locked, os.W_OK):  # root writes anywhere: nothing to check there
            status, err = _calibrate(capsys, bag, output=locked / "out")
            _assert_one_line(status, err, "cannot write there")
    finally:
        locked.chmod(0o700)
    assert not (tmp_path / "a_file").is_dir()


def test_an_unknown_flag_is_named_with_the_commands_usage(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["calibrate", "bag", "--config", CONFIG, "--output", str(tmp_path / "o"),
              "--frees", "J_Azz"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.startswith("usage: mb-estimation calibrate")
    assert err.splitlines()[-1] == ("mb-estimation calibrate: error: unrecognized arguments: "
                                    "--frees J_Azz")


def test_an_empty_free_list_is_refused_not_read_as_the_configs(tmp_path, capsys):
    bag = _bag(tmp_path / "bag")
    status, err = _calibrate(capsys, bag, "--free", "", output=tmp_path / "o")
    _assert_one_line(status, err, "^mb-estimation: error: --free names no parameter: give "
                                  "NAME,NAME")  # not the config's fault
    status, err = _calibrate(capsys, bag, "--free", "Jazz", output=tmp_path / "o")
    _assert_one_line(status, err, "did you mean 'J_Azz'")


def test_a_failed_command_leaves_no_empty_output_folder_of_its_own(tmp_path, capsys):
    """The folder it made is removed (it was empty); one that was there before is kept."""
    bag = _bag(tmp_path / "pendulum", positions=np.zeros((300, 1)), names=("pendulum",))
    status, err = _calibrate(capsys, bag, output=tmp_path / "new")
    _assert_one_line(status, err, r"'arm'.*it has pendulum")
    assert not (tmp_path / "new").exists()
    (tmp_path / "kept").mkdir()
    status, _ = _calibrate(capsys, bag, output=tmp_path / "kept")
    assert status == 2 and (tmp_path / "kept").is_dir()


def test_track_takes_workers_or_a_cluster_not_both(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["track", "bag", "--config", CONFIG, "--output", str(tmp_path / "o"),
              "--workers", "2", "--cluster", "tcp://127.0.0.1:8786"])
    assert stopped.value.code == 2
    assert "argument --cluster: not allowed with argument --workers" in \
        capsys.readouterr().err


def test_the_results_example_says_a_missing_folder_in_one_line(tmp_path):
    import subprocess
    import sys

    example = REPO / "examples" / "load_parameters.py"
    done = subprocess.run([sys.executable, str(example), str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == f"{tmp_path / 'none'}: no parameters.yaml (give the folder " \
        "calibrate wrote)"
