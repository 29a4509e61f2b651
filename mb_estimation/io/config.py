"""The configuration API under its old path.

Kept for scripts written against ``mb_estimation.io.config``; new code imports
:mod:`mb_estimation.config` (and :func:`mb_estimation.signals.recorded_joint_states`).
"""

from mb_estimation.config import (
    ESTIMATORS,
    QUATERNION_TOLERANCE,
    REFINEMENT_MODES,
    STAMP_SOURCES,
    TOP_LEVEL_KEYS,
    VOLTAGE_TYPES,
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
    with_section_values,
)
from mb_estimation.signals.joints import recorded_joint_states

__all__ = [
    "ESTIMATORS", "QUATERNION_TOLERANCE", "REFINEMENT_MODES", "STAMP_SOURCES", "TOP_LEVEL_KEYS",
    "VOLTAGE_TYPES", "Bounds", "Config", "ConfigError", "JointMapping", "MethodSettings",
    "NodeSettings", "RecordingSettings", "SimulationSettings", "apply_overrides",
    "builtin_config_names", "builtin_config_path", "load_config", "parse_assignments",
    "parse_config", "parse_free_list", "recorded_joint_states", "resolve_config",
    "with_section_values",
]
