"""The settings sections ``method``, ``simulation``, ``node``, ``advanced`` and ``recording``.

Each has a field table.

A field table maps every key of a section (in the dataclass's order) to its check
(:mod:`mb_estimation.config.checks`); the entries of ``recording.joints`` have one too
(:data:`JOINT_FIELDS`). :func:`~mb_estimation.config.checks.read_section` reads a section by its
table, and a section's rules that span fields follow it (the node's buffer must hold a window
and a stride; a JointState voltage needs its joint).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mb_estimation.config.checks import (
    Check,
    at_least,
    boolean,
    describe,
    fail,
    is_number,
    mapping,
    non_negative,
    number,
    one_of,
    positive,
    read_section,
    refinement_mode,
    string,
    suggest,
    verbatim_string,
)
from mb_estimation.config.schema import (
    ESTIMATORS,
    STAMP_SOURCES,
    VOLTAGE_TYPES,
    AdvancedSettings,
    JointMapping,
    MethodSettings,
    NodeSettings,
    RecordingSettings,
    SimulationSettings,
)
from mb_estimation.message_types import JOINT_STATE, normalise_message_type
from mb_estimation.rigs.parameters import RigSpec

METHOD_FIELDS: dict[str, Check] = {
    "step_s": positive,
    "kappa": positive,
    "simulation_refinement": refinement_mode,
    "max_iterations": at_least(1),
    "time_limit_s": positive,
}

ADVANCED_FIELDS: dict[str, Check] = {
    "estimator": one_of(ESTIMATORS, "estimator"),
    "refinement_levels": at_least(1),
    "simulation_segment_s": positive,
    "filter_cutoff_hz": positive,
    "gradient_tolerance": non_negative,
    "step_tolerance": non_negative,
    "drift_correction": boolean,
}

SIMULATION_FIELDS: dict[str, Check] = {
    "dt": positive,
    "rate_hz": positive,
    "noise_rad": non_negative,
    "encoder_counts": at_least(1),
}

NODE_FIELDS: dict[str, Check] = {
    "name": verbatim_string,
    "window_s": positive,
    "stride_s": positive,
    "buffer_s": positive,
    "max_rate_hz": positive,
    "pending_windows": at_least(1),
    "drift_noise": positive,
    "drift_noise_by_parameter": verbatim_string,
    "drift_prior": positive,
    "drift_alarm_std": positive,
    "drift_alarm_s": non_negative,
    "max_cost": positive,
    "min_motion_rad": non_negative,
    "max_joint_speed_rad_s": positive,
    "state_file": verbatim_string,
    "warm_up": boolean,
    "push_target_node": verbatim_string,
    "push_mapping": verbatim_string,
}


def parse_method(raw: Any, source: str) -> MethodSettings:
    """The ``method`` section."""
    return MethodSettings(**read_section(raw, source, "method", METHOD_FIELDS, MethodSettings()))


def parse_advanced(raw: Any, source: str) -> AdvancedSettings:
    """The ``advanced`` section."""
    return AdvancedSettings(**read_section(raw, source, "advanced", ADVANCED_FIELDS,
                                           AdvancedSettings()))


def parse_simulation(raw: Any, source: str) -> SimulationSettings:
    """The ``simulation`` section."""
    return SimulationSettings(**read_section(raw, source, "simulation", SIMULATION_FIELDS,
                                             SimulationSettings()))


def parse_node(raw: Any, source: str) -> NodeSettings:
    """The ``node`` section; its buffer must hold a window and a stride."""
    if isinstance(raw, Mapping) and "forgetting" in raw:
        fail(source, "node.forgetting", "is gone: the node tracks each parameter's drift "
             "instead (node.drift_noise, drift_prior, drift_alarm_std, drift_alarm_s); "
             "remove the key")
    settings = NodeSettings(**read_section(raw, source, "node", NODE_FIELDS, NodeSettings()))
    if settings.buffer_s < settings.window_s + settings.stride_s:
        fail(source, "node.buffer_s", f"must hold a window and a stride "
             f"({settings.window_s + settings.stride_s:g} s), got {settings.buffer_s:g} s")
    drift_noise_by_parameter(settings, source)
    return settings


def drift_noise_by_parameter(settings: NodeSettings, source: str = "config") -> dict[str, float]:
    """``node.drift_noise_by_parameter`` read: name -> positive rate noise."""
    from mb_estimation.config.overrides import parse_assignments

    text = (settings.drift_noise_by_parameter or "").strip()
    key = "node.drift_noise_by_parameter"
    values = parse_assignments(text, f"{source}: {key}") if text else {}
    for name, value in values.items():
        if isinstance(value, tuple) or not (math.isfinite(value) and value > 0.0):
            fail(source, key, f"{name}: expected a positive number, got {value!r}")
    return values


# --------------------------------------------------------------------------------------------
# recording


def _sign(value: Any, source: str, key: str) -> int:
    """1 or -1."""
    if not is_number(value) or float(value) not in (1.0, -1.0):
        fail(source, key, f"must be 1 or -1, got {describe(value)}")
    return int(value)


JOINT_FIELDS: dict[str, Check] = {"name": string, "offset": number, "sign": _sign}


def _joint(raw: Any, joint: str, source: str, key: str) -> JointMapping:
    """One rig joint's mapping: a recorded name, or ``{name, offset, sign}`` (JOINT_FIELDS)."""
    if isinstance(raw, str):
        return JointMapping(string(raw, source, key))
    raw = mapping(raw, source, key, "a mapping {name: ..., offset: ..., sign: ...} or a name")
    return JointMapping(**read_section(raw, source, key, JOINT_FIELDS, JointMapping(joint)))


