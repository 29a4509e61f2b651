"""The rclpy node and the launch files.

Most tests need no ROS 2: the launch files are checked statically (parsed, never run), the node
module is imported without rclpy, and its pure helpers (overrides, push mapping, estimate
parameters, fused output files, config topics) are exercised directly. The tests at the end need
rclpy (and launch_ros) and skip cleanly without them; on a ROS 2 machine they start the node.
"""

import ast
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from configs import TABLE_1, write_config
from processes import LAUNCH_SCRIPT

from mb_estimation.config import ConfigError, load_config
from mb_estimation.io.parameter_files import read_parameters
from mb_estimation.online.fusion import ParameterEstimate
from mb_estimation.ros import ros_common

try:
    from rclpy.lifecycle import TransitionCallbackReturn

    from mb_estimation.ros import ros_node
except ModuleNotFoundError:  # no rclpy: the tests that need it skip before using it
    ros_node = None

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "launch"
ESTIMATOR_LAUNCH = LAUNCH / "estimator.launch.py"
BAG_LAUNCH = LAUNCH / "bag_calibration.launch.py"
EXCITER_LAUNCH = LAUNCH / "exciter.launch.py"
ESTIMATOR_ARGUMENTS = {"config", "joint_states_topic", "voltage_topic", "free", "set",
                       "compliance", "use_sim_time", "node_name"}
BAG_ARGUMENTS = {"bag", "config", "rate", "output", "player"}
EXCITER_ARGUMENTS = {"excitation", "config", "joint_states_topic", "voltage_topic", "node_name",
                     "max_input", "max_arm_rad", "max_arm_rate", "ramp_s", "timeout_s",
                     "estimator"}


# --------------------------------------------------------------------------------------------
# launch files, statically
# --------------------------------------------------------------------------------------------


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _constants(tree: ast.Module) -> dict[str, object]:
    """Module-level NAME = <constant> assignments."""
    values = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    values[target.id] = statement.value.value
    return values


def _value(node: ast.AST, constants: dict) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):  # f-strings of module constants
        parts = [_value(part.value if isinstance(part, ast.FormattedValue) else part, constants)
                 for part in node.values]
        return "".join(map(str, parts)) if all(isinstance(p, str) for p in parts) else node
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    return node


def _calls(tree: ast.Module, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == name]


def _keywords(call: ast.Call, constants: dict) -> dict[str, object]:
    return {k.arg: _value(k.value, constants) for k in call.keywords if k.arg}


def _declared_arguments(tree: ast.Module) -> dict[str, object]:
    """Name -> default (None when required) of every DeclareLaunchArgument call named literally.

    (Arguments declared in a loop, e.g. the node settings, are checked by loading the file.)
    """
    constants = _constants(tree)
    declared = {}
    for call in _calls(tree, "DeclareLaunchArgument"):
        keywords = _keywords(call, constants)
        name = _value(call.args[0], constants) if call.args else keywords.get("name")
        if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id not in constants:
            continue
        assert isinstance(name, str), ast.dump(call)
        assert name not in declared, f"{name} declared twice"
        declared[name] = keywords.get("default_value")
    return declared


@pytest.mark.parametrize("path", [ESTIMATOR_LAUNCH, BAG_LAUNCH, EXCITER_LAUNCH],
                         ids=lambda p: p.name)
def test_launch_file_parses_and_defines_generate_launch_description(path):
    tree = _tree(path)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions
    assert not functions["generate_launch_description"].args.args
    assert ast.get_docstring(tree), "launch files document their arguments"


def test_estimator_launch_declares_exactly_its_arguments():
    declared = _declared_arguments(_tree(ESTIMATOR_LAUNCH))
    assert set(declared) == ESTIMATOR_ARGUMENTS
    assert declared["joint_states_topic"] == "" and declared["voltage_topic"] == ""  # config's
    assert declared["use_sim_time"] == "false"
    assert declared["node_name"] == "mb_estimator"
    assert declared["free"] == "" and declared["set"] == ""
    assert float(declared["compliance"]) == 0.0


def test_bag_launch_declares_exactly_its_arguments():
    declared = _declared_arguments(_tree(BAG_LAUNCH))
    assert set(declared) == BAG_ARGUMENTS
    assert declared["bag"] is None  # required
    assert float(declared["rate"]) == 1.0
    assert declared["output"] == "./mb_estimation_calibration"
    assert declared["player"] == "rosbag2"


@pytest.mark.parametrize("path", [ESTIMATOR_LAUNCH, BAG_LAUNCH], ids=lambda p: p.name)
def test_launch_files_start_the_estimator_node(path):
    tree = _tree(path)
    constants = _constants(tree)
    nodes = [_keywords(call, constants) for call in _calls(tree, "LifecycleNode")]
    assert len(nodes) == 1 and not _calls(tree, "Node")
    assert nodes[0]["package"] == "mb_estimation"
    assert nodes[0]["executable"] == "estimator_node"
    # the default config is the installed one
    text = path.read_text(encoding="utf-8")
    assert 'get_package_share_directory(PACKAGE), "config", "furuta.yaml"' in text


def test_bag_launch_calls_calibrate_now_and_shuts_down():
    tree = _tree(BAG_LAUNCH)
    constants = _constants(tree)
    text = BAG_LAUNCH.read_text(encoding="utf-8")
    assert "call_trigger" in text and 'f"/{NODE_NAME}/calibrate_now"' in text
    assert constants["NODE_NAME"] == "mb_estimator"
    assert len(_calls(tree, "OnProcessExit")) >= 2
    assert _calls(tree, "Shutdown")
    node = _keywords(_calls(tree, "LifecycleNode")[0], constants)
    parameters = node["parameters"].elts[0]
    keys = [_value(k, constants) for k in parameters.keys]
    assert "output_dir" in keys and "use_sim_time" in keys


