"""Tests of mb_estimation.config: loading, validation messages and overrides."""

import copy
import dataclasses
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from mb_estimation.config import (
    Bounds,
    Config,
    ConfigError,
    JointMapping,
    MethodSettings,
    NodeSettings,
    RecordingSettings,
    SimulationSettings,
    apply_overrides,
    builtin_config_names,
    builtin_config_path,
    load_config,
    parse_assignments,
    parse_config,
    parse_free_list,
    resolve_config,
)
from mb_estimation.rigs.parameters import (
    COMPLIANCE_PARAMETERS,
    FURUTA,
    FURUTA_PAPER_FREE,
    PENDULUM,
)

REPO = Path(__file__).resolve().parents[1]

SHIPPED = ("furuta", "furuta_synthetic", "pendulum")


def raw(name: str) -> dict:
    """The plain YAML data of a shipped config, for mutating."""
    with open(builtin_config_path(name), encoding="utf-8") as stream:
        return yaml.safe_load(stream)


def write(tmp_path, data, name="x.yaml"):
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def load_error(tmp_path, data) -> str:
    """Load ``data`` from a file and return the ConfigError message (which must name the file)."""
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message
    return message[len(f"{path}: "):]


def furuta(**changes) -> dict:
    data = raw("furuta")
    data.update(changes)
    return data


# --------------------------------------------------------------------------------------------
# Shipped configurations


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_load(name):
    path = builtin_config_path(name)
    assert path.is_file()
    assert path.parent.name == "config"
    config = load_config(path)
    assert isinstance(config, Config)
    assert config.source == str(path)
    assert tuple(config.parameters) == config.rig_spec.parameter_names
    # round trip through plain data (and YAML)
    assert parse_config(config.to_dict(), config.source) == config
    dumped = yaml.safe_dump(config.to_dict())
    assert parse_config(yaml.safe_load(dumped), config.source) == config


def test_builtin_names():
    assert set(SHIPPED) <= set(builtin_config_names())
    assert builtin_config_path("furuta.yaml") == builtin_config_path("furuta")


def test_furuta_is_table_1():
    config = load_config(builtin_config_path("furuta"))
    p = config.parameters
    assert config.rig == "furuta" and config.friction is None
    assert (p["l1"], p["lA"], p["l2"], p["m_A"], p["m_B"]) == (0.128, 0.248, 0.92, 0.238, 0.428)
    assert p["J_Bxx"] == 1e-4 and p["J_shaft"] == 4e-4 and p["K"] == 0.1
    assert all(p[n] == 0.01 for n in ("J_Axx", "J_Ayy", "J_Azz", "J_Byy", "J_Bzz"))
    assert all(p[n] == 1e-4 for n in ("b1", "b2", "mu1", "mu2"))
    assert all(p[n] == 1e-4 for n in COMPLIANCE_PARAMETERS["furuta"])
    assert p["tau1"] == p["tau2"] == 0.02 and p["r1"] == p["r2"] == 1.0
    assert p["tilt"] == (1.0, 0.0, 0.0, 0.0)
    assert set(config.free) == set(FURUTA_PAPER_FREE)
    assert config.free["J_Azz"] == Bounds(FURUTA.parameter("J_Azz").lower, math.inf)
    assert config.free["tilt"] == Bounds(-math.inf, math.inf)
    method, advanced = config.method, config.advanced
    assert (method.step_s, method.kappa, method.max_iterations) == (None, 100.0, 60)
    assert (advanced.gradient_tolerance, advanced.step_tolerance) == (1e-2, 1e-6)
    assert config.recording.joints == {"arm": JointMapping("arm"),
                                       "pendulum": JointMapping("pendulum")}
    assert "J_Azz" not in config.fixed_parameters and config.fixed_parameters["l1"] == 0.128


def test_furuta_synthetic_is_table_g5():
    config = load_config(builtin_config_path("furuta_synthetic"))
    p = config.parameters
    assert (p["J_Axx"], p["J_Ayy"], p["J_Azz"]) == (1e-4, 0.003, 0.003)
    assert (p["J_Bxx"], p["J_Byy"], p["J_Bzz"]) == (1e-4, 0.004, 0.004)
    assert (p["b1"], p["b2"], p["J_shaft"]) == (1e-3, 1e-4, 1e-4)
    assert p["mu1"] == p["mu2"] == 0.0 and p["K"] == 1.0  # not in G.5; see the config
    assert all(p[n] == 1e-6 for n in COMPLIANCE_PARAMETERS["furuta"])
    assert config.free_names == ("J_Azz", "J_Byy", "b1", "b2")
    assert config.simulation.dt == 1e-4


def test_pendulum_config():
    config = load_config(builtin_config_path("pendulum"))
    assert config.rig == "pendulum" and config.friction == "dry"
    assert config.free_names == ("J_P", "b", "r_mu")
    assert config.parameters["eps_lin"] == config.parameters["eps_rot"] == 1e-4
    assert config.parameters["tau"] == 0.02
    assert tuple(config.recording.joints) == PENDULUM.joints


def test_load_builtin_by_bare_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config("furuta") == load_config(builtin_config_path("furuta"))


def test_unknown_builtin():
    with pytest.raises(ConfigError, match=r"no such built-in configuration .*furuta"):
        builtin_config_path("furutaa")


