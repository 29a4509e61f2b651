"""The rig read from a URDF: Table G.5 as URDF, the same rig in other frames, the bad ones.

The reading is checked three ways: a URDF written in the model's frames gives exactly the
built-in §4.7 config's values (and the same simulation); the same rig written as ROS rigs
write theirs (axes along z, offsets and turns in ``<origin>``, inertias off their principal
axes, a part fixed to the pendulum) gives the same values, and its energies — computed from
the URDF by an independent reader (yourdfpy's forward kinematics) — equal the independent
reference model's (test/reference_furuta.py) at the angles the joint mapping gives; and the
URDFs that are not a Furuta pendulum are refused in one line naming why.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import numpy as np
import pytest
from reference_furuta import kinetic_energy_reference, potential_energy_reference

from mb_estimation.config import ConfigError, load_config
from mb_estimation.rigs.furuta_urdf import rpy_matrix

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "examples" / "odrive_furuta.yaml"
G5 = {"l1": 0.128, "lA": 0.248, "l2": 0.92, "m_A": 0.238, "m_B": 0.428, "J_Axx": 1e-4,
      "J_Ayy": 0.003, "J_Azz": 0.003, "J_Bxx": 1e-4, "J_Byy": 0.004, "J_Bzz": 0.004,
      "b1": 1e-3, "b2": 1e-4}

# What a URDF does not hold, as config/furuta_synthetic.yaml has it.
REST_OF_SYNTHETIC = """\
hinges: compliant
parameters:
  J_shaft: 1.0e-4
  K: 1.0
  mu1: 0.0
  mu2: 0.0
  r1: 1.0
  r2: 1.0
  gravity: 9.82
  eps_lin1: 1.0e-6
  eps_rot1: 1.0e-6
  tau1: 0.02
  eps_lin2: 1.0e-6
  eps_rot2: 1.0e-6
  tau2: 0.02
free:
  J_Azz: {}
  J_Byy: {}
  b1: {}
  b2: {}
"""


def _inertia(tensor) -> str:
    t = np.asarray(tensor, dtype=float)
    return (f'<inertia ixx="{float(t[0, 0])!r}" ixy="{float(t[0, 1])!r}" '
            f'ixz="{float(t[0, 2])!r}" iyy="{float(t[1, 1])!r}" iyz="{float(t[1, 2])!r}" '
            f'izz="{float(t[2, 2])!r}"/>')


def _xyz(vector) -> str:
    return " ".join(repr(float(v)) for v in vector)


def model_frames_urdf(values=G5) -> str:
    """Table G.5 in the model's frames, z up: the arm along x, the pendulum hanging along -z."""
    return textwrap.dedent(f"""\
        <?xml version="1.0"?>
        <robot name="furuta_g5">
          <link name="base_link"/>
          <joint name="arm_joint" type="continuous">
            <parent link="base_link"/><child link="arm"/>
            <origin xyz="0 0 0" rpy="0 0 0"/><axis xyz="0 0 1"/>
            <dynamics damping="{values['b1']!r}"/>
          </joint>
          <link name="arm">
            <inertial><mass value="{values['m_A']!r}"/><origin xyz="{values['l1']!r} 0 0"/>
              {_inertia(np.diag([values['J_Axx'], values['J_Ayy'], values['J_Azz']]))}
            </inertial>
          </link>
          <joint name="pendulum_joint" type="continuous">
            <parent link="arm"/><child link="pendulum"/>
            <origin xyz="{values['lA']!r} 0 0"/><axis xyz="1 0 0"/>
            <dynamics damping="{values['b2']!r}"/>
          </joint>
          <link name="pendulum">
            <inertial><mass value="{values['m_B']!r}"/><origin xyz="0 0 {-values['l2']!r}"/>
              {_inertia(np.diag([values['J_Byy'], values['J_Bzz'], values['J_Bxx']]))}
            </inertial>
          </link>
        </robot>
        """)


