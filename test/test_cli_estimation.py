"""`mb-estimation calibrate` and `crossval` end to end on a short simulated bag."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from examples_loader import EXAMPLES, load_example

from mb_estimation.cli import main
from mb_estimation.config import load_config
from mb_estimation.io.parameter_files import read_parameters

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user-guide.md"


def test_calibrate_and_crossval_write_their_files(tmp_path, capsys):
    bag = tmp_path / "bag"
    assert main(["simulate", "swingup", "--config", "furuta_synthetic", "--output", str(bag),
                 "--duration", "0.6", "--dt", "1e-3"]) == 0
    # the default, consistent path: steps 2 ms and 1 ms (the sample period), both in the output
    consistent = tmp_path / "consistent"
    assert main(["calibrate", str(bag), "--config", "furuta_synthetic", "--free", "J_Azz",
                 "--set", "J_Azz=0.005", "--output", str(consistent), "--quiet"]) == 0
    document = yaml.safe_load((consistent / "parameters.yaml").read_text())
    entry = document["parameters"]["J_Azz"]
    assert set(entry) == {"value", "std", "unit", "excited", "status", "settled"}
    assert document["covariance"]["rows"] == ["J_Azz"]
    assert document["covariance"]["matrix"] == [[pytest.approx(entry["std"] ** 2, rel=1e-9)]]
    refinement = document["refinement"]
    assert refinement["dt"] == [0.002, 0.001]
    assert len(refinement["parameters"]["J_Azz"]["values"]) == 2
    assert refinement["parameters"]["J_Azz"]["values"][-1] == entry["value"]
    assert document["fit"]["steps"] == 601
    assert document["method"]["advanced"]["estimator"] == "consistent"
    (prediction,) = document["validation"]["prediction"]
    assert prediction["lead_time_s"][-1] == 0.5 and len(prediction["rms_rad"][-1]) == 2
    report = (consistent / "report.html").read_text()
    assert "Refinement" in report and "prediction" in report
    # the calibrated rig as URDF (generated: the config has none), read back: the fitted value
    urdf_config = tmp_path / "urdf.yaml"
    urdf_config.write_text(f"rig: furuta\nurdf: {{file: {consistent / 'calibrated.urdf'}}}\n"
                           f"parameters: {{K: 1.0}}\n")
    assert load_config(urdf_config).parameters["J_Azz"] == pytest.approx(entry["value"],
                                                                         rel=1e-12)
    # examples/load_parameters.py (plain PyYAML) reads both files as the package does
    example = load_example("load_parameters")
    values = example.load_parameters(consistent)
    assert values == read_parameters(consistent / "parameters.yaml")[1]
    assert example.load_ros_parameters(consistent) == values
    shown = subprocess.run([sys.executable, str(EXAMPLES / "load_parameters.py"),
                            str(consistent)], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"J_Azz = {entry['value']} ± {entry['std']} kg m^2")
    # the user guide's Python example on the same bag: the command's values, its verdict
    example = re.search(r"### From Python.*?```python\n(.*?)```", GUIDE.read_text(),
                        re.S).group(1)
    for mine, ours in (('"my_rig.yaml"', '"furuta_synthetic"'),
                       ('free=["J_Azz", "J_Byy", "K", "b1", "b2"]',
                        'free=["J_Azz"], set_values={"J_Azz": 0.005}'),
                       ('["run1.mcap", "run2.csv"]', f"[{str(bag)!r}]"),
                       ('"results"', repr(str(tmp_path / "from_python")))):
        assert mine in example
        example = example.replace(mine, ours)
    capsys.readouterr()
    exec(compile(example, "user-guide.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"J_Azz {entry['value']} {entry['std']}"
    assert printed[1].startswith("verdict: ")

    # the paper's single fit, on request
    out = tmp_path / "fit"
    status = main(["calibrate", str(bag), "--config", "furuta_synthetic", "--free", "J_Azz",
                   "--set", "J_Azz=0.005", "--compliance", "1e-4", "--max-iterations", "3",
                   "--estimator", "paper", "--output", str(out), "--quiet"])
    assert status == 0
    document = yaml.safe_load((out / "parameters.yaml").read_text())
    assert set(document) >= {"parameters", "fixed", "fit", "method"}
    assert "refinement" not in document
    entry = document["parameters"]["J_Azz"]
    assert set(entry) == {"value", "std", "unit", "excited", "status"}
    assert entry["unit"] == "kg m^2"
    assert "J_Azz" not in document["fixed"] and document["fixed"]["m_A"] == 0.238
    assert document["fit"]["steps"] == 61 and document["method"]["kappa"] == 100.0
    ros = yaml.safe_load((out / "ros_parameters.yaml").read_text())
    assert ros["mb_estimator"]["ros__parameters"]["estimate.J_Azz"] == entry["value"]
    assert ros["mb_estimator"]["ros__parameters"]["estimate_std.J_Azz"] == (
        entry["std"] if entry["status"] == "determined" else -1.0)  # -1: no estimate
    lines = (out / "states.csv").read_text().splitlines()
    assert lines[0].startswith("recording,time_s,theta_arm,theta_pendulum") and len(lines) == 62
    report = (out / "report.html").read_text()
    assert "J_Azz" in report and report.count("data:image/png;base64,") >= 6
    assert "open-loop replay" in capsys.readouterr().out

    # a sweep over κ on the same problem shape (no new compilation): a table and a figure
    assert main(["sweep", str(bag), "--config", "furuta_synthetic", "--free", "J_Azz",
                 "--set", "J_Azz=0.005", "--compliance", "1e-4", "--kappa", "10,1000",
                 "--estimator", "paper", "--max-iterations", "3",
                 "--output", str(tmp_path / "sweep"), "--quiet"]) == 0
    rows = (tmp_path / "sweep" / "sweep.csv").read_text().splitlines()
    assert rows[0].startswith("dt,kappa,compliance,J_Azz,J_Azz_std,observation_mse")
    assert [row.split(",")[1] for row in rows[1:]] == ["10.0", "1000.0"]
    assert (tmp_path / "sweep" / "sweep_kappa.png").read_bytes().startswith(b"\x89PNG")
    assert not (tmp_path / "sweep" / "sweep_compliance.png").exists()  # one value: no figure
    printed = capsys.readouterr().out  # --quiet: the plan and the table, no progress
    assert "sweep: 2 fits of J_Azz" in printed and "iteration   0" not in printed

    assert main(["crossval", str(bag), "--config", "furuta_synthetic", "--compliance", "1e-4",
                 "--parameters", str(out / "parameters.yaml"), "--max-iterations", "3",
                 "--estimator", "paper", "--output", str(out), "--quiet"]) == 0
    scores = yaml.safe_load((out / "crossval.yaml").read_text())
    score = scores["recordings"][0]["mse"]
    assert score > 0 and scores["mean_mse"] == score
    assert f"{bag}: CV {score:.4e}" in capsys.readouterr().out

    # the fitted model simulated: its values (free and fixed) land in ground_truth.yaml
    fitted = tmp_path / "fitted_bag"
    assert main(["simulate", "release", "--config", "furuta_synthetic", "--parameters", str(out),
                 "--output", str(fitted), "--duration", "0.05", "--dt", "1e-3"]) == 0
    truth = yaml.safe_load((fitted / "ground_truth.yaml").read_text())["parameters"]
    assert truth["J_Azz"] == entry["value"] != 0.005
    assert truth["eps_lin1"] == 1e-4  # the fit's compliance, not furuta_synthetic's 1e-6
    assert main(["simulate", "release", "--config", "pendulum", "--parameters", str(out),
                 "--output", str(tmp_path / "x")]) == 2
    assert "holds parameters of a furuta rig" in capsys.readouterr().err


def test_calibrate_missing_bag_is_one_line(tmp_path, capsys):
    assert main(["calibrate", str(tmp_path / "nope"), "--config", "furuta",
                 "--output", str(tmp_path / "o")]) == 2
    error = capsys.readouterr().err.strip()
    assert "no such recording" in error and len(error.splitlines()) == 1


def test_calibrate_exit_status_says_how_the_fit_stopped(tmp_path, monkeypatch, capsys):
    """0: converged or at the iteration limit; 1: no step lowers the cost (files still written).

    The fit is the paper's on a 0.6 s bag (the shapes of the test above: nothing new to
    compile); its stop is then rewritten to each status the solver can return.
    """
    import dataclasses

    from mb_estimation import api
    from mb_estimation.estimation import FitStatus

    bag = tmp_path / "bag"
    assert main(["simulate", "swingup", "--config", "furuta_synthetic", "--output", str(bag),
                 "--duration", "0.6", "--dt", "1e-3"]) == 0
    real = api.fit
    for status, expected in ((FitStatus.GRADIENT, 0), (FitStatus.MAX_ITERATIONS, 0),
                             (FitStatus.NO_PROGRESS, 1)):
        def stopped(*args, status=status, **kwargs):
            fitted = real(*args, **kwargs)
            return dataclasses.replace(fitted, joint=dataclasses.replace(fitted.joint,
                                                                         status=status))

        monkeypatch.setattr(api, "fit", stopped)
        out = tmp_path / status
        assert main(["calibrate", str(bag), "--config", "furuta_synthetic", "--free", "J_Azz",
                     "--set", "J_Azz=0.005", "--compliance", "1e-4", "--max-iterations", "3",
                     "--estimator", "paper", "--output", str(out), "--quiet"]) == expected
        assert yaml.safe_load((out / "parameters.yaml").read_text())["fit"]["status"] == status
        assert f"{status}" == status.value
    capsys.readouterr()


def test_calibrate_says_what_reading_did_before_it_fits(tmp_path, monkeypatch, capsys):
    """The recordings' notes (here: no input topic, a free swing) come before the fit starts."""
    import numpy as np

    from mb_estimation import api
    from mb_estimation.io.bags import write_rig_bag

    time_ns = np.arange(500, dtype=np.int64) * 2_000_000
    swing = np.stack([np.zeros(500), 0.3 * np.cos(np.arange(500) * 0.02)], axis=1)
    bag = write_rig_bag(tmp_path / "swing", joint_time_ns=time_ns, joint_names=["arm", "pendulum"],
                        joint_positions=swing)

    class Stopped(Exception):
        pass

    def stopped(*args, **kwargs):
        print("the fit starts")
        raise Stopped

    monkeypatch.setattr(api, "fit", stopped)
    with pytest.raises(Stopped):
        main(["calibrate", str(bag), "--config", "furuta_synthetic", "--hinges", "rigid",
              "--free", "J_Byy,b2", "--output", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert "unforced, input 0" in printed.split("the fit starts")[0], printed


def test_simulate_overwrite_replaces_its_own_output(tmp_path):
    bag = tmp_path / "bag"
    arguments = ["simulate", "release", "--config", "furuta_synthetic", "--output", str(bag),
                 "--duration", "0.05", "--dt", "1e-3"]
    assert main(arguments) == 0 and (bag / "ground_truth.yaml").exists()
    truth = yaml.safe_load((bag / "ground_truth.yaml").read_text())
    # --dt is the simulation's step; the estimation step stays the config's
    assert truth["simulation"]["dt"] == 1e-3 and truth["method"]["step_s"] is None
    assert main(arguments) == 2  # exists, no --overwrite
    assert main([*arguments, "--overwrite"]) == 0


def test_compilation_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    from mb_estimation.numerics import compilation_cache_dir

    monkeypatch.setenv("MB_ESTIMATION_CACHE_DIR", str(tmp_path / "xla"))
    assert compilation_cache_dir() == tmp_path / "xla"
    monkeypatch.setenv("MB_ESTIMATION_CACHE_DIR", "")
    assert compilation_cache_dir() is None
    monkeypatch.delenv("MB_ESTIMATION_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert compilation_cache_dir() == tmp_path / "cache" / "mb_estimation" / "xla"


_PAGE_FAULTS_OF_A_SECOND_BUFFER = """
import ctypes, resource, sys
if sys.argv[1] == "configured":
    from mb_estimation.numerics import reuse_freed_memory
    assert reuse_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = 64 << 20
def faults_of_a_buffer():  # as XLA's buffers: malloc'ed, written, freed (no madvise)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffer = libc.malloc(size)
    ctypes.memset(buffer, 1, size)
    libc.free(buffer)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_a_buffer()
print(faults_of_a_buffer())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="a glibc allocator setting")
def test_configured_entry_points_reuse_freed_buffers_without_page_faults():
    """configure_jax's allocator setting: a second 64 MiB buffer reuses the first one's pages.

    Without it glibc maps each such buffer afresh: a page fault per 4 KiB page, each time.
    """
    def faults(mode):
        return int(subprocess.run([sys.executable, "-c", _PAGE_FAULTS_OF_A_SECOND_BUFFER, mode],
                                  capture_output=True, text=True, check=True).stdout)

    pages = (64 << 20) // 4096
    assert faults("default") > pages // 2  # glibc's default: mapped afresh
    assert faults("configured") < pages // 50


def test_drift_correction_in_the_config_reaches_simulate_and_the_estimator(tmp_path, repo_root):
    from mb_estimation.config import load_config
    from mb_estimation.io.bags import read_joint_states
    from mb_estimation.rigs import parameter_arrays
    from mb_estimation.setup import rig_of

    data = yaml.safe_load((repo_root / "config/furuta_synthetic.yaml").read_text())
    data["advanced"] = {"drift_correction": True}
    config_path = tmp_path / "corrected.yaml"
    config_path.write_text(yaml.safe_dump(data))
    positions = {}
    for name, config in (("plain", "furuta_synthetic"), ("corrected", str(config_path))):
        bag = tmp_path / name
        assert main(["simulate", "swingup", "--config", config, "--output", str(bag),
                     "--duration", "0.5", "--dt", "1e-3", "--noise", "0"]) == 0
        truth = yaml.safe_load((bag / "ground_truth.yaml").read_text())
        assert truth["advanced"]["drift_correction"] is (name == "corrected")
        positions[name] = read_joint_states(bag, "/joint_states").positions
    difference = abs(positions["plain"] - positions["corrected"]).max()
    assert 0.0 < difference < 1e-2  # the same motion, through other rows

    config = load_config(config_path)
    system = rig_of(config).build(parameter_arrays(config.parameters))
    assert system.drift_correction


def test_help_imports_neither_jax_nor_numpy(repo_root):
    """``python -m mb_estimation.cli COMMAND --help`` builds every parser without the numerics."""
    code = ("import runpy, sys\n"
            "sys.argv = ['mb-estimation', 'calibrate', '--help']\n"
            "try:\n"
            "    runpy.run_module('mb_estimation.cli', run_name='__main__')\n"
            "except SystemExit as stop:\n"
            "    print('exit', stop.code, 'jax' in sys.modules, 'numpy' in sys.modules)\n")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=repo_root, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: mb-estimation calibrate")
    assert shown.stdout.splitlines()[-1] == "exit 0 False False"


def test_replay_does_not_import_jax(repo_root, tmp_path):
    """``replay`` only publishes a bag's messages: no JAX (about a second) before it starts."""
    code = ("import sys\n"
            "from mb_estimation.cli import main\n"
            f"status = main(['replay', {str(tmp_path / 'missing')!r}])\n"
            "print('exit', status, 'jax' in sys.modules)\n")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=repo_root, timeout=60)
    assert shown.stdout.splitlines()[-1] == "exit 2 False", (shown.stdout, shown.stderr)
    assert "mb-estimation: error:" in shown.stderr


def test_command_line_spells_the_scenarios_as_the_simulator():
    from mb_estimation import cli
    from mb_estimation.scenarios import SCENARIOS

    assert cli.SCENARIOS == SCENARIOS


def test_write_simulated_bag_checks_before_it_simulates(tmp_path):
    """The library function behind simulate: bad settings fail before the simulation runs."""
    import pytest

    from mb_estimation.api import write_simulated_bag
    from mb_estimation.config import load_config
    from mb_estimation.errors import SimulationError
    from mb_estimation.io.bags import BagError

    config = load_config("furuta_synthetic")
    with pytest.raises(SimulationError, match="noise must be non-negative"):
        write_simulated_bag(config, "release", tmp_path / "bag", duration_s=0.05,
                            noise_rad=-1.0)
    (tmp_path / "bag").mkdir()
    with pytest.raises(BagError, match="exists already; pass overwrite=True"):
        write_simulated_bag(config, "release", tmp_path / "bag", duration_s=0.05)


def test_simulate_writes_the_voltage_where_the_config_reads_it(tmp_path):
    """A config whose voltage is a joint's effort: simulate writes it there, and it reads back."""
    import dataclasses

    import numpy as np

    from mb_estimation.api import write_simulated_bag
    from mb_estimation.config import load_config
    from mb_estimation.io.bags import read_bag_summary, read_joint_states
    from mb_estimation.io.recordings import read_recording

    topic = load_config("furuta_synthetic")
    names = [topic.recording.joints[joint].name for joint in topic.rig_spec.joints]
    effort = dataclasses.replace(topic, recording=dataclasses.replace(
        topic.recording, voltage_type="sensor_msgs/msg/JointState", voltage_joint=names[1]))
    inputs = []
    for config in (topic, effort):
        bag = tmp_path / config.recording.voltage_type.replace("/", "_")
        write_simulated_bag(config, "multisine", bag, duration_s=0.2)
        inputs.append(read_recording(bag, config).inputs)
    assert set(read_bag_summary(bag).topics) == {effort.recording.joint_states_topic}
    efforts = read_joint_states(bag, effort.recording.joint_states_topic).efforts
    assert np.all(efforts[:, 0] == 0.0) and np.any(efforts[:, 1] != 0.0)
    np.testing.assert_array_equal(inputs[1], inputs[0])