def test_resolve_config_takes_a_path_or_a_bare_builtin_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config("furuta") == builtin_config_path("furuta")
    own = write(tmp_path, furuta(), name="furuta")  # an existing file wins over the name
    assert resolve_config("furuta") == own.relative_to(tmp_path)
    # every name the message lists is usable, the examples too
    assert (resolve_config("examples/odrive_furuta")
            == builtin_config_path("examples/odrive_furuta"))
    for missing in ("furuta.yaml", "nowhere/furuta", "furutaa"):
        with pytest.raises(ConfigError, match=rf"^{re.escape(missing)}: file not found "
                                              r"\(built-in configurations, usable by name: "):
            resolve_config(missing)


def test_schema_and_resolver_import_without_the_rigs():
    """The launch files read defaults and find configs without importing JAX."""
    code = ("import sys; from mb_estimation.config import RecordingSettings, resolve_config; "
            "resolve_config('furuta'); print('mb_estimation.rigs' in sys.modules, "
            "'jax' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_config_is_frozen():
    config = load_config(builtin_config_path("furuta"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.rig = "pendulum"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.method.step_s = 1.0


def test_error_is_value_error():
    assert issubclass(ConfigError, ValueError)


# --------------------------------------------------------------------------------------------
# Validation messages: file level


def test_file_not_found(tmp_path):
    path = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: file not found"):
        load_config(path)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)


def test_invalid_yaml_syntax(tmp_path):
    message = load_error(tmp_path, "rig: furuta\nparameters: {l1: 0.1\nfree: []\n")
    assert message.startswith("invalid YAML at line ")


def test_duplicate_yaml_key(tmp_path):
    text = "rig: furuta\nparameters:\n  l1: 0.1\n  l1: 0.2\n"
    assert re.match(r"invalid YAML at line 4, column 3: found duplicate key 'l1'",
                    load_error(tmp_path, text))


def test_empty_file(tmp_path):
    assert "empty" in load_error(tmp_path, "# nothing\n")


def test_top_level_not_a_mapping(tmp_path):
    assert "expected a mapping" in load_error(tmp_path, "- rig\n- furuta\n")


def test_unknown_top_level_key(tmp_path):
    data = furuta()
    data["paramters"] = data.pop("parameters")
    message = load_error(tmp_path, data)
    assert message.startswith("unknown top-level key 'paramters'; did you mean 'parameters'?")


def test_unknown_rig(tmp_path):
    message = load_error(tmp_path, furuta(rig="furrta"))
    assert message.startswith("rig: unknown rig 'furrta'; did you mean 'furuta'?")
    assert "furuta, pendulum" in message


def test_missing_rig(tmp_path):
    data = furuta()
    del data["rig"]
    assert load_error(tmp_path, data).startswith("rig: missing")


def test_unknown_friction_model(tmp_path):
    data = raw("pendulum")
    data["friction"] = "coulomb"
    message = load_error(tmp_path, data)
    assert message.startswith("friction: unknown friction model 'coulomb'")
    assert "viscous, dry, stribeck" in message


def test_friction_on_furuta(tmp_path):
    message = load_error(tmp_path, furuta(friction="dry"))
    assert message.startswith("friction: only the pendulum rig")


def test_drift_correction_is_a_boolean_off_by_default(tmp_path):
    assert parse_config(furuta()).advanced.drift_correction is False
    config = parse_config(furuta(advanced={"drift_correction": True}))
    assert config.advanced.drift_correction is True
    assert parse_config(config.to_dict()) == config
    message = load_error(tmp_path, furuta(advanced={"drift_correction": "yes"}))
    assert message.startswith("advanced.drift_correction: expected true or false, got 'yes'")


def test_pendulum_friction_defaults_to_dry():
    data = raw("pendulum")
    del data["friction"]
    assert parse_config(data).friction == "dry"


# --------------------------------------------------------------------------------------------
# Validation messages: parameters


def test_unknown_parameter_suggests_closest(tmp_path):
    data = furuta()
    data["parameters"]["J_Azx"] = 0.01
    message = load_error(tmp_path, data)
    assert message.startswith("parameters.J_Azx: unknown parameter of rig furuta; "
                              "did you mean 'J_Azz'?")


def test_unknown_parameter_case_insensitive_suggestion(tmp_path):
    data = furuta()
    data["parameters"]["j_byy"] = data["parameters"].pop("J_Byy")
    assert "did you mean 'J_Byy'?" in load_error(tmp_path, data)


def test_missing_parameter_value(tmp_path):
    data = furuta()
    del data["parameters"]["J_Azz"]
    message = load_error(tmp_path, data)
    assert message.startswith("parameters: missing value for J_Azz (")
    assert "kg m^2" in message



def test_gravity_defaults_to_the_papers_and_takes_the_labs(tmp_path):
    """``gravity`` [m/s²] may be left out (9.82, paper §4.3); a given one is checked and used."""
    data = furuta()
    data["parameters"].pop("gravity", None)
    assert load_config(write(tmp_path, data)).parameters["gravity"] == 9.82
    data["parameters"]["gravity"] = 9.80665
    config = load_config(write(tmp_path, data))
    assert config.parameters["gravity"] == 9.80665
    assert config.fixed_parameters["gravity"] == 9.80665
    data["parameters"]["gravity"] = -9.81
    assert load_error(tmp_path, data).startswith("parameters.gravity: must be positive (gravity:")

def test_null_parameter_value_is_missing(tmp_path):
    data = furuta()
    data["parameters"]["b1"] = None
    data["parameters"]["b2"] = None
    assert load_error(tmp_path, data).startswith("parameters: missing values for b1 (")


def test_missing_parameters_section(tmp_path):
    data = furuta()
    del data["parameters"]
    assert load_error(tmp_path, data).startswith("parameters: missing; every parameter")


def test_string_for_number_exact_message(tmp_path):
    data = furuta()
    data["parameters"]["J_Azz"] = "abc"
    path = write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: parameters.J_Azz: expected a number, got 'abc'"


def test_bool_for_number(tmp_path):
    data = furuta()
    data["parameters"]["K"] = True
    assert load_error(tmp_path, data) == "parameters.K: expected a number, got a boolean (true)"


def test_list_for_number(tmp_path):
    data = furuta()
    data["parameters"]["K"] = [0.1]
    assert load_error(tmp_path, data) == "parameters.K: expected a number, got a list of 1 item"


@pytest.mark.parametrize("text", [".nan", ".inf", "-.inf"])
def test_non_finite_number(tmp_path, text):
    source = open(builtin_config_path("furuta"), encoding="utf-8").read()
    source = re.sub(r"(?m)^  K: 0\.1 ", f"  K: {text} ", source)
    message = load_error(tmp_path, source)
    assert message.startswith("parameters.K: expected a finite number")


def test_negative_mass(tmp_path):
    data = furuta()
    data["parameters"]["m_A"] = -0.238
    message = load_error(tmp_path, data)
    assert message.startswith("parameters.m_A: must be positive (m_A: mass of arm A [kg])")
    assert message.endswith("got -0.238")


def test_zero_inertia(tmp_path):
    data = furuta()
    data["parameters"]["J_Bxx"] = 0
    assert load_error(tmp_path, data).startswith("parameters.J_Bxx: must be positive")


def test_negative_friction(tmp_path):
    data = furuta()
    data["parameters"]["b2"] = -1e-4
    assert load_error(tmp_path, data).startswith("parameters.b2: must not be negative")


def test_negative_motor_gain_is_allowed():
    data = furuta()
    data["parameters"]["K"] = -0.1
    assert parse_config(data).parameters["K"] == -0.1


def test_exponent_without_dot_is_a_number(tmp_path):
    source = open(builtin_config_path("furuta"), encoding="utf-8").read()
    source = source.replace("  b1: 1.0e-4 ", "  b1: 2e-4 ")
    assert load_config(write(tmp_path, source)).parameters["b1"] == 2e-4


def test_integers_are_accepted():
    data = furuta()
    data["parameters"]["r1"] = 1
    assert parse_config(data).parameters["r1"] == 1.0
    assert isinstance(parse_config(data).parameters["r1"], float)


# quaternion


def test_non_unit_quaternion(tmp_path):
    data = furuta()
    data["parameters"]["tilt"] = [1.0, 0.1, 0.0, 0.0]
    message = load_error(tmp_path, data)
    assert message.startswith("parameters.tilt: not a unit quaternion: its norm is 1.00498")
    assert "within 1e-06" in message
    assert "normalised it reads [0.995037" in message


def test_nearly_unit_quaternion_is_renormalised():
    data = furuta()
    data["parameters"]["tilt"] = [1.0 + 5e-7, 0.0, 0.0, 0.0]
    assert parse_config(data).parameters["tilt"] == (1.0, 0.0, 0.0, 0.0)


def test_quaternion_wrong_length(tmp_path):
    data = furuta()
    data["parameters"]["tilt"] = [1.0, 0.0, 0.0]
    assert load_error(tmp_path, data) == (
        "parameters.tilt: expected a unit quaternion [w, x, y, z] (4 numbers), "
        "got a list of 3 items")


def test_quaternion_not_a_list(tmp_path):
    data = furuta()
    data["parameters"]["tilt"] = "identity"
    assert load_error(tmp_path, data).startswith(
        "parameters.tilt: expected a unit quaternion [w, x, y, z] (4 numbers), got 'identity'")


def test_quaternion_element_wrong_type(tmp_path):
    data = furuta()
    data["parameters"]["tilt"] = [1.0, 0.0, "x", 0.0]
    assert load_error(tmp_path, data) == "parameters.tilt[2]: expected a number, got 'x'"


# --------------------------------------------------------------------------------------------
# Validation messages: free parameters and bounds


def test_free_name_not_a_parameter(tmp_path):
    data = furuta()
    data["free"]["Jbyy"] = {}
    message = load_error(tmp_path, data)
    assert message.startswith("free.Jbyy: not a parameter of rig furuta; did you mean 'J_Byy'?")


def test_free_as_list():
    data = furuta(free=["J_Byy", "J_Azz"])
    config = parse_config(data)
    assert config.free_names == ("J_Azz", "J_Byy")  # the rig's order
    assert config.free["J_Byy"] == Bounds(FURUTA.parameter("J_Byy").lower, math.inf)


def test_free_list_duplicate(tmp_path):
    assert load_error(tmp_path, furuta(free=["b1", "b1"])) == "free: b1 is listed twice"


def test_free_empty_means_state_only():
    assert parse_config(furuta(free=None)).free == {}
    assert parse_config(furuta(free=[])).free == {}


def test_free_wrong_type(tmp_path):
    assert load_error(tmp_path, furuta(free="J_Azz")).startswith(
        "free: expected a list of parameter names or a mapping")


def test_inverted_bounds(tmp_path):
    data = furuta()
    data["free"]["J_Azz"] = {"lower": 1.0, "upper": 0.1}
    assert load_error(tmp_path, data) == (
        "free.J_Azz: lower bound 1.0 is greater than upper bound 0.1")


def test_equal_bounds(tmp_path):
    data = furuta()
    data["free"]["J_Azz"] = {"lower": 0.01, "upper": 0.01}
    assert "lower < upper" in load_error(tmp_path, data)


def test_initial_value_outside_bounds(tmp_path):
    data = furuta()
    data["free"]["J_Azz"] = {"lower": 0.1, "upper": 1.0}
    assert load_error(tmp_path, data) == (
        "free.J_Azz: initial value 0.01 (parameters.J_Azz) is outside the bounds [0.1, 1.0]")


def test_bound_below_admissible_range(tmp_path):
    data = furuta()
    data["free"]["b1"] = {"lower": -1.0}
    assert load_error(tmp_path, data).startswith("free.b1.lower: must not be negative")


def test_bounds_given():
    data = furuta()
    data["free"]["J_Azz"] = {"lower": 1e-6, "upper": 1.0}
    data["free"]["K"] = {"upper": 10.0}
    config = parse_config(data)
    assert config.free["J_Azz"] == Bounds(1e-6, 1.0)
    assert config.free["K"] == Bounds(-math.inf, 10.0)


def test_unknown_bound_key(tmp_path):
    data = furuta()
    data["free"]["J_Azz"] = {"lowr": 0.001}
    assert load_error(tmp_path, data).startswith(
        "free.J_Azz.lowr: unknown key 'lowr'; did you mean 'lower'?")


def test_bound_wrong_type(tmp_path):
    data = furuta()
    data["free"]["J_Azz"] = {"upper": "big"}
    assert load_error(tmp_path, data) == "free.J_Azz.upper: expected a number, got 'big'"


def test_bounds_on_quaternion(tmp_path):
    data = furuta()
    data["free"]["tilt"] = {"lower": -1.0, "upper": 1.0}
    assert load_error(tmp_path, data).startswith(
        "free.tilt: bounds do not apply to the quaternion parameter tilt")


def test_free_parameter_of_other_friction_model(tmp_path):
    data = raw("pendulum")
    data["free"]["r_mu_k"] = {}
    assert load_error(tmp_path, data).startswith(
        "free.r_mu_k: r_mu_k is not used by the 'dry' friction model")


def test_stribeck_free_set():
    data = raw("pendulum")
    data["friction"] = "stribeck"
    data["free"] = ["J_P", "b", "r_mu_k", "r_mu_delta", "zeta"]
    assert parse_config(data).free_names == ("J_P", "b", "r_mu_k", "r_mu_delta", "zeta")


# --------------------------------------------------------------------------------------------
# Validation messages: method, simulation, recording


@pytest.mark.parametrize("key", ["method.step_s", "method.kappa", "advanced.filter_cutoff_hz"])
@pytest.mark.parametrize("value", [0, -0.01])
def test_non_positive_method_settings(tmp_path, key, value):
    data = furuta()
    section, name = key.split(".")
    data.setdefault(section, {})[name] = value
    assert load_error(tmp_path, data) == f"{key}: must be positive, got {float(value)!r}"


def test_method_wrong_type(tmp_path):
    data = furuta()
    data["method"]["max_iterations"] = 2.5
    assert load_error(tmp_path, data) == (
        "method.max_iterations: expected an integer >= 1, got 2.5")


def test_unknown_method_key(tmp_path):
    data = furuta()
    data["method"]["kapa"] = 10.0
    assert load_error(tmp_path, data).startswith(
        "method.kapa: unknown key 'kapa'; did you mean 'kappa'?")


def test_method_defaults():
    data = furuta()
    del data["method"], data["simulation"], data["recording"]
    config = parse_config(data)
    assert config.method.step_s is None and config.method.kappa == 100.0
    assert config.advanced.filter_cutoff_hz == 10.0 and config.advanced.estimator == "consistent"
    assert config.simulation.dt == 2.5e-4 and config.simulation.encoder_counts is None
    assert config.recording.joint_states_topic == "/joint_states"
    assert config.recording.voltage_topic == "/control_voltage"
    assert config.recording.voltage_type == "std_msgs/msg/Float64"


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("dt", 0.0, "simulation.dt: must be positive, got 0.0"),
    ("rate_hz", -1, "simulation.rate_hz: must be positive, got -1.0"),
    ("noise_rad", -0.001, "simulation.noise_rad: must not be negative, got -0.001"),
    ("encoder_counts", 0, "simulation.encoder_counts: must be an integer >= 1, got 0"),
])
def test_bad_simulation_settings(tmp_path, key, value, expected):
    data = furuta()
    data["simulation"][key] = value
    assert load_error(tmp_path, data) == expected