# The same rig as a ROS rig might write it (all angles in rad, lengths in m).
BASE_XYZ, BASE_RPY = (0.3, -0.2, 0.05), (0.0, 0.0, 0.4)
ARM_XYZ, ARM_RPY = (0.0, 0.0, 0.1), (0.0, 0.0, 0.9)  # the arm joint's axis: -z
ALPHA = 0.6  # the arm's direction in its link's frame
ARM_SIDE, ARM_HEIGHT = 0.01, 0.015  # the arm's centre of mass off its line, and above it
AXIS_SHIFT = 0.03  # the pendulum's centre of mass beyond its joint, along the swing axis
HEIGHT = 0.02  # the pendulum joint above the arm's link origin
INERTIAL_RPY = (0.3, -0.2, 0.5)  # the pendulum rod's inertial frame, off its principal axes
BOB_MASS, BOB_AT, BOB_INERTIA = 0.1, 1.0, 1e-5  # a part fixed to the pendulum, along the rod


def ros_frames_urdf() -> str:
    """Table G.5's rig in other frames (module docstring).

    Recorded angles: arm -θ1, pendulum -θ2 (both joints' axes point against the model's).
    """
    along = np.array([np.cos(ALPHA), np.sin(ALPHA), 0.0])  # x_A in the arm's link frame
    arm_centre = G5["l1"] * along + ARM_SIDE * np.cross([0.0, 0.0, 1.0], along) + [
        0.0, 0.0, ARM_HEIGHT]
    # x_A's z axis: Rz(α) Ry(-π/2) maps z to -x_A, so the pendulum's axis points inwards
    joint_rpy = (0.0, -np.pi / 2, ALPHA)
    joint_rotation = rpy_matrix(joint_rpy)
    down = joint_rotation.T @ np.array([0.0, 0.0, -1.0])  # world down in the pendulum's frame
    swing = joint_rotation.T @ along  # x_A in the pendulum's frame
    frame_b = np.stack([down, swing, np.cross(down, swing)], axis=1)  # the model's x_B, y_B, z_B
    total = frame_b @ np.diag([G5["J_Bxx"], G5["J_Byy"], G5["J_Bzz"]]) @ frame_b.T
    centre = G5["l2"] * down + AXIS_SHIFT * swing  # the whole pendulum's
    bob = BOB_AT * down + AXIS_SHIFT * swing
    rod_mass = G5["m_B"] - BOB_MASS
    rod = (G5["m_B"] * centre - BOB_MASS * bob) / rod_mass

    def parallel(mass, offset):
        return mass * (offset @ offset * np.eye(3) - np.outer(offset, offset))

    rod_inertia = (total - BOB_INERTIA * np.eye(3) - parallel(BOB_MASS, bob - centre)
                   - parallel(rod_mass, rod - centre))
    turn = rpy_matrix(INERTIAL_RPY)
    # the same inertia about the arm's axis: what the side offset adds, taken off J_Azz
    arm_inertia = np.diag([G5["J_Axx"], G5["J_Ayy"], G5["J_Azz"] - G5["m_A"] * ARM_SIDE ** 2])
    arm_turn = rpy_matrix((0.0, 0.0, ALPHA))  # its principal axes: along, sideways, up
    return textwrap.dedent(f"""\
        <?xml version="1.0"?>
        <robot name="furuta_ros">
          <link name="world"/>
          <joint name="world_to_base" type="fixed">
            <parent link="world"/><child link="base_link"/>
            <origin xyz="{_xyz(BASE_XYZ)}" rpy="{_xyz(BASE_RPY)}"/>
          </joint>
          <link name="base_link"/>
          <joint name="joint0" type="revolute">
            <parent link="base_link"/><child link="arm_link"/>
            <origin xyz="{_xyz(ARM_XYZ)}" rpy="{_xyz(ARM_RPY)}"/><axis xyz="0 0 -1"/>
            <limit lower="-10" upper="10" effort="1" velocity="50"/>
            <dynamics damping="{G5['b1']!r}" friction="0.0"/>
          </joint>
          <link name="arm_link">
            <inertial><mass value="{G5['m_A']!r}"/>
              <origin xyz="{_xyz(arm_centre)}" rpy="0 0 0"/>
              {_inertia(arm_turn @ arm_inertia @ arm_turn.T)}
            </inertial>
          </link>
          <joint name="joint1" type="continuous">
            <parent link="arm_link"/><child link="pendulum_link"/>
            <origin xyz="{_xyz((G5['lA'] - AXIS_SHIFT) * along + [0, 0, HEIGHT])}"
                    rpy="{_xyz(joint_rpy)}"/>
            <axis xyz="0 0 1"/>
            <dynamics damping="{G5['b2']!r}"/>
          </joint>
          <link name="pendulum_link">
            <inertial><mass value="{float(rod_mass)!r}"/>
              <origin xyz="{_xyz(rod)}" rpy="{_xyz(INERTIAL_RPY)}"/>
              {_inertia(turn.T @ rod_inertia @ turn)}
            </inertial>
          </link>
          <joint name="bob_mount" type="fixed">
            <parent link="pendulum_link"/><child link="bob"/>
            <origin xyz="{_xyz(bob)}"/>
          </joint>
          <link name="bob">
            <inertial><mass value="{BOB_MASS!r}"/><origin xyz="0 0 0"/>
              {_inertia(BOB_INERTIA * np.eye(3))}
            </inertial>
          </link>
        </robot>
        """)


