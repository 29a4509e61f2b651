"""Outputs of ``mb-estimation excite``: excitation.csv, excitation.yaml, excitation.png.

excitation.csv holds ``time_s,input``: the input at each sample [the rig's input units], held
until the next one, as a rig's controller plays it (``simulate --input``, ``rig-sim --input``
and the exciter node read it back: :mod:`mb_estimation.io.excitation_files`).
excitation.yaml gives the criterion, the values designed at, the limits (and the share of the
arm's the design stays within), the multisine's frequencies, amplitudes and phases, its fade,
and the predicted std per free parameter for the design and for the plain ``multisine``
scenario at the same bound and duration. The figure shows the
input and the simulated angles with the arm's limits, and the predicted relative std of each free
parameter, design beside multisine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from mb_estimation.excitation import (
    ARM_LIMIT_SHARE,
    ExcitationDesign,
    Limits,
    Response,
)
from mb_estimation.fade import RAMP_S
from mb_estimation.io.files import write_text_atomically
from mb_estimation.multisines import played, schroeder_phases
from mb_estimation.report.figures import JOINT_LABELS, new_figure, png_bytes
from mb_estimation.scenarios import MULTISINE_FREQUENCIES_HZ

CRITERION = ("worst relative std (the largest std / |value| of the free parameters) towards half "
             "the multisine's, each std at most 1.2 times the multisine's: the larger ratio to "
             "its goal")


def excitation_csv(design: ExcitationDesign) -> str:
    """``time_s,input`` rows, full precision."""
    rows = [f"{t!r},{u!r}" for t, u in zip(design.time_s.tolist(), design.inputs.tolist(),
                                            strict=True)]
    return "\n".join(["time_s,input", *rows]) + "\n"


def _predicted(response: Response) -> dict:
    return {"worst_relative_std": response.worst_relative_std,
            "arm_peak_rad": response.arm_peak_rad, "arm_rate_peak_rad_s": response.arm_rate_peak,
            "parameters": {name: {"std": std, "relative_std": response.relative_std[name]}
                           for name, std in response.std.items()}}


def excitation_document(design: ExcitationDesign, limits: Limits, noise_rad: float,
                        designed_at: dict[str, float]) -> dict:
    """The content of excitation.yaml (plain types).

    ``designed_at``: the free parameters' values the bound was predicted at.
    """
    return {
        "criterion": CRITERION,
        "designed_at": {name: float(value) for name, value in designed_at.items()},
        "noise_rad": noise_rad,
        "duration_s": float(design.time_s[-1]),
        "rate_hz": float(1.0 / (design.time_s[1] - design.time_s[0])),
        "limits": {"max_input": limits.max_input, "max_arm_rad": limits.max_arm_rad,
                   "max_arm_rate_rad_s": limits.max_arm_rate,
                   "designed_within_share": ARM_LIMIT_SHARE},
        "input": {"peak": design.scale, "fade_s": RAMP_S,
                  "frequencies_hz": [round(f, 12) for f in design.frequencies_hz.tolist()],
                  "amplitudes": design.amplitudes.tolist(), "phases_rad": design.phases.tolist()},
        "evaluations": design.evaluations,
        "seed": design.seed,
        "improved_on_the_multisine": design.improved,
        "design": _predicted(design.design),
        "multisine": {"peak": design.multisine_scale, **_predicted(design.multisine)},
    }


def multisine_input(design: ExcitationDesign) -> np.ndarray:
    """The multisine the design is compared with, on the design's samples [input units]."""
    count = len(MULTISINE_FREQUENCIES_HZ)
    return played(design.time_s, np.ones(count), MULTISINE_FREQUENCIES_HZ,
                  schroeder_phases(count), design.multisine_scale)


def excitation_figure(design: ExcitationDesign, limits: Limits):
    """The input, the simulated angles and the predicted relative stds.

    The arm's limits dashed, the share the design keeps within dotted, its largest rate (and
    limit) in the angles' title.
    """
    figure = new_figure(8.0)
    input_axes, angle_axes, std_axes = figure.subplots(3, 1)
    input_axes.plot(design.time_s, multisine_input(design), color="0.6", linewidth=0.8,
                    label="multisine")
    input_axes.plot(design.time_s, design.inputs, color="tab:red", linewidth=1.0,
                    label="design")
    input_axes.axhline(limits.max_input, color="0.4", linestyle="--", linewidth=0.8)
    input_axes.axhline(-limits.max_input, color="0.4", linestyle="--", linewidth=0.8)
    input_axes.set(xlabel="time [s]", ylabel="input",
                   title="designed input beside the multisine (bound dashed)")
    input_axes.legend(loc="upper right", fontsize="small")
    for joint, label in enumerate(JOINT_LABELS[:design.design.angles.shape[1]]):
        line, = angle_axes.plot(design.time_s, design.design.angles[:, joint], linewidth=1.0,
                                label=f"{label}, design")
        angle_axes.plot(design.time_s, design.multisine.angles[:, joint], linewidth=0.8,
                        color=line.get_color(), alpha=0.45, label=f"{label}, multisine")
    if limits.max_arm_rad is not None:
        start = design.design.angles[0, 0]
        for side in (-1, 1):
            for share, style in ((1.0, "--"), (ARM_LIMIT_SHARE, ":")):
                angle_axes.axhline(start + side * share * limits.max_arm_rad, color="0.4",
                                   linestyle=style, linewidth=0.8)
    share = f"{100 * ARM_LIMIT_SHARE:g} %"
    rate = f"the arm's largest rate {design.design.arm_rate_peak:.3g} rad/s"
    if limits.max_arm_rate is not None:
        rate += f" (limit {limits.max_arm_rate:g}, kept within {share})"
    angle_axes.set(xlabel="time [s]", ylabel="angle [rad]",
                   title=f"simulated response, rigid model (arm limits dashed, {share} of "
                         f"them dotted)\n{rate}")
    angle_axes.legend(loc="upper right", fontsize="small")
    names = list(design.design.std)
    positions = np.arange(len(names))
    for offset, (label, response) in zip((-0.2, 0.2), (("design", design.design),
                                                        ("multisine", design.multisine)),
                                         strict=True):
        std_axes.bar(positions + offset, [100 * response.relative_std[n] for n in names],
                     width=0.4, label=label)
    std_axes.set_xticks(positions, names)
    std_axes.set_yscale("log")
    std_axes.set(ylabel="predicted std [% of value]",
                 title="Cramér–Rao bound of each free parameter (log scale)")
    std_axes.legend(fontsize="small")
    return figure


def write_excitation(output: Path, design: ExcitationDesign, limits: Limits,
                     noise_rad: float, designed_at: dict[str, float]) -> tuple[Path, ...]:
    """Write the three files into ``output``; their paths."""
    paths = (output / "excitation.csv", output / "excitation.yaml", output / "excitation.png")
    write_text_atomically(paths[0], excitation_csv(design))
    write_text_atomically(paths[1], yaml.safe_dump(
        excitation_document(design, limits, noise_rad, designed_at), sort_keys=False))
    paths[2].write_bytes(png_bytes(excitation_figure(design, limits)))
    return paths