def test_joint_mapping_missing_rig_joint(tmp_path):
    data = furuta()
    del data["recording"]["joints"]["pendulum"]
    assert load_error(tmp_path, data).startswith(
        "recording.joints: missing an entry for rig joint 'pendulum'")


def test_joint_mapping_unknown_joint(tmp_path):
    data = furuta()
    data["recording"]["joints"]["pendlum"] = data["recording"]["joints"].pop("pendulum")
    assert load_error(tmp_path, data).startswith(
        "recording.joints.pendlum: unknown joint of rig furuta; did you mean 'pendulum'?")


@pytest.mark.parametrize("sign", [2, 0, True, "minus"])
def test_joint_sign_not_plus_minus_one(tmp_path, sign):
    data = furuta()
    data["recording"]["joints"]["arm"]["sign"] = sign
    assert load_error(tmp_path, data).startswith("recording.joints.arm.sign: must be 1 or -1")


def test_joint_mapping_null_entries_take_their_defaults():
    data = furuta()
    data["recording"]["joints"] = {"arm": None, "pendulum": {"name": "joint1", "sign": None}}
    joints = parse_config(data).recording.joints
    assert joints == {"arm": JointMapping("arm"), "pendulum": JointMapping("joint1")}


def test_joint_mapping_forms():
    data = furuta()
    data["recording"]["joints"] = {"arm": "joint0",
                                   "pendulum": {"name": "joint1", "offset": math.pi, "sign": -1}}
    joints = parse_config(data).recording.joints
    assert joints["arm"] == JointMapping("joint0", 0.0, 1)
    assert joints["pendulum"] == JointMapping("joint1", math.pi, -1)
    assert joints["pendulum"].to_model(math.pi) == 0.0
    assert joints["pendulum"].to_recorded(0.5) == pytest.approx(math.pi - 0.5)