def write_config(tmp_path, urdf_text: str, name: str = "rig.urdf", urdf_keys: str = "",
                 rest: str = REST_OF_SYNTHETIC):
    (tmp_path / name).write_text(urdf_text)
    config = tmp_path / "config.yaml"
    config.write_text(f"rig: furuta\nurdf:\n  file: {name}\n{urdf_keys}{rest}")
    return config


def test_table_g5_as_urdf_gives_the_synthetic_model(tmp_path):
    from mb_estimation.rigs import get_rig
    from mb_estimation.simulation import simulate_recording

    from_urdf = load_config(write_config(tmp_path, model_frames_urdf()))
    builtin = load_config("furuta_synthetic")
    for name, value in builtin.parameters.items():
        assert from_urdf.parameters[name] == pytest.approx(value, rel=1e-14, abs=1e-15), name
    assert {j: (m.name, m.sign, m.offset) for j, m in from_urdf.recording.joints.items()} == {
        "arm": ("arm_joint", 1, 0.0), "pendulum": ("pendulum_joint", 1, 0.0)}
    runs = [simulate_recording(get_rig("furuta"), config.parameters, "release", duration_s=1.0,
                               dt=1e-3, rate_hz=100.0, rigid=True)
            for config in (builtin, from_urdf)]
    np.testing.assert_allclose(runs[1].joint_angles, runs[0].joint_angles, rtol=0, atol=1e-12)


