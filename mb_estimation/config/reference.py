"""The configuration reference (``docs/config-reference.md``), generated from the schema.

``python -m mb_estimation.config.reference > docs/config-reference.md`` writes it; a test fails
when the file differs from what the schema gives. Each settings field documents itself through
its ``doc`` metadata (:func:`mb_estimation.config.schema.setting`); the parameters come from the
rigs' :class:`~mb_estimation.rigs.parameters.ParameterSpec`.
"""

from __future__ import annotations

import dataclasses

from mb_estimation.config import schema
from mb_estimation.rigs.parameters import RIGS

#: What the user states about the rig besides its parameters: (key, dataclass, purpose).
RIG_SECTIONS = (
    ("recording", schema.RecordingSettings,
     "how recordings map onto the rig: topics, joints, the input (all optional)"),
)

#: The settings sections with defaults that serve, in file order.
SECTIONS = (
    ("method", schema.MethodSettings, "what a user may tune of the fit (all optional)"),
    ("simulation", schema.SimulationSettings,
     "`simulate` and `rig-sim`: the simulator's step, rate and noise (all optional)"),
    ("node", schema.NodeSettings, "the online node (all optional)"),
    ("advanced", schema.AdvancedSettings,
     "the method's internals: defaults that serve; change them to study the method (all "
     "optional)"),
)

TOP_LEVEL = (
    ("rig", "required", "`furuta` or `pendulum`"),
    ("urdf", "none", "furuta only: the rig from its URDF — `file` (`.urdf` or `.xacro`, "
     "relative to the config), `args` (xacro arguments) and/or `args_file` (a ROS parameters "
     "file of them), `arm_joint`, `pendulum_joint` (default: the URDF's two moving joints); "
     "its geometry, masses, inertias, `<dynamics>` and joint names become the defaults of "
     "`parameters` and `recording.joints`"),
    ("hinges", "`rigid`", "`rigid`: ball bearings, stiff shafts (the rigid-limit model); "
     "`compliant`: the hinge compliance and damping parameters are the rig's physics"),
    ("friction", "`dry`", "pendulum only: `viscous`, `dry` or `stribeck`"),
    ("ripple_per_revolution", "none (no ripple)", "furuta only: periods per arm revolution of "
     "the motor's torque ripple (cogging), whose amplitudes are the `ripple_cos*`/`ripple_sin*` "
     "parameters; required where one of them is free or non-zero"),
    ("parameters", "required", "the rig's model parameters (below); those with a default may "
     "be left out"),
    ("free", "none (the states alone)", "the parameters to estimate: `NAME: {lower: L, "
     "upper: U}` (bounds optional: the parameter's range) or a list of names; start values "
     "are `parameters`"),
)


def _value(value) -> str:
    """A default as it would be written in the YAML file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"  # inf and -inf as such
    if isinstance(value, dict) and not value:
        return "every joint under its own name"
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section(key: str, settings, purpose: str) -> list[str]:
    lines = [f"## `{key}`", "", f"{purpose[0].upper()}{purpose[1:]}.", "",
             "| key | default | meaning |", "|---|---|---|"]
    for entry in dataclasses.fields(settings):
        if entry.default is not dataclasses.MISSING:
            default = entry.default
        else:
            default = entry.default_factory()
        lines.append(f"| `{entry.name}` | `{_value(default)}` | "
                     f"{_cell(entry.metadata.get('doc', ''))} |")
    return [*lines, ""]


def _parameters(rig) -> list[str]:
    lines = [f"### `{rig.name}`", "", "| name | unit | range | default | meaning |",
             "|---|---|---|---|---|"]
    for spec in rig.parameters:
        if spec.kind == "quaternion":
            bounds = "unit quaternion `[w, x, y, z]`"
        else:
            bounds = f"[{_value(spec.lower)}, {_value(spec.upper)}]"
        if spec.default is None:
            default = "required"
        elif isinstance(spec.default, tuple):  # a quaternion, as the YAML list
            default = f"`{list(spec.default)}`"
        else:
            default = f"`{_value(spec.default)}`"
        lines.append(f"| `{spec.name}` | {spec.unit} | {bounds} | {default} | "
                     f"{_cell(spec.description)} |")
    return [*lines, ""]


def config_reference() -> str:
    """The reference page's Markdown text."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the schema (`python -m mb_estimation.config.reference > "
        "docs/config-reference.md`); how to write a config for a rig is in "
        "[user-guide.md](user-guide.md#writing-the-config). Every value is in SI units; a key "
        "set to `null` takes its default; unknown keys are errors.",
        "",
        "A config has two parts: what you state about the rig (the top-level keys, the "
        "parameters, the recording mapping), then settings whose defaults serve (`method`, "
        "`simulation`, `node`, `advanced`).",
        "",
        "## Top level",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *(f"| `{key}` | {default} | {_cell(meaning)} |" for key, default, meaning in TOP_LEVEL),
        "",
    ]
    for key, settings, purpose in RIG_SECTIONS:
        lines += _section(key, settings, purpose)
    lines += ["## Parameters", "",
              "Every rig's model parameters: `parameters` gives their values (a `free` "
              "parameter's value is its start), `range` is the default box of a free one.", ""]
    for rig in RIGS.values():
        lines += _parameters(rig)
    for key, settings, purpose in SECTIONS:
        lines += _section(key, settings, purpose)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(config_reference(), end="")