def test_joint_mapping_duplicate_recorded_name(tmp_path):
    data = furuta()
    data["recording"]["joints"] = {"arm": "joint0", "pendulum": "joint0"}
    assert "both map to recorded joint 'joint0'" in load_error(tmp_path, data)


def test_unknown_voltage_type(tmp_path):
    data = furuta()
    data["recording"]["voltage_type"] = "std_msgs/msg/Float32"
    message = load_error(tmp_path, data)
    assert message.startswith("recording.voltage_type: unknown voltage message type "
                              "'std_msgs/msg/Float32'")
    assert "std_msgs/msg/Float64MultiArray" in message


def test_voltage_type_short_form():
    data = furuta()
    data["recording"]["voltage_type"] = "std_msgs/Float64MultiArray"
    data["recording"]["voltage_index"] = 2
    recording = parse_config(data).recording
    assert recording.voltage_type == "std_msgs/msg/Float64MultiArray"
    assert recording.voltage_index == 2


def test_joint_state_voltage_needs_joint(tmp_path):
    data = furuta()
    data["recording"]["voltage_type"] = "sensor_msgs/msg/JointState"
    assert load_error(tmp_path, data).startswith("recording.voltage_joint: required when")
    data["recording"]["voltage_joint"] = "joint0"
    assert parse_config(data).recording.voltage_joint == "joint0"


