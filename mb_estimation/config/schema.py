"""The configuration's schema: frozen dataclasses, their defaults and the admissible choices.

No YAML and no checks here (reading is :mod:`mb_estimation.config.load`, the checks are
:mod:`mb_estimation.config.checks` and the section modules), and no import of the rigs at
module level: the launch files and :mod:`mb_estimation.ros.ros_common` read the defaults
without importing JAX.

A configuration has two parts. What the user states about the rig: its name and hinges, a value
for every model parameter without a default, which parameters are estimated ("free") and
within which bounds, and how recordings map onto it. Then settings with defaults that serve:
``method`` (what a user may tune), ``simulation``, ``node`` and ``advanced`` (the method's
internals). Parameter names, units and admissible ranges come from
:mod:`mb_estimation.rigs.parameters`. The file form (every value in SI units)::

    rig: furuta                # furuta | pendulum
    urdf:                      # furuta only, optional: the rig from its URDF or xacro file
      file: rig.urdf.xacro     # relative to this file (config/urdf.py)
      args: {m1: 0.04}         # xacro arguments (args_file: a ROS parameters file of them)
      arm_joint: joint0        # default: the URDF's two moving joints, the arm's first
      pendulum_joint: joint1
    hinges: rigid              # rigid (default: ball bearings, stiff shafts) | compliant (the
                               # hinge compliance and damping parameters are the rig's physics)
    friction: dry              # pendulum only: viscous | dry | stribeck (default dry)
    ripple_per_revolution: 8   # furuta only: periods per arm revolution of the motor's torque
                               # ripple (cogging), whose amplitudes are the ripple_cos*/sin*
                               # parameters; required where one of them is free or non-zero
    parameters:                # every parameter of the rig without a default (with a URDF:
                               # what it does not hold; a value here overrides the URDF's)
      l1: 0.128
      tilt: [1.0, 0.0, 0.0, 0.0]       # unit quaternion [w, x, y, z]
      ...
    free:                      # parameters to estimate; initial values = the values above
      J_Azz: {lower: 1.0e-6, upper: 1.0}   # bounds optional, default: the parameter's range
      J_Byy: {}                # (a plain list of names works too: free: [J_Azz, J_Byy])
      tilt: {}                 # quaternions take no bounds (estimated in their tangent space)
    recording:                 # how recordings map onto the rig (RecordingSettings), optional
      joint_states_topic: /joint_states
      joints:                  # one entry per rig joint: recorded = sign * model + offset
                               # (default: the URDF's joints, else the rig's joint names)
        arm: {name: arm, offset: 0.0, sign: 1}          # (or just  arm: joint0)
        pendulum: {name: pendulum, offset: 0.0, sign: 1}
      voltage_topic: /control_voltage
      voltage_type: std_msgs/msg/Float64   # | std_msgs/msg/Float64MultiArray
                                           # | sensor_msgs/msg/JointState (its effort field)
      voltage_index: 0         # index into Float64MultiArray data
      voltage_joint: null      # JointState type: the joint whose effort holds the voltage
      stamp_source: auto       # auto (header stamps when sane) | header | receive
      input_delay_s: 0.0       # the input acts this long after its stamps [s]
    method:                    # what a user may tune (MethodSettings), all optional
      step_s: null             # estimation step h [s]; null: the recordings' sample period
      kappa: 100.0             # state error weight (Omega^-1 = kappa I)
      simulation_refinement: on  # the last, simulation-error fit: on | off | auto
      max_iterations: 60       # Levenberg-Marquardt iteration limit of each joint fit
      time_limit_s: null       # no new iteration after this much solving [s] (node: 1.5 strides)
    simulation:                # forward simulation defaults (SimulationSettings), all optional
      dt: 2.5e-4               # simulation time step [s]
      rate_hz: 1000.0          # sample rate of recorded joint states [Hz]
      noise_rad: 0.0           # standard deviation of Gaussian angle noise [rad]
      encoder_counts: null     # counts per revolution for quantisation, or null
    node:                      # the online node (NodeSettings), all optional
    advanced:                  # the method's internals (AdvancedSettings), all optional:
      estimator: consistent    # estimator, refinement levels, shooting segment, filter,
                               # tolerances, drift correction

Rules: unknown keys are errors (with the closest valid name suggested); a settings key set to
null takes its default; numbers must be finite numbers (not strings, not booleans); values must
lie in the parameter's admissible range (no negative masses); a free parameter's bounds must
satisfy lower < upper and contain its initial value; the ``tilt`` quaternion must have norm 1
within :data:`QUATERNION_TOLERANCE` (it is then renormalised exactly). For the pendulum, only the
parameters of the chosen friction model may be free (``r_mu`` for ``dry``; ``r_mu_k``,
``r_mu_delta``, ``zeta`` for ``stribeck``), but every parameter must be given. YAML note:
``1e-4`` (no dot) is read as a number, unlike plain PyYAML.

Every problem raises one :class:`ConfigError` whose message names where the value came from (the
file) and the config key, e.g. ``config/x.yaml: parameters.J_Azz: expected a number, got 'abc'``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mb_estimation.errors import UserError
from mb_estimation.message_types import FLOAT64, VOLTAGE_TYPES

if TYPE_CHECKING:
    from mb_estimation.rigs.parameters import RigSpec

__all__ = [
    "ESTIMATORS",
    "HINGE_DECLARATIONS",
    "QUATERNION_TOLERANCE",
    "REFINEMENT_MODES",
    "STAMP_SOURCES",
    "TOP_LEVEL_KEYS",
    "VOLTAGE_TYPES",
    "Bounds",
    "Config",
    "ConfigError",
    "JointMapping",
    "AdvancedSettings",
    "MethodSettings",
    "NodeSettings",
    "RecordingSettings",
    "SimulationSettings",
]

QUATERNION_TOLERANCE = 1e-6  # allowed deviation of |tilt| from 1
STAMP_SOURCES = ("auto", "header", "receive")  # recording.stamp_source
ESTIMATORS = ("consistent", "paper")  # advanced.estimator
REFINEMENT_MODES = ("auto", "on", "off")  # method.simulation_refinement
HINGE_DECLARATIONS = ("rigid", "compliant")  # hinges
TOP_LEVEL_KEYS = ("rig", "urdf", "friction", "hinges", "ripple_per_revolution", "parameters",
                  "free", "recording", "method", "simulation", "node", "advanced")


def setting(default=dataclasses.MISSING, doc: str = "", *, factory=dataclasses.MISSING):
    """A settings field with what it does (``doc``): the config reference is generated from it."""
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


class ConfigError(UserError):
    """An invalid configuration (file or override); the message says where, which key and why."""


@dataclass(frozen=True)
class Bounds:
    """Box bounds ``lower <= value <= upper`` of a free parameter (paper §3.1, the box B).

    Quaternion parameters carry ``Bounds(-inf, inf)``: they are not bounded.
    """

    lower: float
    upper: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the closed box."""
        return self.lower <= value <= self.upper