def _joints(rig: RigSpec) -> Check:
    """The check of ``recording.joints``: one mapping per joint of ``rig``, distinct names."""
    def check(value: Any, source: str, key: str) -> dict[str, JointMapping]:
        raw = mapping(value, source, key, "a mapping of rig joints to recorded joints")
        for joint in raw:
            if joint not in rig.joints:
                fail(source, f"{key}.{joint}",
                     f"unknown joint of rig {rig.name}{suggest(str(joint), rig.joints)} "
                     f"(rig joints: {', '.join(rig.joints)})")
        for joint in rig.joints:
            if joint not in raw:
                fail(source, key, f"missing an entry for rig joint {joint!r} (e.g. {joint}: "
                                  f"{{name: <recorded joint name>, offset: 0.0, sign: 1}})")
        joints = {joint: _joint(raw[joint], joint, source, f"{key}.{joint}")
                  for joint in rig.joints}
        seen: dict[str, str] = {}
        for joint, joint_mapping in joints.items():
            if joint_mapping.name in seen:
                fail(source, key, f"rig joints {seen[joint_mapping.name]!r} and {joint!r} both "
                                  f"map to recorded joint {joint_mapping.name!r}")
            seen[joint_mapping.name] = joint
        return joints
    return check


def _voltage_script(raw: Any, source: str, key: str) -> tuple[tuple[float, float], ...]:
    """A number (constant from 0 on) or increasing ``[time_s, value]`` pairs."""
    example = "a list of [time_s, value] pairs, e.g. [[0.0, 0.43]] for a constant input"
    if is_number(raw):
        return ((0.0, float(raw)),)
    if not isinstance(raw, list) or not raw:
        fail(source, key, f"must be a number or {example}, got {describe(raw)}")
    pairs = []
    for k, pair in enumerate(raw):
        if not (isinstance(pair, list) and len(pair) == 2 and all(map(is_number, pair))):
            fail(source, f"{key}[{k}]", f"must be a [time_s, value] pair of numbers, got "
                                        f"{describe(pair)}")
        pairs.append((float(pair[0]), float(pair[1])))
    times = [t for t, _ in pairs]
    if any(b <= a for a, b in zip(times[:-1], times[1:], strict=True)):
        fail(source, key, f"times must increase, got {times}")
    if not all(math.isfinite(v) for pair in pairs for v in pair):
        fail(source, key, "times and values must be finite")
    return tuple(pairs)


def recording_fields(rig: RigSpec) -> dict[str, Check]:
    """The ``recording`` section's field table (the joints are the rig's)."""
    return {
        "joint_states_topic": string,
        "joints": _joints(rig),
        "voltage_topic": string,
        "voltage_type": one_of(VOLTAGE_TYPES, "voltage message type", normalise_message_type),
        "voltage_index": at_least(0),
        "voltage_joint": string,
        "stamp_source": one_of(STAMP_SOURCES, "stamp source"),
        "voltage_script": _voltage_script,
        "use_driver_velocities": boolean,
        "input_delay_s": number,
    }


def parse_recording(raw: Any, rig: RigSpec, source: str,
                    joints: dict[str, JointMapping] | None = None) -> RecordingSettings:
    """The ``recording`` section; a JointState voltage (of a rig with inputs) needs its joint.

    ``joints``: the joints' mapping where the section gives none (None: the rig's names).
    """
    defaults = RecordingSettings.for_rig(rig)
    if joints is not None:
        defaults = RecordingSettings(joints=joints)
    settings = RecordingSettings(**read_section(raw, source, "recording", recording_fields(rig),
                                                defaults))
    if settings.voltage_type == JOINT_STATE and settings.voltage_joint is None and rig.inputs:
        fail(source, "recording.voltage_joint",
             f"required when voltage_type is {JOINT_STATE} (the recorded joint whose effort "
             f"field holds the voltage)")
    return settings