def test_the_same_rig_in_other_frames_reads_the_same(tmp_path):
    config = load_config(write_config(tmp_path, ros_frames_urdf()))
    for name, value in G5.items():
        assert config.parameters[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name
    arm, pendulum = config.recording.joints["arm"], config.recording.joints["pendulum"]
    assert (arm.name, arm.sign, pendulum.name, pendulum.sign) == ("joint0", -1, "joint1", -1)
    assert arm.offset == 0.0 and pendulum.offset == pytest.approx(0.0, abs=1e-12)
    assert config.urdf.rig.notes == ("the arm's centre of mass is 10 mm to the side of its line "
                                     "to the pendulum joint: m_A d² added to J_Azz (all the "
                                     "arm's motion shows of it)",)
    from mb_estimation.setup import urdf_reading_notes  # what calibrate prints before its fit

    assert urdf_reading_notes(config) == [f"rig.urdf: {config.urdf.rig.notes[0]}"]


def test_a_fixed_link_between_the_joints_is_part_of_the_arm(tmp_path):
    """The pendulum joint hung from a link fixed to the arm in a turned frame: the same rig."""
    text = model_frames_urdf().replace(
        '<joint name="pendulum_joint" type="continuous">\n    <parent link="arm"/>',
        '<joint name="tip_mount" type="fixed"><parent link="arm"/><child link="arm_tip"/>'
        '<origin xyz="0.2 0 0" rpy="0.3 0 0"/></joint><link name="arm_tip"/>\n'
        '  <joint name="pendulum_joint" type="continuous">\n    <parent link="arm_tip"/>')
    text = text.replace('<origin xyz="0.248 0 0"/>', '<origin xyz="0.048 0 0" rpy="-0.3 0 0"/>')
    assert "arm_tip" in text and 'xyz="0.048 0 0"' in text
    config = load_config(write_config(tmp_path, text))
    for name, value in G5.items():
        assert config.parameters[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name


def _urdf_energies(path, gravity: float, angles, rates):
    """Kinetic and potential energy [J] of a URDF's links at joint ``angles``, ``rates``.

    Forward kinematics by yourdfpy (an independent reader); body velocities by central
    differences of the poses along the rates; gravity along -z of the root link.
    """
    yourdfpy = pytest.importorskip("yourdfpy")
    robot = yourdfpy.URDF.load(str(path), load_meshes=False)
    names = [joint.name for joint in robot.robot.joints if joint.type != "fixed"]
    root = robot.base_link

    def bodies(q):
        robot.update_cfg(dict(zip(names, q, strict=True)))
        out = []
        for link in robot.robot.links:
            if link.inertial is None:
                continue
            pose = robot.get_transform(link.name, root) @ link.inertial.origin
            out.append((link.inertial.mass, pose[:3, 3], pose[:3, :3], link.inertial.inertia))
        return out

    delta = 1e-6
    ahead = bodies(np.asarray(angles) + delta * np.asarray(rates))
    behind = bodies(np.asarray(angles) - delta * np.asarray(rates))
    kinetic = potential = 0.0
    for (mass, centre, rotation, inertia), (_, centre_a, rotation_a, _), (
            _, centre_b, rotation_b, _) in zip(bodies(angles), ahead, behind, strict=True):
        velocity = (centre_a - centre_b) / (2 * delta)
        spin = (rotation_a - rotation_b) / (2 * delta) @ rotation.T
        omega = np.array([spin[2, 1], spin[0, 2], spin[1, 0]])
        kinetic += 0.5 * mass * velocity @ velocity + 0.5 * omega @ (
            rotation @ inertia @ rotation.T) @ omega
        potential += mass * gravity * centre[2]
    return kinetic, potential


@pytest.mark.parametrize("writer", [model_frames_urdf, ros_frames_urdf])
def test_the_urdf_and_the_reference_model_have_the_same_energies(tmp_path, writer):
    config = load_config(write_config(tmp_path, writer()))
    path = tmp_path / "rig.urdf"
    reference = {**{name: float(value) for name, value in config.parameters.items()
                    if not isinstance(value, tuple)}, "J_shaft": 0.0,
                 "tilt": [1.0, 0.0, 0.0, 0.0]}
    truth = {**reference, **G5}
    mappings = [config.recording.joints[joint] for joint in ("arm", "pendulum")]
    rng = np.random.default_rng(3)
    potentials = []
    for _ in range(5):
        angles, rates = rng.uniform(-3, 3, 2), rng.uniform(-4, 4, 2)
        recorded = [m.to_recorded(a) for m, a in zip(mappings, angles, strict=True)]
        recorded_rates = [m.sign * r for m, r in zip(mappings, rates, strict=True)]
        kinetic, potential = _urdf_energies(path, 9.82, recorded, recorded_rates)
        assert kinetic == pytest.approx(kinetic_energy_reference(truth, angles, rates),
                                        rel=1e-7)
        assert kinetic == pytest.approx(kinetic_energy_reference(reference, angles, rates),
                                        rel=1e-7)
        potentials.append(potential - potential_energy_reference(truth, angles))
    assert np.ptp(potentials) < 1e-9  # equal but for a constant (the heights' origin)


BAD = {
    "perpendicular": (lambda t: t.replace('<axis xyz="1 0 0"/>', '<axis xyz="1 0 0.2"/>'),
                      "not perpendicular"),
    "vertical": (lambda t: t.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0.3 1"/>'),
                 "turns about the vertical"),
    "inertial": (lambda t: t[:t.index("<inertial><mass value=\"0.428")] + "</link>"
                 + t[t.index("</link>", t.index("<inertial><mass value=\"0.428")) + 7:],
                 "has no <inertial>"),
    "three joints": (lambda t: t.replace("</robot>", '<joint name="wheel" type="continuous">'
                                         '<parent link="pendulum"/><child link="w"/></joint>'
                                         '<link name="w"/></robot>'),
                     "two moving joints, the URDF has 3"),
    "prismatic": (lambda t: t.replace('name="pendulum_joint" type="continuous"',
                                      'name="pendulum_joint" type="prismatic"'),
                  "is prismatic"),
    "side": (lambda t: t.replace('<origin xyz="0.248 0 0"/>', '<origin xyz="0.248 0.01 0"/>'),
             "to the side"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_urdf_that_is_not_a_furuta_pendulum_is_refused_in_one_line(tmp_path, case):
    change, expected = BAD[case]
    text = change(model_frames_urdf())
    assert text != model_frames_urdf()
    with pytest.raises(ConfigError) as raised:
        load_config(write_config(tmp_path, text))
    message = str(raised.value)
    assert "\n" not in message and expected in message and "urdf" in message


XACRO = """\
<?xml version="1.0"?>
<robot name="r" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <xacro:arg name="b1" default="0.001"/>
  <xacro:property name="m" value="$(arg mass_b)"/>
  BODY
</robot>
"""


def _xacro_of(text: str) -> str:
    """:func:`model_frames_urdf` as a xacro whose pendulum mass is the argument ``mass_b``."""
    body = text[text.index("<link"):text.rindex("</robot>")]
    body = body.replace('<mass value="0.428"/>', '<mass value="${m}"/>')
    body = body.replace('damping="0.001"', 'damping="$(arg b1)"')
    return XACRO.replace("BODY", body)


def test_a_xacro_takes_its_arguments_and_a_missing_or_unknown_one_is_refused(tmp_path):
    args_file = tmp_path / "params.yaml"
    args_file.write_text("/**:\n  ros__parameters:\n    mass_b: 0.5\n    b1: 0.002\n")
    keys = "  args_file: params.yaml\n  args: {b1: 0.003}\n"
    config = load_config(write_config(tmp_path, _xacro_of(model_frames_urdf()), "rig.urdf.xacro",
                                      keys))
    assert config.parameters["m_B"] == 0.5 and config.parameters["b1"] == 0.003
    with pytest.raises(ConfigError) as raised:
        load_config(write_config(tmp_path, _xacro_of(model_frames_urdf()), "rig.urdf.xacro"))
    message = str(raised.value)
    assert "\n" not in message and "xacro" in message and "mass_b" in message
    misspelt = "  args_file: params.yaml\n  args: {b1: 0.003, mass_bb: 0.6}\n"
    with pytest.raises(ConfigError, match=r"urdf.args: mass_bb: not an argument of "
                                          r"rig.urdf.xacro \(it declares or uses b1, mass_b\)$"):
        load_config(write_config(tmp_path, _xacro_of(model_frames_urdf()), "rig.urdf.xacro",
                                 misspelt))


def test_a_value_in_the_config_overrides_the_urdfs(tmp_path):
    rest = REST_OF_SYNTHETIC.replace("  J_shaft: 1.0e-4\n", "  J_shaft: 1.0e-4\n  J_Byy: 0.005\n")
    config = load_config(write_config(tmp_path, model_frames_urdf(), rest=rest))
    assert config.parameters["J_Byy"] == 0.005 and config.parameters["J_Azz"] == 0.003
    assert dataclasses.replace(config, urdf=None) == config  # the URDF is not compared


def test_the_peer_rigs_xacro_gives_the_hand_written_example(shared_data_dir, tmp_path):
    """Its xacro with its pendulum_parameters.yaml: the published values of the example."""
    description = shared_data_dir / "peer-furuta-description"
    example = load_config(EXAMPLE)
    text = (f"rig: furuta\nurdf:\n  file: {description / 'furuta_pendulum.urdf.xacro'}\n"
            f"  args_file: {description / 'pendulum_parameters.yaml'}\n"
            f"  args: {{use_sim: false}}\nparameters:\n  K: 0.0625\n")
    from mb_estimation.config.load import parse_config, yaml_load

    config = parse_config(yaml_load(text, "peer.yaml"), "peer.yaml")
    published = {"l1": 0.05415, "lA": 0.093525, "l2": 0.096608, "m_A": 0.040466,
                 "m_B": 0.009801, "J_Azz": 5.96237099e-04, "J_Byy": 1.4790595e-05,
                 "b1": 1.16511498e-02, "b2": 1.7905703040590617e-05}
    for name, value in published.items():
        assert config.parameters[name] == pytest.approx(value, rel=1e-12), name
        assert config.parameters[name] == pytest.approx(example.parameters[name], rel=2e-3)
    assert {j: (m.name, m.sign) for j, m in config.recording.joints.items()} == {
        j: (m.name, m.sign) for j, m in example.recording.joints.items()}
    # its plain URDF (the xacro expanded, as its Drake package ships it) reads the same
    plain = tmp_path / "furuta_pendulum.urdf"
    plain.write_text(config.urdf.text)
    again = parse_config(yaml_load(f"rig: furuta\nurdf: {{file: {plain}}}\nparameters: "
                                   f"{{K: 0.0625}}\n", "plain.yaml"), "plain.yaml")
    assert again.parameters == config.parameters
    assert again.recording.joints == config.recording.joints


FITTED = {**G5, "J_Azz": 0.0031, "J_Byy": 0.0042, "b1": 1.1e-3, "b2": 0.9e-4, "m_B": 0.43,
          "l2": 0.91, "lA": 0.25, "coulomb1": 2e-3}


def _read_back(tmp_path, text: str, name: str = "calibrated.urdf"):
    folder = tmp_path / "back"
    folder.mkdir(exist_ok=True)
    return load_config(write_config(folder, text, name))


@pytest.mark.parametrize("writer", [None, model_frames_urdf, ros_frames_urdf])
def test_calibrated_urdf_holds_the_fitted_values_and_reads_back(tmp_path, writer):
    """Written into the config's URDF (or generated where it has none), read back: the values."""
    from mb_estimation.io.urdf_files import calibrated_urdf

    if writer is None:
        config = load_config("furuta_synthetic")
    else:
        config = load_config(write_config(tmp_path, writer()))
    values = {**config.parameters, **FITTED}
    text = calibrated_urdf(config, values)
    back = _read_back(tmp_path, text)
    for name in FITTED:
        assert back.parameters[name] == pytest.approx(values[name], rel=1e-12), name
    if writer is None:  # simulated, the rig read back is the fitted model
        from mb_estimation.rigs import get_rig
        from mb_estimation.simulation import simulate_recording

        runs = [simulate_recording(get_rig("furuta"), {**config.parameters, **parameters},
                                   "release", duration_s=1.0, dt=1e-3, rate_hz=100.0, rigid=True)
                for parameters in (FITTED, {name: back.parameters[name] for name in FITTED})]
        np.testing.assert_allclose(runs[1].joint_angles, runs[0].joint_angles, atol=1e-11)
    for joint in ("arm", "pendulum"):  # the same joints, signs and offsets as the input's
        assert back.recording.joints[joint].sign == config.recording.joints[joint].sign
        assert back.recording.joints[joint].name == config.recording.joints[joint].name
    if writer is ros_frames_urdf:  # everything else as it was: the bob, the frames, the limits
        for kept in ('<joint name="bob_mount" type="fixed">', 'rpy="0.3 -0.2 0.5"',
                     '<limit lower="-10" upper="10" effort="1" velocity="50"/>',
                     f'<mass value="{BOB_MASS!r}"/>', 'rpy="0.0 0.0 0.4"'):
            assert kept in text, kept


def test_a_generated_calibrated_urdf_reads_the_same_recordings_and_keeps_its_lines(tmp_path):
    """Generated (no URDF in the config): it reads the recordings the config reads.

    The recordings' joint names and signs, a value at its bound read back as that bound, a
    rigid arm, and a file laid out line by line with its notes.
    """
    import dataclasses

    from mb_estimation.config.schema import JointMapping
    from mb_estimation.io.urdf_files import calibrated_urdf

    config = load_config("furuta_synthetic")
    config = dataclasses.replace(config, recording=dataclasses.replace(
        config.recording, joints={"arm": JointMapping("joint0"),
                                  "pendulum": JointMapping("joint1", sign=-1)}))
    # J_Azz at its lower bound, below J_Ayy - J_Axx (iyy = izz as the peer's xacro has it)
    values = {**config.parameters, **FITTED, "J_Azz": 1e-12, "J_Axx": 1e-6, "J_Ayy": 5e-4}
    text = calibrated_urdf(config, values)
    back = _read_back(tmp_path, text)
    assert back.parameters["J_Azz"] == 1e-12  # 9.99999996e-13 out of the URDF's frames
    assert back.parameters["J_Ayy"] == pytest.approx(1e-6 + 1e-12, rel=1e-9)  # lowered
    assert "J_Ayy lowered from 0.0005 to 1e-06 kg m^2" in text
    assert [(back.recording.joints[j].name, back.recording.joints[j].sign)
            for j in ("arm", "pendulum")] == [("joint0", 1), ("joint1", -1)]
    assert len(text.splitlines()) > 30 and "<!-- mb-estimation: J_Ayy lowered" in \
        text.splitlines()[2], text[:400]


def test_calibrated_urdf_loads_in_another_reader_with_the_fitted_dynamics(tmp_path):
    """Another reader (yourdfpy) loads the calibrated rig, with the fitted dynamics.

    Its energies are the reference model's at the fitted values.
    """
    from mb_estimation.io.urdf_files import calibrated_urdf

    config = load_config(write_config(tmp_path, ros_frames_urdf()))
    path = tmp_path / "calibrated.urdf"
    # a J_Azz with a rotor in it: more than J_Axx + J_Ayy, which no rigid body has
    fitted = {**FITTED, "J_Azz": 0.01}
    text = calibrated_urdf(config, {**config.parameters, **fitted})
    path.write_text(text)
    back = _read_back(tmp_path, text)
    assert back.parameters["J_Azz"] == pytest.approx(0.01, rel=1e-12)
    assert back.parameters["J_Axx"] + back.parameters["J_Ayy"] >= 0.01 * (1 - 1e-12)
    assert "J_Ayy raised from 0.003 to 0.0099 kg m^2" in text
    from mb_estimation.io.urdf_files import urdf_notes  # what calibrate prints of it

    notes = urdf_notes(config, {**config.parameters, **fitted})
    assert notes[0].startswith("J_Ayy raised from 0.003 to 0.0099 kg m^2")
    assert "J_Byy 0.0042 exceeds" in notes[1]  # 0.0042 > 1e-4 + 0.004
    # the arm's axis points down here: an input along it turns the arm with -K
    assert notes[2].endswith(f"so along it the gain is {-config.parameters['K']:.6g}")
    assert not any("input gain" in note for note in urdf_notes(
        load_config("furuta_synthetic"), {**config.parameters, **fitted}))
    assert not any("tilt" in note for note in notes)  # level: nothing to say
    tilted = urdf_notes(config, {**config.parameters, **fitted, "tilt": (0.9998, 0.02, 0.0, 0.0)})
    assert any(note.startswith("the rig's tilt (gravity's lean") for note in tilted)
    assert all(note in text for note in notes)
    truth = {**{name: float(value) for name, value in config.parameters.items()
                if not isinstance(value, tuple)}, **fitted, "J_shaft": 0.0,
             "tilt": [1.0, 0.0, 0.0, 0.0]}
    mappings = [config.recording.joints[joint] for joint in ("arm", "pendulum")]
    angles, rates = np.array([0.4, 2.1]), np.array([-1.5, 3.0])
    kinetic, _ = _urdf_energies(path, 9.82, [m.to_recorded(a) for m, a in zip(
        mappings, angles, strict=True)], [m.sign * r for m, r in zip(mappings, rates,
                                                                      strict=True)])
    assert kinetic == pytest.approx(kinetic_energy_reference(truth, angles, rates), rel=1e-7)


def test_robot_description_is_the_nodes_and_the_commands_say_so(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("rig: furuta\nurdf: {file: robot_description}\nparameters: {K: 1.0}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert "robot_description is read by the node" in str(raised.value)
    from mb_estimation.config import needs_robot_description

    assert needs_robot_description(config) and not needs_robot_description("furuta")
    assert load_config(config, model_frames_urdf()).parameters["l2"] == G5["l2"]