@dataclass(frozen=True)
class MethodSettings:
    """What a user may tune of the fit (paper §3, §4.4, §4.6; the consistent path).

    Each field's ``doc`` says what it does (the config reference is generated from it). The
    method's internals are :class:`AdvancedSettings`. YAML true/false for
    ``simulation_refinement`` mean on/off.
    """

    step_s: float | None = setting(
        None, "the estimation step h [s]: the consistent path's finest, or the paper's fit's; "
        "null: the recordings' sample period within 1e-4–0.01 s (the node: 1 ms; the paper's "
        "fit: 0.01 s)")
    kappa: float = setting(100.0, "state error weight κ (Ω⁻¹ = κI): how little force noise the "
                           "fit allows; read at h = 0.01 s on a rig of 0.04 kg m² and scaled "
                           "per step and for the rig's inertia")
    simulation_refinement: str = setting(
        "on", "a last simulation-error fit (multiple shooting through the model `hinges` "
        "declares) on recordings longer than one of its segments: `on` (kept for compliant "
        "hinges; for rigid ones where its simulations follow the recordings within 1.5× the "
        "joint fit's angle noise, or predict them no worse), `off`, or `auto` (kept only where "
        "the joint fit does not predict the recordings 0.5 s ahead within 5× its angle noise "
        "and it predicts them better)")
    max_iterations: int = setting(60, "Levenberg–Marquardt iteration limit of each joint fit, "
                                  "at least 1 (the simulation-error fit keeps its own: 60 "
                                  "per segment length)")
    time_limit_s: float | None = setting(None, "no new iteration after this much solving per "
                                         "fit [s], compiling not counted; null: none (the "
                                         "node: 1.5 strides)")


@dataclass(frozen=True)
class AdvancedSettings:
    """The method's internals: defaults that serve; change them to study the method.

    The node fits one level at ``method.step_s``, else 1 ms (its step is fixed before data).
    """

    estimator: str = setting("consistent", "`consistent`: joint coordinates in the rigid limit, "
                             "fitted at `refinement_levels` steps down to `method.step_s`; "
                             "`paper`: the paper's single fit in maximal coordinates")
    refinement_levels: int = setting(2, "consistent: fits at steps step_s·2^(levels−1) … "
                                     "step_s, each started from the last")
    simulation_segment_s: float = setting(1.0, "the simulation-error fit's first shooting "
                                          "segments [s], lengthened while the simulation "
                                          "follows the data")
    filter_cutoff_hz: float = setting(10.0, "zero-phase Butterworth low-pass for the initial "
                                      "states [Hz]")
    gradient_tolerance: float = setting(1e-2, "stop when the projected gradient ‖Jᵀr‖ ≤ this "
                                        "(the paper: 10)")
    step_tolerance: float = setting(1e-6, "stop when the step ‖δ‖ ≤ this")
    drift_correction: bool = setting(False, "SPOOK rows with the constraints' curvature "
                                     "(damped stiff hinges without drift); false: the paper's "
                                     "rows (2.8)")