def test_bag_launch_players(ament_prefix):
    """rosbag2 plays with --clock and the node on sim time; the package's player without."""
    pytest.importorskip("launch_ros")
    from launch import LaunchContext

    module = _load_launch_module(BAG_LAUNCH)
    context = LaunchContext()
    context.launch_configurations.update({"bag": "/data/bag", "rate": "2.0"})
    context.launch_configurations["player"] = "rosbag2"
    assert module._player(context) == (["ros2", "bag", "play", "/data/bag", "--clock", "1000",
                                        "--rate", "2.0"], True)
    context.launch_configurations["player"] = "mb_estimation"
    command, sim_time = module._player(context)
    assert command[1:] == ["-m", "mb_estimation.cli", "replay", "/data/bag", "--rate",
                           "2.0"] and sim_time is False
    context.launch_configurations["player"] = "vlc"
    with pytest.raises(ValueError, match="rosbag2, mb_estimation"):
        module._player(context)


@pytest.mark.parametrize("path", [ESTIMATOR_LAUNCH, BAG_LAUNCH], ids=lambda p: p.name)
def test_launch_files_drive_the_node_lifecycle(path):
    """Both launch files configure and activate the node; the bag plays once it is active."""
    tree = _tree(path)
    (drive,) = _calls(tree, "drive_lifecycle")
    when_active = {k.arg: k.value for k in drive.keywords}.get("when_active")
    if path == BAG_LAUNCH:
        assert "bag_play" in {n.id for n in ast.walk(when_active) if isinstance(n, ast.Name)}
    else:
        assert when_active is None
    assert not _calls(tree, "OnProcessIO")  # nothing reads the node's log


def test_drive_lifecycle_runs_the_actions_once_its_node_answered_active(ament_prefix):
    pytest.importorskip("launch_ros")
    from launch.actions import LogInfo, OpaqueFunction, RegisterEventHandler
    from launch_ros.actions import LifecycleNode

    from mb_estimation.ros.ros_launch import _Activated, _Refused, drive_lifecycle

    def lifecycle_node(name):
        return LifecycleNode(package="mb_estimation", executable="estimator_node", name=name,
                             namespace="")

    node, other = lifecycle_node("n"), lifecycle_node("m")
    marker = LogInfo(msg="active")
    when_active, when_refused, start = drive_lifecycle(node, when_active=[marker])
    assert isinstance(when_active, RegisterEventHandler) and isinstance(start, OpaqueFunction)
    handler = when_active.event_handler
    assert handler.matches(_Activated(node)) and not handler.matches(_Activated(other))
    assert list(handler.entities) == [marker]
    # a refusal is raised while the launch handles its event (exit status 1), not in the
    # waiting thread, whose future launch may drop unread
    refusal = when_refused.event_handler
    assert refusal.matches(_Refused(node, "no")) and not refusal.matches(_Refused(other, "no"))
    assert not refusal.matches(_Activated(node)) and not handler.matches(_Refused(node, "no"))
    (fail,) = refusal.entities
    context = SimpleNamespace(locals=SimpleNamespace(event=_Refused(node, "refused: why")))
    with pytest.raises(RuntimeError, match="refused: why"):
        fail.execute(context)