def test_negative_voltage_index(tmp_path):
    data = furuta()
    data["recording"]["voltage_index"] = -1
    assert load_error(tmp_path, data).startswith("recording.voltage_index: must be an integer")


def test_unknown_stamp_source(tmp_path):
    data = furuta()
    data["recording"]["stamp_source"] = "headers"
    assert "did you mean 'header'?" in load_error(tmp_path, data)


def test_topic_without_leading_slash_is_kept():
    data = furuta()
    data["recording"]["joint_states_topic"] = "joint_states"
    assert parse_config(data).recording.joint_states_topic == "joint_states"


def test_parse_config_source_default():
    data = furuta(rig="nope")
    with pytest.raises(ConfigError, match=r"^<config>: rig: unknown rig 'nope'"):
        parse_config(data)


@pytest.mark.parametrize(("section", "key", "value", "expected"), [
    ("advanced", "drift_correction", "yes",
     "advanced.drift_correction: expected true or false, got 'yes'"),
    ("node", "warm_up", "yes", "node.warm_up: expected true or false, got 'yes'"),
    ("node", "warm_up", [1], "node.warm_up: expected true or false, got a list of 1 item"),
    ("recording", "use_driver_velocities", 1,
     "recording.use_driver_velocities: expected true or false, got 1"),
])
def test_one_boolean_check_one_message(tmp_path, section, key, value, expected):
    data = furuta()
    (data.setdefault(section, {}) if section else data)[key] = value
    assert load_error(tmp_path, data) == expected


@pytest.mark.parametrize(("section", "key", "value", "expected"), [
    ("node", "name", 5, "node.name: expected a non-empty string, got 5"),
    ("node", "state_file", "", "node.state_file: expected a non-empty string, got ''"),
    ("recording", "voltage_topic", ["/u"],
     "recording.voltage_topic: expected a non-empty string, got a list of 1 item"),
    ("recording", "joints", {"arm": {"sign": 2}, "pendulum": "pendulum"},
     "recording.joints.arm.sign: must be 1 or -1, got 2"),
])
def test_wrong_types_are_described_alike(tmp_path, section, key, value, expected):
    """Integers read as given (``got 5``, not ``got 5.0``); every check describes alike."""
    data = furuta()
    data.setdefault(section, {})[key] = value
    assert load_error(tmp_path, data) == expected