@dataclass(frozen=True)
class NodeSettings:
    """The online node: windows, acceptance, fusion, persistence, names."""

    name: str = setting("mb_estimator", "node name under `mb-estimation node`: topics and "
                        "services live under /<name>/")
    window_s: float = setting(5.0, "window length [s] (joint-state header stamps)")
    stride_s: float = setting(5.0, "time from one window's start to the next [s]; below "
                              "window_s the windows overlap, and each fuses with stride_s / "
                              "window_s of its information (each sample counted once)")
    buffer_s: float = setting(30.0, "ring buffer length [s]; must hold a window and a stride")
    max_rate_hz: float = setting(2000.0, "highest expected joint-state rate [Hz] (sizes the "
                                 "buffers and input queues)")
    pending_windows: int = setting(1, "windows waiting for the estimator; beyond, the oldest "
                                   "is dropped")
    drift_noise: float = setting(0.1, "drift filter: how far a parameter's rate may wander in "
                                 "an hour, as a fraction of its value per hour (the "
                                 "rate's random walk per √h)")
    drift_noise_by_parameter: str | None = setting(
        None, "the same for the named parameters in their units per hour per √h: "
        "`NAME=VALUE,...`; null: none")
    drift_prior: float = setting(0.5, "drift filter: each rate before the first window, 0 ± "
                                 "this fraction of the value per hour")
    drift_alarm_std: float = setting(3.0, "a rate this many std from zero is drifting")
    drift_alarm_s: float = setting(300.0, "the drift alarm: a rate drifting for this long [s] "
                                   "of the windows' stamps")
    max_cost: float = setting(1.0e-2, "a window whose final cost is above this is rejected")
    min_motion_rad: float = setting(0.05, "a window whose joints all move less than this [rad] "
                                    "is at rest (rejected)")
    max_joint_speed_rad_s: float = setting(
        100.0, "a window in which a joint moves faster than this [rad/s] between two samples "
        "holds a jump no rig makes (a driver restart, an encoder glitch): rejected")
    state_file: str | None = setting(None, "fused estimate persisted here (atomically) and "
                                     "reloaded at start; null: none")
    warm_up: bool = setting(True, "compile the solver on a synthetic window when the node is "
                            "configured")
    push_target_node: str | None = setting(None, "push each accepted fused estimate to this "
                                           "node's set_parameters service; null: no push")
    push_mapping: str | None = setting(None, "what is pushed: "
                                       "`estimate_name:controller_param,...`")


@dataclass(frozen=True)
class SimulationSettings:
    """Forward-simulation defaults (synthetic recordings)."""

    dt: float = setting(2.5e-4, "simulation time step [s] (the rigid model converges at 2.5e-4 s: "
                         "7e-5 rad over 8 s of the release); where it does not divide the "
                         "sample period, the largest step below it that does")
    rate_hz: float = setting(1000.0, "sample rate of the recorded joint states [Hz]")
    noise_rad: float = setting(0.0, "standard deviation of additive Gaussian angle noise [rad]")
    encoder_counts: int | None = setting(None, "counts per revolution for quantisation; null: "
                                         "none")


@dataclass(frozen=True)
class JointMapping:
    """How one rig joint appears in recordings: ``recorded = sign * model + offset``."""

    name: str  # joint name in the recorded sensor_msgs/JointState
    offset: float = 0.0  # [rad]
    sign: int = 1  # +1 or -1

    def to_model(self, recorded):
        """Model angle from a recorded angle (floats or arrays): ``sign * (recorded - offset)``."""
        return self.sign * (recorded - self.offset)

    def to_recorded(self, model):
        """Recorded angle from a model angle (floats or arrays): ``sign * model + offset``."""
        return self.sign * model + self.offset