def test_setup_installs_the_launch_files_into_share():
    tree = _tree(REPO / "setup.py")
    constants = _constants(tree)

    def text(node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return text(node.left) + text(node.right)
        value = _value(node, constants)
        assert isinstance(value, str), ast.dump(node)
        return value

    setup = _calls(tree, "setup")[0]
    data_files = next(k.value for k in setup.keywords if k.arg == "data_files")
    installed = {}
    for entry in data_files.elts:
        destination, sources = entry.elts
        globs = [text(call.args[0]) for call in ast.walk(sources)
                 if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "glob"]
        installed[text(destination)] = globs
    assert installed.get("share/mb_estimation/launch") == ["launch/*.launch.py"]
    assert "config/*.yaml" in installed.get("share/mb_estimation/config", [])
    for path in (ESTIMATOR_LAUNCH, BAG_LAUNCH):
        assert path.match("*.launch.py")
    entry_points = next(k.value for k in setup.keywords if k.arg == "entry_points")
    scripts = [_value(item, constants) for item in ast.walk(entry_points)
               if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    assert "estimator_node = mb_estimation.ros.ros_node:main" in scripts
    assert "exciter_node = mb_estimation.ros.ros_exciter:main" in scripts


# --------------------------------------------------------------------------------------------
# the node module without ROS
# --------------------------------------------------------------------------------------------


def test_launch_helpers_import_without_rclpy_or_the_estimator():
    code = ("import sys; import mb_estimation.ros.ros_common as m; "
            "print(callable(m.config_topics), callable(m.write_fused), "
            "'rclpy' in sys.modules, 'jax' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=True)
    assert done.stdout.split() == ["True", "True", "False", "False"]


def test_the_node_module_says_it_needs_rclpy():
    code = ("import sys; sys.modules['rclpy'] = None  # as on a machine without ROS 2\n"
            "try:\n"
            "    import mb_estimation.ros.ros_node\n"
            "except ModuleNotFoundError as raised:\n"
            "    print(raised.name, 'mb_estimation[ros]' in str(raised))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=True)
    assert done.stdout.split() == ["rclpy", "True"]


def test_mb_estimation_node_remaps_the_inputs_to_the_configs_topics(tmp_path, monkeypatch):
    """The node subscribes to relative names; ``mb-estimation node`` remaps them.

    To the config's ``recording`` topics, as the launch files do by default.
    """
    from mb_estimation.cli import main as cli
    from mb_estimation.cli import node as node_command

    assert ros_common.input_remappings("/js", None) == [("joint_states", "/js")]
    recording = yaml.safe_load((REPO / "config" / "furuta_synthetic.yaml").read_text()).get(
        "recording") or {}
    config = write_config(tmp_path / "rig.yaml", recording={
        **recording, "joint_states_topic": "/rig/joint_states", "voltage_topic": "/rig/voltage"})
    started = []

    class Transport:
        @staticmethod
        def main(argv):
            started.append(argv)
            return 0

    monkeypatch.setattr(node_command, "ros_transport", lambda args: Transport)
    assert cli(["node", "--config", config]) == 0
    argv = started[0]
    remaps = {argv[i + 1] for i, word in enumerate(argv) if word == "-r"}
    assert {"joint_states:=/rig/joint_states", "control_voltage:=/rig/voltage"} <= remaps
    assert cli(["node", "--config", config, "--output-dir", str(tmp_path / "fused")]) == 0
    settings = {started[1][i + 1] for i, word in enumerate(started[1]) if word == "-p"}
    assert f"output_dir:={tmp_path / 'fused'}" in settings
    (tmp_path / "a_file").write_text("")  # an output that cannot be a folder: before rclpy
    assert cli(["node", "--config", config, "--output-dir", str(tmp_path / "a_file")]) == 2
    assert len(started) == 2



def test_compile_only_warms_the_config_the_node_makes(ros_context, tmp_path, monkeypatch):
    """``--compile-only`` runs the warm-up of the very config the node makes of its parameters.

    The same config compiles the same programs, so a node started afterwards loads them; with
    the cache off there is nothing to keep: one line, exit 2, and no rclpy either way.
    """
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from mb_estimation import numerics
    from mb_estimation.cli import main as cli
    from mb_estimation.cli import node as node_command
    from mb_estimation.online.core import EstimatorCore
    from mb_estimation.ros.ros_parameters import declare_node_parameters

    warmed = []
    monkeypatch.setattr(EstimatorCore, "warm_up", lambda core: warmed.append(core.config))
    monkeypatch.setattr(numerics, "configure_jax", lambda: tmp_path / "xla")
    monkeypatch.setattr(node_command, "ros_transport", lambda args: pytest.fail("rclpy started"))
    config = write_config(tmp_path / "rig.yaml")
    overrides = {"free": "J_Azz,K,b1", "set": "J_Azz=0.012,b1=2e-4", "compliance": 1e-6}
    assert cli(["node", "--config", config, "--free", overrides["free"], "--set",
                overrides["set"], "--compliance", "1e-6", "--compile-only"]) == 0
    node = Node("compile_only_check", context=ros_context, parameter_overrides=[
        Parameter(name, value=value) for name, value in overrides.items()])
    try:
        made = declare_node_parameters(node, load_config(config)).config
    finally:
        node.destroy_node()
    assert warmed == [made] and tuple(made.free) == ("J_Azz", "K", "b1")
    monkeypatch.setattr(numerics, "configure_jax", lambda: None)
    assert cli(["node", "--config", config, "--compile-only"]) == 2
    assert len(warmed) == 1

def test_config_topics(tmp_path, monkeypatch):
    assert ros_common.config_topics(REPO / "config" / "furuta.yaml") == \
        ("/joint_states", "/control_voltage")
    assert ros_common.config_topics(tmp_path / "missing.yaml") == \
        ("/joint_states", "/control_voltage")
    custom = tmp_path / "custom.yaml"
    custom.write_text(yaml.safe_dump({"rig": "furuta", "recording": {
        "joint_states_topic": "/rig/joint_states", "voltage_topic": "/rig/u"}}))
    assert ros_common.config_topics(custom) == ("/rig/joint_states", "/rig/u")
    custom.write_text(yaml.safe_dump({"recording": {
        "joint_states_topic": "/js", "voltage_type": "sensor_msgs/msg/JointState"}}))
    assert ros_common.config_topics(custom) == ("/js", None)
    # every spelling the config accepts (config.sections normalises it the same way)
    for spelling in ("sensor_msgs/JointState", "sensor_msgs::msg::JointState"):
        custom.write_text(yaml.safe_dump({"recording": {
            "joint_states_topic": "/js", "voltage_type": spelling}}))
        assert ros_common.config_topics(custom) == ("/js", None)
    custom.write_text("recording: [unclosed")
    assert ros_common.config_topics(custom) == ("/joint_states", "/control_voltage")
    # a built-in name is found as the node finds it (mb_estimation.config.resolve_config)
    from mb_estimation.config import builtin

    share = tmp_path / "share"
    share.mkdir()
    (share / "rig.yaml").write_text(yaml.safe_dump({"recording": {"voltage_topic": "/rig/u"}}))
    monkeypatch.setattr(builtin, "_config_dirs", lambda: [share])
    monkeypatch.chdir(tmp_path)
    assert ros_common.config_topics("rig") == ("/joint_states", "/rig/u")
    assert ros_common.config_topics("no_such_config") == ("/joint_states", "/control_voltage")


@pytest.fixture(scope="module")
def furuta():
    return load_config("furuta")


def test_apply_node_overrides(furuta):
    assert ros_common.apply_node_overrides(furuta) is furuta
    changed = ros_common.apply_node_overrides(furuta, free="J_Azz, K", set_text="K=0.2",
                                            compliance=1e-5)
    assert list(changed.free) == ["J_Azz", "K"]
    assert changed.parameters["K"] == 0.2
    assert changed.parameters["eps_lin1"] == 1e-5
    with pytest.raises(ConfigError, match=r"^ROS parameter free: free\.no_such_parameter: not "
                                          r"a parameter of rig furuta"):
        ros_common.apply_node_overrides(furuta, free="no_such_parameter")
    with pytest.raises(ConfigError, match=r"^ROS parameter set: K: expected a number"):
        ros_common.apply_node_overrides(furuta, set_text="K=abc")
    with pytest.raises(ConfigError, match=r"^ROS parameter set: parameters\.m_A: must be "
                                          r"positive"):
        ros_common.apply_node_overrides(furuta, set_text="m_A=-1")
    with pytest.raises(ConfigError, match=r"^ROS parameter compliance: parameters\.eps_lin1: "
                                          r"must be positive"):
        ros_common.apply_node_overrides(furuta, compliance=-1.0)


def test_parse_push_mapping(furuta):
    free = list(furuta.free)
    assert ros_common.parse_push_mapping("", free) == {}
    assert ros_common.parse_push_mapping(" J_Azz:arm.inertia , K:gain,", free) == \
        {"J_Azz": "arm.inertia", "K": "gain"}
    for bad, match in (("J_Azz", "estimate_name:controller_param"),
                       ("J_Azz:", "estimate_name:controller_param"),
                       ("l1:length", "not estimated"),
                       ("K:a,K:b", "mapped twice")):
        with pytest.raises(ValueError, match=match):
            ros_common.parse_push_mapping(bad, free)


def _estimate(config, windows=3):
    names = tuple(config.free)
    values = {name: np.atleast_1d(np.asarray(config.parameters[name], dtype=float)) * 1.1
              for name in names}
    values["tilt"] = np.array([np.cos(0.01), np.sin(0.01), 0.0, 0.0])
    size = sum(3 if len(values[n]) == 4 else 1 for n in names)
    covariance = np.diag(np.full(size, 1e-8))
    covariance[0, 0] = np.inf  # J_Axx: not determined
    return ParameterEstimate(names=names, values=values, covariance=covariance, windows=windows)


def test_estimate_parameter_values(furuta):
    initial = ros_common.estimate_parameter_values(furuta, None)
    assert {k for k in initial if k.startswith("estimate.")} == \
        {f"estimate.{name}" for name in furuta.parameters}
    assert {k for k in initial if k.startswith("estimate_std.")} == \
        {f"estimate_std.{name}" for name in furuta.free}
    assert initial["estimate.l1"] == furuta.parameters["l1"]
    assert initial["estimate.tilt"] == [1.0, 0.0, 0.0, 0.0]
    assert initial["estimate_std.K"] == ros_common.NOT_DETERMINED
    assert initial["estimate_std.tilt"] == [ros_common.NOT_DETERMINED] * 3
    estimate = _estimate(furuta)
    values = ros_common.estimate_parameter_values(furuta, estimate)
    assert set(values) == set(initial)
    assert values["estimate.K"] == pytest.approx(0.11)
    assert values["estimate.l1"] == furuta.parameters["l1"]
    assert values["estimate_std.J_Axx"] == ros_common.NOT_DETERMINED
    assert values["estimate_std.K"] == pytest.approx(1e-4)
    assert len(values["estimate.tilt"]) == 4 and len(values["estimate_std.tilt"]) == 3
    for value in values.values():
        assert all(np.isfinite(np.atleast_1d(value)))


def test_write_fused_reads_back_like_calibrate_output(furuta, tmp_path):
    estimate = _estimate(furuta, windows=4)
    folder = ros_common.write_fused(tmp_path / "out", estimate, furuta, node_name="rig_estimator")
    rig, values = read_parameters(folder / "parameters.yaml")
    assert rig == "furuta"
    assert set(values) == set(furuta.parameters)
    assert values["K"] == pytest.approx(0.11)
    assert values["l1"] == furuta.parameters["l1"]
    assert values["tilt"] == pytest.approx(list(estimate.values["tilt"]))
    document = yaml.safe_load((folder / "parameters.yaml").read_text())
    assert document["parameters"]["J_Axx"]["excited"] is False
    assert document["parameters"]["J_Axx"]["std"] == float("inf")
    assert document["parameters"]["K"]["excited"] is True
    for name, entry in document["parameters"].items():  # std at most half the value, as calibrate
        if name != "tilt":
            assert entry["excited"] is (entry["std"] <= 0.5 * abs(entry["value"])), name
    assert any(not entry["excited"] and np.isfinite(entry["std"])
               for entry in document["parameters"].values())  # a finite std can be too wide
    assert document["parameters"]["K"]["unit"] == furuta.rig_spec.parameter("K").unit
    assert document["fit"]["windows"] == 4 and document["fit"]["status"] == "fused"
    assert len(document["parameters"]["tilt"]["std"]) == 3
    covariance = document["covariance"]  # the fused one, in calibrate's layout
    assert covariance["rows"][-3:] == ["tilt[0]", "tilt[1]", "tilt[2]"]
    assert np.array(covariance["matrix"]) == pytest.approx(estimate.covariance)
    method = document["method"]  # as each window was fitted: one level at the node's step
    assert (method["step_s"], method["simulation_refinement"],
            method["advanced"]["refinement_levels"]) == (1e-3, "off", 1)
    ros = yaml.safe_load((folder / "ros_parameters.yaml").read_text())
    parameters = ros["rig_estimator"]["ros__parameters"]
    assert set(parameters) == {f"estimate.{name}" for name in furuta.parameters} | {
        f"estimate_std.{name}" for name in document["parameters"]}
    assert parameters["estimate.K"] == pytest.approx(0.11)
    assert parameters["estimate_std.J_Axx"] == -1.0  # not determined, as the node says it
    assert parameters["estimate_std.K"] == document["parameters"]["K"]["std"]
    assert len(parameters["estimate_std.tilt"]) == 3
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary left
    # the fused values as URDF too (the config has none: generated), read back the same
    back = tmp_path / "back.yaml"
    back.write_text(f"rig: furuta\nurdf: {{file: {folder / 'calibrated.urdf'}}}\n"
                    f"parameters: {{K: 1.0}}\n")
    for name in ("J_Azz", "J_Byy", "b1", "b2", "l2"):
        assert load_config(back).parameters[name] == pytest.approx(values[name], rel=1e-12)


# --------------------------------------------------------------------------------------------
# with ROS 2 (skipped without rclpy / launch_ros)
# --------------------------------------------------------------------------------------------


@pytest.fixture
def ros_context(ros_network):
    rclpy = pytest.importorskip("rclpy")
    pytest.importorskip("diagnostic_msgs")
    pytest.importorskip("std_srvs")
    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=int(os.environ.get("MB_TEST_ROS_DOMAIN", "77")))
    yield context
    from mb_estimation.ros.ros_player import try_shutdown

    try_shutdown(context)


def _wait(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_ros_node_serves_diagnostics_parameters_and_services(ros_context, tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64MultiArray
    from std_srvs.srv import Trigger
    from test_node_core import _config, _fake_estimator, _feed

    from mb_estimation.online.core import with_node

    config = with_node(_config(), name="mb_estimator_test")
    node = ros_node.EstimatorNode(
        config, estimator=_fake_estimator, context=ros_context,
        parameter_overrides=[Parameter("output_dir", value=str(tmp_path / "out"))])
    probe = Node("mb_estimation_probe", context=ros_context)
    received = {"diagnostics": [], "fused": []}
    probe.create_subscription(DiagnosticArray, "/diagnostics",
                              received["diagnostics"].append, 10)
    probe.create_subscription(Float64MultiArray, "/mb_estimator_test/fused_parameters",
                              received["fused"].append, 10)
    executor = MultiThreadedExecutor(context=ros_context)
    executor.add_node(node)
    executor.add_node(probe)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    spinner.start()
    try:
        assert _wait(lambda: received["diagnostics"]), "no diagnostics within 20 s"
        status = received["diagnostics"][-1].status[0]
        assert status.name == "mb_estimator_test: estimator"
        assert {kv.key for kv in status.values} >= {"windows_done", "windows_accepted"}

        expected = {"/mb_estimator_test/reset", "/mb_estimator_test/calibrate_now"}
        assert _wait(lambda: expected <= set(dict(probe.get_service_names_and_types())))
        services = dict(probe.get_service_names_and_types())
        assert all(services[name] == ["std_srvs/srv/Trigger"] for name in expected)
        client = probe.create_client(Trigger, "/mb_estimator_test/calibrate_now")
        assert client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(Trigger.Request())
        assert _wait(future.done)
        assert future.result().success is False  # nothing buffered yet

        assert node.get_parameter("estimate.l1").value == config.parameters["l1"]
        assert node.get_parameter("estimate_std.K").value == ros_common.NOT_DETERMINED
        rejected = node.set_parameters([Parameter("estimate.K", value=1.0)])[0]
        assert not rejected.successful and "estimator" in rejected.reason

        _feed(node.core, 6.0)  # one accepted window through the core (fake estimator)
        assert _wait(lambda: received["fused"]), "no fused parameters"
        assert _wait(lambda: node.get_parameter("estimate_std.K").value > 0)
        assert node.get_parameter("estimate.J_Azz").value != config.parameters["J_Azz"]
        assert _wait(lambda: (tmp_path / "out" / "parameters.yaml").is_file())
        labels = received["fused"][-1].layout.dim[1].label.split(",")
        assert "J_Azz" in labels and "tilt_rx" in labels
    finally:
        executor.shutdown(timeout_sec=2.0)
        node.close()
        node.destroy_node()
        probe.destroy_node()


def test_node_settings_are_parameters_defaulting_to_the_config(ros_context):
    """window_s, stride_s, ...: ROS parameters, checked as the config is; inputs remapped."""
    from rclpy.parameter import Parameter
    from test_node_core import _config, _fake_estimator

    config = _config()
    node = ros_node.EstimatorNode(
        config, estimator=_fake_estimator, context=ros_context,
        parameter_overrides=[Parameter("window_s", value=3)],  # an integer, as -p writes it
        cli_args=["--ros-args", "-r", "joint_states:=/rig/joint_states",
                  "-r", "control_voltage:=/rig/voltage"])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert set(ros_common.NODE_SETTINGS) <= {name for name in node._parameters}
        assert node.get_parameter("stride_s").value == config.node.stride_s
        assert node.get_parameter("state_file").value == ""
        assert node.config.node.window_s == 3.0
        assert {s.topic_name for s in node.subscriptions} == {"/rig/joint_states",
                                                              "/rig/voltage"}
    finally:
        node.destroy_node()
    node = ros_node.EstimatorNode(config, estimator=_fake_estimator, context=ros_context,
                                  parameter_overrides=[Parameter("drift_alarm_std", value=-2.0)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert "ROS parameter: node.drift_alarm_std" in node.configure_error
        assert node.core is None  # nothing made
    finally:
        node.destroy_node()


def test_the_node_reads_the_rig_from_robot_description(ros_context, tmp_path, monkeypatch):
    """urdf.file robot_description: the node's parameter, else the transient-local topic."""
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String
    from test_node_core import _fake_estimator
    from test_urdf import G5, model_frames_urdf

    from mb_estimation.ros import ros_parameters

    config = tmp_path / "from_description.yaml"
    config.write_text("rig: furuta\nurdf: {file: robot_description}\nparameters: {K: 1.0}\n"
                      "free: {J_Azz: {}, J_Byy: {}}\nnode: {warm_up: false}\n")

    def configured(*overrides):
        node = ros_node.EstimatorNode(
            estimator=_fake_estimator, node_name="urdf_estimator", context=ros_context,
            parameter_overrides=[Parameter("config", value=str(config)), *overrides])
        try:
            outcome = node.trigger_configure()
            return outcome, node.config, node.configure_error
        finally:
            node.destroy_node()

    outcome, from_parameter, _ = configured(Parameter("robot_description",
                                                      value=model_frames_urdf()))
    assert outcome == TransitionCallbackReturn.SUCCESS
    assert from_parameter.parameters["J_Byy"] == G5["J_Byy"]
    assert from_parameter.recording.joints["pendulum"].name == "pendulum_joint"

    served = Node("robot_state_publisher_stand_in", context=ros_context)
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
    publisher = served.create_publisher(String, "/robot_description", latched)
    publisher.publish(String(data=model_frames_urdf({**G5, "m_B": 0.5})))
    try:
        outcome, from_topic, _ = configured()  # the node starts after the message was sent
    finally:
        served.destroy_node()
    assert outcome == TransitionCallbackReturn.SUCCESS
    assert from_topic.parameters["m_B"] == 0.5

    monkeypatch.setattr(ros_parameters, "ROBOT_DESCRIPTION_WAIT_S", 0.5)
    outcome, _, error = configured()  # nobody serves it now
    assert outcome == TransitionCallbackReturn.FAILURE
    assert "robot_description" in error and "\n" not in error


def test_the_node_goes_through_its_lifecycle(ros_context):
    """Configure makes, activate subscribes, deactivate unsubscribes, cleanup removes; twice."""
    from test_node_core import _config, _fake_estimator

    config = _config()
    node = ros_node.EstimatorNode(config, estimator=_fake_estimator, context=ros_context)
    topic = "/" + ros_common.JOINT_STATES_INPUT  # relative, in the root namespace

    def subscribed():
        return {s.topic_name for s in node.subscriptions}

    def published():
        return {p.topic_name for p in node.publishers}

    try:
        assert node.core is None and not node.has_parameter("window_s")
        assert topic not in subscribed()
        made_by_rclpy = published()
        for _ in range(2):
            assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
            assert node.has_parameter("estimate.J_Azz") and node.core is not None
            assert topic not in subscribed()
            assert "/diagnostics" in published()
            assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
            assert topic in subscribed()
            assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
            assert topic not in subscribed()
            assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
            assert node.core is None and not node.has_parameter("estimate.J_Azz")
            assert published() == made_by_rclpy
        assert node.has_parameter("window_s")  # read-only: declared once
        # shut down from active: nothing of configure's left, and main stops spinning
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert not node.finalized
        node.trigger_shutdown()
        assert node.finalized and node.core is None and not list(node.timers)
        assert published() == made_by_rclpy and topic not in subscribed()
    finally:
        node.destroy_node()


def test_ros_sink_publishes_timed_messages(ros_context):
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64

    from mb_estimation.ros import players

    sender = Node("mb_estimation_sink_test", context=ros_context)
    probe = Node("mb_estimation_sink_probe", context=ros_context)
    received = []
    probe.create_subscription(JointState, "/sink_test/joint_states", received.append,
                              qos_profile_sensor_data)
    probe.create_subscription(Float64, "/sink_test/voltage", received.append, 10)
    sink = ros_node.ros_sink(sender)
    sink.publisher("/sink_test/joint_states", players.JOINT_STATE)
    sink.publisher("/sink_test/voltage", players.FLOAT64)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(probe)
    try:
        assert sink.wait_for_subscribers(1, 10.0)
        stamp = 1_700_000_000_123_456_789
        payload = players.JointStatePayload(("arm", "pendulum"), np.array([0.1, 0.2]),
                                            np.array([0.0, 0.0]), np.array([]))
        sink(players.TimedMessage(stamp, "/sink_test/joint_states", players.JOINT_STATE,
                                  payload))
        sink(players.TimedMessage(stamp, "/sink_test/voltage", players.FLOAT64, 1.5))
        deadline = time.monotonic() + 10.0
        while len(received) < 2 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        joint = next(m for m in received if isinstance(m, JointState))
        assert (joint.header.stamp.sec, joint.header.stamp.nanosec) == (1_700_000_000,
                                                                        123_456_789)
        assert list(joint.position) == [0.1, 0.2]
        assert next(m for m in received if isinstance(m, Float64)).data == 1.5
        assert sink.counts == {"/sink_test/joint_states": 1, "/sink_test/voltage": 1}
    finally:
        executor.shutdown()
        sender.destroy_node()
        probe.destroy_node()


def test_main_fails_clearly_without_config():
    pytest.importorskip("rclpy")
    autostart = ["-p", "autostart:=true"]
    assert ros_node.main(["estimator_node", "--ros-args", *autostart]) == 2
    assert ros_node.main(["estimator_node", "--ros-args", *autostart, "-p",
                          "config:=/no/such/config.yaml"]) == 2
    assert ros_node.main(["estimator_node", "a.yaml", "b.yaml"]) == 2
    assert ros_node.main(["estimator_node", "--ros-args", "--params-file",
                          "/no/such/params.yaml"]) == 2


def _load_launch_module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path, arguments", [(ESTIMATOR_LAUNCH, ESTIMATOR_ARGUMENTS
                                              | set(ros_common.NODE_SETTINGS)),
                                             (BAG_LAUNCH, BAG_ARGUMENTS),
                                             (EXCITER_LAUNCH, EXCITER_ARGUMENTS)],
                         ids=lambda v: getattr(v, "name", ""))
def test_launch_descriptions_load_with_launch_ros(path, arguments, ament_prefix):
    pytest.importorskip("launch_ros")
    description = _load_launch_module(path).generate_launch_description()
    assert {argument.name for argument in description.get_launch_arguments()} == arguments


def test_estimator_launch_runs_the_node_under_the_launch_system(ros_context, ament_prefix,
                                                                tmp_path):
    """The real launch system starts estimator_node with the launch arguments applied.

    Its node name, the remapped input topics, the free set and a node setting (the stride);
    SIGINT shuts it down cleanly.
    (The config skips the compile warm-up: this is about the launch file, not the estimate.)
    """
    pytest.importorskip("launch_ros")
    from processes import Process, wait_until
    from rclpy.node import Node

    config_path = write_config(tmp_path / "furuta_no_warm_up.yaml", node={"warm_up": False})
    domain = int(os.environ.get("MB_TEST_ROS_DOMAIN", "77"))
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain))
    launch = Process([sys.executable, "-c", LAUNCH_SCRIPT, str(ESTIMATOR_LAUNCH),
                      f"config:={config_path}", "joint_states_topic:=/rig/joint_states",
                      "voltage_topic:=/rig/voltage", "free:=J_Azz,J_Byy,b1,b2",
                      "compliance:=1e-4", "node_name:=launched_estimator", "stride_s:=7.5"],
                     env)
    probe = Node("mb_estimation_launch_probe", context=ros_context)
    try:
        launch.wait_for("mb_estimation node ready", 300)

        def subscribers(topic):
            return {info.node_name for info in probe.get_subscriptions_info_by_topic(topic)}

        assert wait_until(lambda: "launched_estimator" in subscribers("/rig/joint_states")
                          and "launched_estimator" in subscribers("/rig/voltage"), 20)
        topics = dict(probe.get_topic_names_and_types())
        assert topics["/launched_estimator/fused_parameters"] == ["std_msgs/msg/Float64MultiArray"]
        assert "/joint_states" not in topics or \
            "launched_estimator" not in subscribers("/joint_states")
        assert "estimating J_Azz, J_Byy, b1, b2 every 7.5 s" in "\n".join(launch.lines)
    finally:
        status = launch.stop(signal_first=signal.SIGINT)
        probe.destroy_node()
    assert status == 0, launch.tail()
    assert not any("Traceback" in line for line in launch.lines), launch.tail()


def test_a_launch_whose_node_cannot_be_configured_exits_non_zero(ros_context, ament_prefix,
                                                                  tmp_path):
    """A config the node refuses: the launch ends at once, exit status 1, the reason logged."""
    pytest.importorskip("launch_ros")
    from processes import Process

    domain = int(os.environ.get("MB_TEST_ROS_DOMAIN", "77"))
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain))
    missing = tmp_path / "missing.yaml"
    launch = Process([sys.executable, "-c", LAUNCH_SCRIPT, str(ESTIMATOR_LAUNCH),
                      f"config:={missing}", "node_name:=refused_estimator"], env)
    try:
        launch.process.wait(120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the launch still ran after 120 s:\n{launch.tail(40)}")
    finally:
        status = launch.stop()
    log = launch.tail(40)
    assert status == 1, log
    assert "the estimator node could not be configured" in log and str(missing) in log, log


#: A lifecycle node as the launch sees it, publishing no transition events: it answers
#: ``change_state`` requests (refusing those in ``REFUSED``) and logs each answer.
SILENT_LIFECYCLE_NODE = """
import sys
import rclpy
from lifecycle_msgs.srv import ChangeState
from rclpy.executors import ExternalShutdownException

REFUSED = {refused}
rclpy.init(args=sys.argv)
node = rclpy.create_node("silent")

def answer(request, response):
    response.success = request.transition.id not in REFUSED
    print(f"transition {{request.transition.id}} answered {{response.success}}", flush=True)
    return response

node.create_service(ChangeState, "~/change_state", answer)
try:
    rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
"""

SILENT_LAUNCH = """
from launch import LaunchDescription
from launch.actions import LogInfo
from launch_ros.actions import LifecycleNode

from mb_estimation.ros.ros_launch import drive_lifecycle


def generate_launch_description():
    node = LifecycleNode(package="mb_estimation", executable="silent_lifecycle",
                         name="silent_lifecycle", namespace="", output="screen")
    return LaunchDescription([node, *drive_lifecycle(node, what="the silent node",
                                                     when_active=[LogInfo(msg="WHEN ACTIVE")])])
"""


@pytest.mark.parametrize("refused", [(), (1,)], ids=["accepted", "configure_refused"])
def test_the_launch_follows_the_node_s_answers_not_its_transition_events(
        ros_context, ament_prefix, tmp_path, refused):
    """The lifecycle is driven by ``change_state``'s answers: a transition event can be lost.

    A node that publishes none (as a launch sees one whose events went out before its
    subscription was matched): activated, then the launch's actions run; configure refused,
    the launch exits 1 at once.
    """
    pytest.importorskip("launch_ros")
    from processes import Process

    executable = ament_prefix / "lib" / "mb_estimation" / "silent_lifecycle"
    node_script = tmp_path / "silent_lifecycle.py"
    node_script.write_text(SILENT_LIFECYCLE_NODE.format(refused=set(refused) or "set()"))
    executable.write_text(f'#!/bin/sh\nexec {sys.executable} {node_script} "$@"\n')
    executable.chmod(0o755)
    launch_file = tmp_path / "silent.launch.py"
    launch_file.write_text(SILENT_LAUNCH)
    domain = int(os.environ.get("MB_TEST_ROS_DOMAIN", "77")) + 3
    launch = Process([sys.executable, "-c", LAUNCH_SCRIPT, str(launch_file)],
                     dict(os.environ, ROS_DOMAIN_ID=str(domain)))
    try:
        if refused:
            try:
                launch.process.wait(60)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the launch still ran after 60 s:\n{launch.tail(40)}")
        else:
            launch.wait_for("WHEN ACTIVE", 60)
    finally:
        status = launch.stop(signal.SIGINT)
    log = launch.tail(40)
    if refused:
        assert status == 1 and "the silent node could not be configured" in log, log
        assert "transition 1 answered False" in log and "transition 3" not in log, log
    else:
        assert "transition 1 answered True" in log and "transition 3 answered True" in log, log


def test_bag_calibration_launch_turns_a_bag_into_parameters_yaml(ros_network, ament_prefix,
                                                                 node_compile_cache, tmp_path):
    """bag_calibration.launch.py with the package's own player: bag in, parameters.yaml out.

    A 10 s multisine of furuta_synthetic (SPOOK at 1e-4 s, its own hinges, 100 Hz), calibrated
    from Table 1's start values at twice the recorded speed.
    """
    pytest.importorskip("launch_ros")
    from processes import Process

    from mb_estimation.cli import main as cli

    truth_path = write_config(tmp_path / "truth.yaml")
    fit_path = write_config(tmp_path / "fit.yaml", parameters=TABLE_1)
    truth = load_config(truth_path)
    bag = tmp_path / "multisine"
    assert cli(["simulate", "multisine", "--config", truth_path, "--output", str(bag),
                "--duration", "10", "--rate", "100"]) == 0

    domain = int(os.environ.get("MB_TEST_ROS_DOMAIN", "77")) + 1
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain), MB_ESTIMATION_CACHE_DIR=node_compile_cache)
    output = tmp_path / "calibration"
    launch = Process([sys.executable, "-c", LAUNCH_SCRIPT, str(BAG_LAUNCH), f"bag:={bag}",
                      f"config:={fit_path}", "rate:=2.0", f"output:={output}",
                      "player:=mb_estimation"], env)
    launch.process.wait(300)
    launch.stop()
    log = launch.tail(40)
    assert launch.process.returncode == 0, log
    assert "bag played" in log and "success=True" in log, log
    document = yaml.safe_load((output / "parameters.yaml").read_text())
    for name in ("J_Azz", "J_Byy"):
        entry = document["parameters"][name]
        assert entry["std"] > 0
        assert entry["value"] == pytest.approx(float(truth.parameters[name]), rel=0.05), \
            (name, launch.tail(200))
    ros = yaml.safe_load((output / "ros_parameters.yaml").read_text())
    assert ros["mb_estimator"]["ros__parameters"]["estimate.J_Azz"] == \
        document["parameters"]["J_Azz"]["value"]


