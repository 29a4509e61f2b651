"""Configurations: YAML in, validated frozen dataclasses out, and their overrides.

The rooms: :mod:`~mb_estimation.config.schema` (the dataclasses, their defaults and choices,
:class:`ConfigError`; the file form is documented there), :mod:`~mb_estimation.config.checks`
(the validation kit and the field-table reader), :mod:`~mb_estimation.config.parameters` (the
``parameters`` and ``free`` sections), :mod:`~mb_estimation.config.sections` (the settings
sections, a field table each), :mod:`~mb_estimation.config.load` (the YAML dialect,
:func:`parse_config`, :func:`load_config`), :mod:`~mb_estimation.config.builtin` (the built-in
configurations and the resolver of "a path or a built-in name") and
:mod:`~mb_estimation.config.overrides` (``--free``/``--set`` text, :func:`apply_overrides`).

The public names below are imported on first use: ``schema`` and ``builtin`` are pure Python,
and the launch files and :mod:`mb_estimation.ros.ros_common` import them without the rigs
(whose package imports JAX); the other rooms check values against the rigs' specs.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "schema": ("ESTIMATORS", "HINGE_DECLARATIONS", "QUATERNION_TOLERANCE", "REFINEMENT_MODES",
               "STAMP_SOURCES",
               "TOP_LEVEL_KEYS", "VOLTAGE_TYPES", "Bounds", "Config", "ConfigError",
               "JointMapping", "MethodSettings", "NodeSettings", "RecordingSettings",
               "SimulationSettings"),
    "load": ("load_config", "needs_robot_description", "parse_config"),
    "builtin": ("builtin_config_names", "builtin_config_path", "builtin_file", "resolve_config"),
    "overrides": ("apply_overrides", "parse_assignments", "parse_free_list",
                  "with_node_values"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    """A public name, imported from its room on first use (module docstring)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