def test_node_strings_are_kept_verbatim_and_recording_topics_stripped():
    data = furuta()
    data["node"] = {"state_file": " state.yaml"}
    data["recording"]["voltage_topic"] = " /u "
    config = parse_config(data)
    assert config.node.state_file == " state.yaml" and config.recording.voltage_topic == "/u"


def test_a_null_settings_key_takes_its_default():
    data = furuta()
    data["method"] = {"kappa": None}
    data["recording"]["use_driver_velocities"] = None
    data["node"] = {"warm_up": None, "state_file": None}
    config = parse_config(data)
    assert config.method.kappa == 100.0 and config.recording.use_driver_velocities is False
    assert config.node.warm_up is True and config.node.state_file is None


def test_field_tables_cover_their_sections_in_order():
    """Each settings section's field table has the dataclass's keys (messages list them)."""
    from mb_estimation.config import sections

    tables = {MethodSettings: sections.METHOD_FIELDS,
              SimulationSettings: sections.SIMULATION_FIELDS,
              NodeSettings: sections.NODE_FIELDS,
              RecordingSettings: sections.recording_fields(FURUTA),
              JointMapping: sections.JOINT_FIELDS}
    for settings, table in tables.items():
        assert tuple(table) == tuple(f.name for f in dataclasses.fields(settings)), settings


# --------------------------------------------------------------------------------------------
# Command-line overrides


@pytest.fixture
def furuta_config():
    data = furuta()
    data["free"]["J_Azz"] = {"lower": 1e-3, "upper": 0.5}
    return parse_config(data, "furuta.yaml")


def test_override_free_keeps_config_bounds(furuta_config):
    config = apply_overrides(furuta_config, free=["J_Byy", "J_Azz", "l2"])
    assert config.free_names == ("l2", "J_Azz", "J_Byy")
    assert config.free["J_Azz"] == Bounds(1e-3, 0.5)  # from the config
    assert config.free["l2"] == Bounds(0.0, math.inf)  # the parameter's default range
    assert furuta_config.free_names != config.free_names  # the original is unchanged


def test_override_free_from_string(furuta_config):
    assert apply_overrides(furuta_config, free="b1, b2").free_names == ("b1", "b2")


def test_override_free_empty(furuta_config):
    assert apply_overrides(furuta_config, free=[]).free == {}


def test_override_free_unknown(furuta_config):
    with pytest.raises(ConfigError, match=r"^override: free\.J_Azy: not a parameter of rig "
                                          r"furuta; did you mean 'J_Azz'\?"):
        apply_overrides(furuta_config, free=["J_Azy"])


def test_override_set_values(furuta_config):
    config = apply_overrides(furuta_config, set_values={"J_Azz": 0.02, "m_B": 0.5,
                                                        "tilt": (0.0, 1.0, 0.0, 0.0)})
    assert config.parameters["J_Azz"] == 0.02
    assert config.parameters["m_B"] == 0.5
    assert config.parameters["tilt"] == (0.0, 1.0, 0.0, 0.0)
    assert furuta_config.parameters["J_Azz"] == 0.01


def test_override_set_outside_bounds(furuta_config):
    with pytest.raises(ConfigError, match=r"^override: parameters\.J_Azz: initial value 0.9 "
                                          r"\(set by override; .* outside the bounds "
                                          r"\[0.001, 0.5\]"):
        apply_overrides(furuta_config, set_values={"J_Azz": 0.9})


@pytest.mark.parametrize(("values", "pattern"), [
    ({"J_Azx": 0.1}, r"^override: parameters\.J_Azx: not a parameter of rig furuta; "
                     r"did you mean 'J_Azz'\?"),
    ({"m_A": -1.0}, r"^override: parameters\.m_A: must be positive"),
    ({"K": "abc"}, r"^override: parameters\.K: expected a number, got 'abc'"),
    ({"tilt": (1.0, 1.0, 0.0, 0.0)}, r"^override: parameters\.tilt: not a unit quaternion"),
])
def test_override_set_invalid(furuta_config, values, pattern):
    with pytest.raises(ConfigError, match=pattern):
        apply_overrides(furuta_config, set_values=values)


def test_override_compliance(furuta_config):
    config = apply_overrides(furuta_config, compliance=1e-5)
    assert all(config.parameters[n] == 1e-5 for n in COMPLIANCE_PARAMETERS["furuta"])
    # --set is applied after --compliance
    config = apply_overrides(furuta_config, compliance=1e-5, set_values={"eps_rot2": 1e-3})
    assert config.parameters["eps_rot2"] == 1e-3 and config.parameters["eps_lin2"] == 1e-5


@pytest.mark.parametrize("value", [0.0, -1e-4])
def test_override_compliance_non_positive(furuta_config, value):
    with pytest.raises(ConfigError, match=r"^override: parameters\.eps_lin1: must be positive"):
        apply_overrides(furuta_config, compliance=value)