@pytest.mark.parametrize("path", [ESTIMATOR_LAUNCH, BAG_LAUNCH], ids=lambda p: p.name)
def test_launch_parameters_are_parameters_the_node_declares(path, ros_context):
    """A parameter renamed in the node (or the launch file) breaks this test, not a rig."""
    from test_node_core import _fake_estimator

    tree = _tree(path)
    constants = _constants(tree)
    node_call = _keywords(_calls(tree, "LifecycleNode")[0], constants)
    names = [_value(key, constants) for key in node_call["parameters"].elts[0].keys]
    assert all(isinstance(name, str) for name in names) and "config" in names
    node = ros_node.EstimatorNode(load_config("furuta_synthetic"),
                                  estimator=_fake_estimator, context=ros_context)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        names += list(ros_common.NODE_SETTINGS)  # estimator.launch.py passes those given
        # the shipped parameter file, its commented-out node settings included
        text = (REPO / "config" / "ros" / "estimator_node.yaml").read_text()
        shipped = yaml.safe_load(text)["/**"]["ros__parameters"]
        names += list(shipped) + re.findall(r"^    # ([\w.]+):", text, re.MULTILINE)
        missing = [name for name in names if not node.has_parameter(name)]
        assert not missing, f"{path.name} sets parameters the node does not declare: {missing}"
    finally:
        node.destroy_node()