@dataclass(frozen=True)
class RecordingSettings:
    """Topics, message types and joint mapping of recordings."""

    joint_states_topic: str = setting("/joint_states", "the rig's sensor_msgs/JointState topic")
    joints: dict[str, JointMapping] = setting(
        factory=dict, doc="per rig joint `{name: N, offset: O, sign: ±1}` (recorded = "
        "sign·model + offset [rad]), or just the recorded name")
    voltage_topic: str = setting("/control_voltage", "the motor voltage topic (a recording "
                                 "without messages on it is unforced: input 0)")
    voltage_type: str = setting(FLOAT64, "`std_msgs/msg/Float64`, "
                                "`std_msgs/msg/Float64MultiArray` or `sensor_msgs/msg/JointState` "
                                "(its effort)")
    voltage_index: int = setting(0, "Float64MultiArray: the voltage's index in `data`")
    voltage_joint: str | None = setting(None, "JointState: the joint whose effort holds the "
                                        "voltage")
    stamp_source: str = setting("auto", "`header` stamps, `receive` (bag) times, or `auto` "
                                "(header stamps when sane)")
    voltage_script: tuple[tuple[float, float], ...] | None = setting(
        None, "the input where it is known but not recorded: `[[t, value], ...]`, each value "
        "held from t [s] on (t from the first joint-state sample); the voltage topic is then "
        "not read")
    use_driver_velocities: bool = setting(False, "the driver's joint velocities (low-passed) "
                                          "for the initial state velocities instead of "
                                          "differences of the filtered angles")
    input_delay_s: float = setting(0.0, "the input acts this long after its recorded stamps "
                                   "[s] (a driver's transport and control delay; negative: "
                                   "before them); calibrate measures it and says so when it is "
                                   "not stated")

    @classmethod
    def for_rig(cls, rig: RigSpec) -> RecordingSettings:
        """Default settings for ``rig``: every joint recorded under its own name, unchanged."""
        return cls(joints={joint: JointMapping(joint) for joint in rig.joints})


@dataclass(frozen=True)
class Config:
    """A validated configuration.

    ``parameters`` holds every parameter of the rig in the rig's order (floats; ``tilt`` as a
    unit quaternion tuple ``(w, x, y, z)``); ``free`` maps the estimated parameters (in the rig's
    order) to their bounds; their values in ``parameters`` are the initial values.
    ``friction`` is the pendulum's friction model and ``None`` for other rigs.
    ``ripple_per_revolution``: the Furuta arm's torque ripple's periods per revolution, 0 where
    it has none. ``source`` names where the
    configuration came from (a path), for messages.
    """

    rig: str
    friction: str | None
    parameters: dict[str, float | tuple[float, float, float, float]]
    free: dict[str, Bounds]
    method: MethodSettings = field(default_factory=MethodSettings)
    simulation: SimulationSettings = field(default_factory=SimulationSettings)
    recording: RecordingSettings = field(default_factory=RecordingSettings)
    node: NodeSettings = field(default_factory=NodeSettings)
    advanced: AdvancedSettings = field(default_factory=AdvancedSettings)
    hinges: str = "rigid"  # rigid | compliant
    ripple_per_revolution: int = 0  # the arm torque ripple's periods per revolution (0: none)
    source: str = "<config>"
    # the rig's URDF where the config names one (config/urdf.py: UrdfRig)
    urdf: Any = field(default=None, compare=False)

    @property
    def rig_spec(self) -> RigSpec:
        """The rig's :class:`~mb_estimation.rigs.parameters.RigSpec`."""
        # here, not at module level: importing the rigs package imports JAX (module docstring)
        from mb_estimation.rigs.parameters import RIGS

        return RIGS[self.rig]

    @property
    def free_names(self) -> tuple[str, ...]:
        """Names of the free parameters, in the rig's order."""
        return tuple(self.free)

    @property
    def fixed_parameters(self) -> dict[str, float | tuple[float, float, float, float]]:
        """Values of the parameters that are not free."""
        return {name: value for name, value in self.parameters.items() if name not in self.free}

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form in the file schema (``parse_config(c.to_dict())`` gives ``c`` back).

        Only lists, dicts, strings, numbers and None: safe for ``yaml.safe_dump``.
        """
        spec = self.rig_spec
        free: dict[str, Any] = {}
        for name, bounds in self.free.items():
            if spec.parameter(name).kind == "quaternion":
                free[name] = {}
            else:
                free[name] = {"lower": bounds.lower, "upper": bounds.upper}
        data: dict[str, Any] = {"rig": self.rig}
        if self.friction is not None:
            data["friction"] = self.friction
        data["hinges"] = self.hinges
        if self.ripple_per_revolution:
            data["ripple_per_revolution"] = self.ripple_per_revolution
        data["parameters"] = {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in self.parameters.items()
        }
        data["free"] = free
        data["method"] = dataclasses.asdict(self.method)
        data["simulation"] = dataclasses.asdict(self.simulation)
        recording = dataclasses.asdict(self.recording)
        recording["joints"] = {
            joint: dataclasses.asdict(mapping) for joint, mapping in self.recording.joints.items()
        }
        if self.recording.voltage_script is not None:
            recording["voltage_script"] = [list(pair) for pair in self.recording.voltage_script]
        data["recording"] = recording
        data["node"] = dataclasses.asdict(self.node)
        data["advanced"] = dataclasses.asdict(self.advanced)
        return data