def test_override_method(furuta_config):
    config = apply_overrides(furuta_config, step_s=0.005, kappa=10.0, max_iterations=5,
                             estimator="paper")
    assert (config.method.step_s, config.method.kappa, config.method.max_iterations) == (
        0.005, 10.0, 5)
    assert config.advanced.estimator == "paper"
    assert config.advanced.filter_cutoff_hz == furuta_config.advanced.filter_cutoff_hz


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"step_s": 0.0}, r"^override: method\.step_s: must be positive, got 0.0"),
    ({"kappa": -1.0}, r"^override: method\.kappa: must be positive, got -1.0"),
    ({"max_iterations": -1}, r"^override: method\.max_iterations: must be an integer >= 1"),
    ({"estimator": "pape"}, r"^override: advanced\.estimator: unknown estimator 'pape'; "
                            r"did you mean 'paper'\?"),
])
def test_override_method_invalid(furuta_config, kwargs, pattern):
    with pytest.raises(ConfigError, match=pattern):
        apply_overrides(furuta_config, **kwargs)


def test_override_friction_parameter_on_pendulum():
    config = load_config(builtin_config_path("pendulum"))
    with pytest.raises(ConfigError, match=r"^override: free\.zeta: zeta is not used by the "
                                          r"'dry'"):
        apply_overrides(config, free=["J_P", "zeta"])
    assert apply_overrides(config, compliance=1e-5).parameters["eps_rot"] == 1e-5


def test_overrides_without_arguments_return_equal_config(furuta_config):
    assert apply_overrides(furuta_config) == furuta_config


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"set_values": {"m_A": -1.0}},
     "--set: parameters.m_A: must be positive (m_A: mass of arm A [kg]), got -1.0"),
    ({"set_values": {"J_Azz": 0.9}},
     "--set: parameters.J_Azz: initial value 0.9 (set by --set; bounds of free parameter J_Azz) "
     "is outside the bounds [0.001, 0.5]"),
    ({"free": ["J_Q"]}, "--free: free.J_Q: not a parameter of rig furuta"),
    ({"compliance": 0.0}, "--compliance: parameters.eps_lin1: must be positive, got 0.0"),
    ({"step_s": 0.0}, "--step: method.step_s: must be positive, got 0.0"),
    ({"kappa": -1.0}, "--kappa: method.kappa: must be positive, got -1.0"),
    ({"max_iterations": -1},
     "--max-iterations: method.max_iterations: must be an integer >= 1, got -1"),
    ({"estimator": "pape"}, "--estimator: advanced.estimator: unknown estimator 'pape'"),
    ({"simulation_refinement": "always"},
     "--simulation-refinement: method.simulation_refinement: unknown refinement mode 'always'"),
])
def test_override_messages_name_the_caller_and_the_config_key(furuta_config, kwargs, message):
    """The command line names its option, then the config key.

    (The sweep and the node core call apply_overrides too: the key, not a flag, is what the
    function itself names.)
    """
    from mb_estimation.cli import OVERRIDE_FLAGS

    with pytest.raises(ConfigError) as info:
        apply_overrides(furuta_config, sources=OVERRIDE_FLAGS, **kwargs)
    assert str(info.value).startswith(message), str(info.value)


def test_cli_override_error_names_option_and_config_key(capsys):
    from mb_estimation.cli import main

    assert main(["simulate", "release", "--config", "furuta", "--compliance", "0",
                 "--output", "unused"]) == 2
    assert capsys.readouterr().err.strip() == (
        "mb-estimation: error: --compliance: parameters.eps_lin1: must be positive, got 0.0")


# --------------------------------------------------------------------------------------------
# Parsing command-line arguments


def test_parse_free_list():
    assert parse_free_list("J_Azz,J_Byy") == ["J_Azz", "J_Byy"]
    assert parse_free_list(" J_Azz , b1 ,") == ["J_Azz", "b1"]
    assert parse_free_list("") == []


def test_parse_free_list_bad_name():
    with pytest.raises(ConfigError, match=r"^--free: 'J_Azz=1' is not a parameter name"):
        parse_free_list("J_Azz=1")


def test_parse_assignments():
    assert parse_assignments("J_Azz=0.01,b1=1e-4,tilt=[1,0,0,0]") == {
        "J_Azz": 0.01, "b1": 1e-4, "tilt": (1.0, 0.0, 0.0, 0.0)}
    assert parse_assignments(" K = -2 , tilt = [0.7071068, 0.7071068, 0, 0] ") == {
        "K": -2.0, "tilt": (0.7071068, 0.7071068, 0.0, 0.0)}
    assert parse_assignments("") == {}
    assert isinstance(parse_assignments("r1=1")["r1"], float)


