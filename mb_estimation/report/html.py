"""Self-contained HTML calibration report (one file, figures embedded as base64 PNG).

``report.html`` holds, in order:

* a header: title, the solver's message and a status line (converged, iterations, cost with its
  observation and impulse parts, compile and solve time, steps), the notes, the method settings;
* the parameter table: value ± standard deviation, unit, relative standard deviation, and
  whether the data determine the parameter ("not determined" highlighted);
* the parameter correlation matrix (heat map with the values in the cells, and as a table;
  "—" where a variance is infinite or zero);
* convergence: cost per LM iteration (log scale; total, observation, impulse) and one panel per
  free parameter with its value per iteration;
* the consistent path's stages: each free parameter at every step (and through the simulator
  where that fit is kept), its change over the last two steps in standard deviations, and
  whether it settled (a value that still moves with the step is a shadow of the method, not of
  the rig);
* per recording: measured vs shadow (estimated) joint angles, the residuals measured − shadow
  at the observed grid points, the short-horizon predictions from the estimated states (RMS
  error against the lead time) and the open-loop simulation vs measured with its RMS errors.

The PNGs are also written to ``figures/``. The page references nothing outside itself (no
external CSS, scripts or fonts), so it reads offline; all text is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mb_estimation.report import figures

if TYPE_CHECKING:  # annotations only: the report itself needs neither JAX nor SciPy
    from matplotlib.figure import Figure

    from mb_estimation.estimation.result import EstimationResult
    from mb_estimation.signals.preprocess import GridData
    from mb_estimation.validation import OpenLoopCheck, PredictionCheck

STYLE = """
body { font-family: sans-serif; max-width: 960px; margin: 1em auto; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th { background: #f0f0f0; } td.name, th.name { text-align: left; }
.status { font-size: 0.95em; } .warn { color: #b00; font-weight: bold; }
tr.not-excited td { background: #fde8e8; } td.strong { background: #fff2c0; }
figure { margin: 0.8em 0; } figure img { max-width: 100%; }
figcaption { font-size: 0.85em; color: #555; }
"""


def _text(value: object) -> str:
    return html.escape(str(value))


def _number(value: float, fmt: str = ".4g") -> str:
    value = float(value)
    if math.isnan(value):
        return figures.MISSING
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return format(value, fmt)


def _setting(value: object) -> str:
    """A method setting as read: numbers, yes/no, none, a mapping as ``key: value`` pairs."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        return ", ".join(f"{key}: {_setting(item)}" for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_setting(item) for item in value)
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]],
           row_classes: Sequence[str] = ()) -> str:
    """An HTML table; ``header`` is plain text, the cells are HTML already escaped."""
    head = "".join(f'<th class="name">{_text(header[0])}</th>' if i == 0 else f"<th>{_text(h)}</th>"
                   for i, h in enumerate(header))
    body = []
    for index, row in enumerate(rows):
        css = f' class="{row_classes[index]}"' if index < len(row_classes) and row_classes[index] \
            else ""
        cells = "".join(cell if cell.startswith("<td") else
                        (f'<td class="name">{cell}</td>' if i == 0 else f"<td>{cell}</td>")
                        for i, cell in enumerate(row))
        body.append(f"<tr{css}>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _embed(figure: Figure, path: Path, caption: str) -> str:
    """Write ``figure`` to ``path`` and return it as an ``<figure>`` with a data URI."""
    png = figures.png_bytes(figure)
    path.write_bytes(png)
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{_text(caption)}">'
            f"<figcaption>{_text(caption)} ({_text(path.parent.name + '/' + path.name)})"
            "</figcaption></figure>")


def _status(result: EstimationResult) -> str:
    items = [
        f"converged: {'yes' if result.converged else 'no'} ({result.status})",
        f"iterations: {result.iterations}",
        f"cost: {_number(result.cost)}",
        f"observation MSE: {_number(result.observation_mse)}",
        f"impulse MSE: {_number(result.impulse_mse)}",
        f"compile: {result.compile_time_s:.1f} s",
        f"solve: {result.solve_time_s:.1f} s",
        f"steps: {result.num_steps}",
    ]
    css = "" if result.converged else ' class="warn"'
    return (f"<p{css}>{_text(result.message)}</p>"
            f'<p class="status">{" · ".join(_text(item) for item in items)}</p>')


def _verdict_section(verdict) -> str:
    head = "trustworthy" if verdict.trustworthy else "not trustworthy"
    css = "" if verdict.trustworthy else ' class="warn"'
    items = "".join(f"<li>{_text(f.problem)}<br>→ {_text(f.action)}</li>"
                    for f in verdict.findings)
    notes = "".join(f"<p>Note: {_text(text)}</p>" for text in verdict.advice)
    return (f"<h2>Verdict</h2><p{css}><strong>{_text(head)}</strong>: "
            f"{_text(verdict.summary)}</p>" + (f"<ul>{items}</ul>" if items else "") + notes)


def _parameter_rows(result: EstimationResult, units: Mapping[str, str], identified):
    """The parameters' rows, each with its status where the data do not determine it."""
    from mb_estimation.estimation.identifiability import DETERMINED

    rows, classes = [], []
    for name in result.free:
        value = np.asarray(result.parameters[name], dtype=np.float64).ravel()
        std = np.asarray(result.std[name], dtype=np.float64).ravel()
        if value.size == 1:
            shown, spread = _number(value[0]), f"± {_number(std[0])}"
            relative = (100.0 * std[0] / abs(value[0]) if value[0] != 0 and not math.isnan(std[0])
                        else math.nan)
            relative_text = _number(relative, ".3g") + (" %" if math.isfinite(relative) else "")
        else:  # quaternion: value [w, x, y, z], std per tangent direction [rad]
            shown = "[" + ", ".join(_number(v) for v in value) + "]"
            spread = "± (" + ", ".join(_number(s) for s in std) + ") rad"
            relative_text = figures.MISSING
        status = identified.standing(name).status
        determined = status == DETERMINED
        rows.append([_text(name), _text(shown), _text(spread), _text(units.get(name, "")),
                     _text(relative_text),
                     "yes" if determined else f'<span class="warn">{_text(status)}</span>'])
        classes.append("" if determined else "not-excited")
    return rows, classes


def _parameters_section(result: EstimationResult, units: Mapping[str, str], identified,
                        model_error: bool) -> str:
    """The parameters' table.

    ``identified``: what the data determine of each; ``model_error``: the std include the
    model's error.
    """
    rows, classes = _parameter_rows(result, units, identified)
    table = _table(["parameter", "value", "± std", "unit", "relative std", "determined"], rows,
                   classes)
    spread = ("the sandwich covariance with the residuals' correlation in time (they include "
              "the model's error)" if model_error else "the linearised covariance")
    note = (f"<p>Standard deviations from {spread}; a quaternion's are per tangent direction "
            "(rotation vector) in rad. ∞: not determined by the data.</p>")
    return f"<h2>Parameters</h2>{table}{note}"


def _correlation_section(result: EstimationResult, directory: Path) -> str:
    labels = figures.tangent_labels(result.free, result.std)
    covariance = np.asarray(result.covariance, dtype=np.float64)
    if covariance.shape != (len(labels), len(labels)):
        raise ValueError(f"covariance is {covariance.shape}, the free parameters have "
                         f"{len(labels)} tangent directions")
    if not labels:
        return "<h2>Parameter correlation</h2><p>No free parameters.</p>"
    correlation = figures.correlation_matrix(covariance)
    image = _embed(figures.correlation_figure(correlation, labels),
                   directory / "correlation.png", "parameter correlation matrix")
    rows = []
    for i, label in enumerate(labels):
        cells = [_text(label)]
        for j, value in enumerate(correlation[i]):
            strong = i != j and math.isfinite(value) and abs(value) >= 0.9
            text = _number(value, ".2f")
            cells.append(f'<td class="strong">{text}</td>' if strong else text)
        rows.append(cells)
    table = _table([""] + labels, rows)
    note = (f"<p>{figures.MISSING}: undefined (infinite or zero variance); highlighted: "
            "|correlation| ≥ 0.9.</p>")
    return f"<h2>Parameter correlation</h2>{image}{table}{note}"


_SETTLED = {True: "yes", False: '<span class="warn">no: still moves</span>',
            None: "at its bound: no estimate"}


def _refinement_section(calibration) -> str:
    """The consistent path's stages side by side, with each parameter's step dependence."""
    stages = calibration.stages
    if not stages:
        return ""
    dependence = {row.name: row for row in calibration.assessment.step_dependence}
    header = (["parameter"] + [stage.label for stage in stages]
              + ["change", "change / std", "settled"])
    rows, classes = [], []
    for name in calibration.result.free:
        cells = [_text(name)]
        for stage in stages:
            value = np.asarray(stage.values.get(name, np.nan), dtype=np.float64).ravel()
            cells.append(_text(", ".join(_number(v) for v in value)))
        row = dependence.get(name)
        if row is None:
            cells += [figures.MISSING] * 3
            classes.append("")
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.abs(row.change) / row.std
            cells += [_text(", ".join(_number(v) for v in row.change)),
                      _text(", ".join(_number(v, ".2g") for v in ratio)),
                      _SETTLED[row.settled]]
            classes.append("not-excited" if row.settled is False else "")
        rows.append(cells)
    costs = ", ".join(f"{stage.dt:g} s: {_number(stage.cost)} ({stage.iterations} iterations)"
                      for stage in stages)
    note = ("<p>The consistent path fits at each step, coarse to fine, warm-started; the "
            "estimate is the last fit (after the joint levels, the simulation-error fit where "
            "it is kept: its values come from a converged simulation, not from the step). A "
            "parameter that moved by more than its standard deviation between the last two "
            f"joint levels still depends on the method. Costs: {_text(costs)}.</p>")
    return "<h2>Refinement</h2>" + _table(header, rows, classes) + note


def _convergence_section(result: EstimationResult, units: Mapping[str, str],
                         directory: Path) -> str:
    if not result.history:
        return "<h2>Convergence</h2><p>No iteration history.</p>"
    parts = [_embed(figures.cost_figure(result.history), directory / "cost.png",
                    "cost per Levenberg–Marquardt iteration")]
    if result.free:
        parts.append(_embed(figures.parameter_history_figure(result.history, result.free, units,
                                                             result.parameters),
                            directory / "parameters.png", "free parameters per iteration"))
    return "<h2>Convergence</h2>" + "".join(parts)


def _recording_section(index: int, grid: GridData, estimate, check: OpenLoopCheck | None,
                       prediction: PredictionCheck | None, directory: Path) -> str:
    name = grid.name
    observed = int(np.sum(np.asarray(grid.observed) > 0))
    duration = float(grid.time_s[-1] - grid.time_s[0]) if grid.num_steps else 0.0
    summary = (f"{grid.num_steps} steps of {grid.dt:g} s ({duration:.3g} s), {observed} observed; "
               f"observation MSE {_number(estimate.observation_mse)}, "
               f"impulse MSE {_number(estimate.impulse_mse)}")
    stem = f"recording{index + 1}"
    parts = [
        f"<h3>{_text(name)}</h3><p>{_text(summary)}</p>",
        _embed(figures.shadow_figure(name, grid, estimate), directory / f"{stem}_shadow.png",
               f"{name}: measured vs shadow joint angles"),
        _embed(figures.residual_figure(name, grid, estimate), directory / f"{stem}_residual.png",
               f"{name}: residuals measured − shadow"),
    ]
    if prediction is not None:
        parts.append(_embed(figures.prediction_figure(name, prediction),
                            directory / f"{stem}_prediction.png",
                            f"{name}: RMS error of {prediction.horizons_s[-1]:g} s predictions "
                            "from the estimated states (the model run as a simulator, step "
                            f"{prediction.simulation_dt:g} s)"))
    if check is not None:
        observed_mask = grid.observed if len(grid.observed) == len(check.time_s) else None
        parts.append(_embed(figures.open_loop_figure(name, check, observed_mask),
                            directory / f"{stem}_open_loop.png",
                            f"{name}: open-loop simulation vs measured"))
    return "".join(parts)


def write_report(directory: Path, calibration, *,
                 title: str = "mb-estimation calibration") -> Path:
    """Write ``directory/report.html`` and its PNG figures into ``directory/figures``.

    From a :class:`~mb_estimation.calibration.Calibration`: its result and grids, the
    assessment's replays and predictions (per recording), its method settings, notes, units,
    stages and verdict (shown first). Returns the path of report.html.
    """
    directory = Path(directory)
    result, grids, assessment = calibration.result, calibration.grids, calibration.assessment
    if len(grids) != len(result.recordings):
        raise ValueError(f"{len(grids)} grids for {len(result.recordings)} recordings")
    figure_dir = directory / "figures"
    figure_dir.mkdir(parents=True, exist_ok=True)

    parts = [f"<h1>{_text(title)}</h1>", _status(result),
             _verdict_section(calibration.verdict)]
    notes = [*calibration.notes, *([assessment.note] if assessment.note else [])]
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{_text(n)}</li>" for n in notes)
                     + "</ul>")
    parts.append("<h2>Method</h2>" + _table(
        ["setting", "value"],
        [[_text(k), _text(_setting(v))] for k, v in calibration.method.items()]))
    units = calibration.units
    parts.append(_parameters_section(result, units, assessment.identified,
                                     assessment.model_error_correlation_s is not None))
    parts.append(_refinement_section(calibration))
    parts.append(_correlation_section(result, figure_dir))
    parts.append(_convergence_section(result, units, figure_dir))
    parts.append("<h2>Recordings</h2>")
    checks, predictions = assessment.replays, assessment.predictions
    for index, (grid, estimate) in enumerate(zip(grids, result.recordings, strict=True)):
        check = checks[index] if index < len(checks) else None
        prediction = predictions[index] if index < len(predictions) else None
        parts.append(_recording_section(index, grid, estimate, check, prediction, figure_dir))

    page = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{_text(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")
    path = directory / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