@pytest.mark.parametrize(("text", "pattern"), [
    ("J_Azz", r"^--set: 'J_Azz' is not an assignment NAME=VALUE"),
    ("J_Azz=", r"^--set: 'J_Azz=' is not an assignment"),
    ("=1", r"^--set: '=1' is not an assignment"),
    ("J_Azz=abc", r"^--set: J_Azz: expected a number or a list like \[1, 0, 0, 0\], got 'abc'"),
    ("J_Azz=true", r"^--set: J_Azz: expected a number"),
    ("tilt=[1,0,0,0", r"^--set: unbalanced '\['"),
    ("tilt=1,0,0,0]", r"^--set: unbalanced '\]'"),
    ("b1=1,b1=2", r"^--set: b1: given twice"),
])
def test_parse_assignments_invalid(text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        parse_assignments(text)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_parse_assignments_round_trips_floats(value):
    assert parse_assignments(f"b1={value!r}") == {"b1": value}


def test_parse_assignments_then_apply(furuta_config):
    values = parse_assignments("J_Byy=0.02,tilt=[1,0,0,0]")
    config = apply_overrides(furuta_config, set_values=values, free=parse_free_list("J_Byy"))
    assert config.parameters["J_Byy"] == 0.02 and config.free_names == ("J_Byy",)


def test_shipped_config_not_modified_by_tests():
    # `raw` returns fresh data each time
    first = raw("furuta")
    second = copy.deepcopy(first)
    first["parameters"]["l1"] = 99.0
    assert raw("furuta") == second


@pytest.mark.parametrize(("value", "mode"), [("auto", "auto"), ("on", "on"), ("off", "off"),
                                              (True, "on"), (False, "off")])
def test_simulation_refinement_modes(tmp_path, value, mode):
    data = furuta()
    data["method"]["simulation_refinement"] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_config(path).method.simulation_refinement == mode
    assert apply_overrides(load_config(path), simulation_refinement=value
                           ).method.simulation_refinement == mode


def test_simulation_refinement_default_and_errors(tmp_path):
    data = furuta()
    del data["method"]
    assert parse_config(data).method.simulation_refinement == "on"
    data["method"] = {"simulation_refinement": "sometimes"}
    assert load_error(tmp_path, data) == (
        "method.simulation_refinement: unknown refinement mode 'sometimes' "
        "(choose one of auto, on, off)")
    with pytest.raises(ConfigError, match=r"^override: method\.simulation_refinement: unknown "
                                          r"refinement mode 'always'"):
        apply_overrides(parse_config(furuta()), simulation_refinement="always")


def test_command_line_spells_the_refinement_modes_as_the_config():
    from mb_estimation import cli
    from mb_estimation.config import HINGE_DECLARATIONS, REFINEMENT_MODES

    assert cli.REFINEMENT_MODES == REFINEMENT_MODES
    assert cli.HINGE_DECLARATIONS == HINGE_DECLARATIONS


def test_the_config_reference_is_generated_from_the_schema_and_current():
    """docs/config-reference.md is what the schema gives, and every settings key is documented.

    Regenerate with ``python -m mb_estimation.config.reference > docs/config-reference.md``.
    """
    from mb_estimation.config import reference

    for _, settings, _ in reference.SECTIONS:
        undocumented = [f.name for f in dataclasses.fields(settings) if not f.metadata.get("doc")]
        assert not undocumented, f"{settings.__name__}: no doc for {undocumented}"
    text = reference.config_reference()
    assert "| `window_s` | `5` |" in text and "| `J_Azz` | kg m^2 |" in text
    page = REPO / "docs" / "config-reference.md"
    assert page.read_text(encoding="utf-8") == text, \
        "docs/config-reference.md is stale: python -m mb_estimation.config.reference > " \
        "docs/config-reference.md"


def test_a_furuta_config_needs_only_what_the_user_knows_of_the_rig():
    """Shaft inertia, dry friction, tilt and the hinges' compliance and damping have defaults."""
    from mb_estimation.rigs.parameters import DEFAULT_COMPLIANCE, DEFAULT_RELAXATION_TIME_S

    config = load_config(REPO / "config" / "examples" / "odrive_furuta.yaml")
    text = (REPO / "config" / "examples" / "odrive_furuta.yaml").read_text()
    for name in ("J_shaft", "mu1", "r1", "tilt", "eps_lin1", "tau2"):
        assert f"  {name}:" not in text
    assert config.parameters["J_shaft"] == 0.0 and config.parameters["mu1"] == 0.0
    assert config.parameters["tilt"] == (1.0, 0.0, 0.0, 0.0)
    assert config.parameters["eps_rot2"] == DEFAULT_COMPLIANCE
    assert config.parameters["tau1"] == DEFAULT_RELAXATION_TIME_S
    with pytest.raises(ConfigError, match=r"missing value for J_Azz"):
        parse_config({"rig": "furuta", "parameters": {
            name: value for name, value in config.to_dict()["parameters"].items()
            if name != "J_Azz"}, "free": ["J_Byy"]}, "test")


def test_the_user_guides_config_for_a_new_rig_loads():
    text = (REPO / "docs" / "user-guide.md").read_text(encoding="utf-8")
    block = text.split("What a config for a new Furuta rig needs:\n\n```yaml\n", 1)[1]
    config = parse_config(yaml.safe_load(block.split("```", 1)[0]), "user-guide.md")
    assert config.free_names == ("J_Azz", "J_Byy", "K", "b1", "b2")
    assert config.recording.joints["pendulum"].name == "joint1"


@pytest.mark.parametrize(("command", "now"), [
    ("calibrate", "--step (the estimation step, method.step_s)"),
    ("crossval", "--step (the estimation step, method.step_s)"),
    ("sweep", "--step (the estimation steps)"),
])
def test_the_estimation_step_is_step_everywhere_and_dt_only_the_simulators(
        tmp_path, capsys, command, now):
    """``--step`` sets ``method.step_s``; ``--dt`` on a fitting command fails with one line."""
    from mb_estimation.cli import main

    with pytest.raises(SystemExit) as stopped:
        main([command, str(tmp_path), "--config", "furuta", "--dt", "0.01",
              "--output", str(tmp_path / "out")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"error: --dt is now {now}") and len(err.splitlines()) == 1
