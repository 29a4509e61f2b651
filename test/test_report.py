"""The HTML calibration report: content, self-containedness, escaping, correlation matrix."""

from __future__ import annotations

import base64
import re
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from mb_estimation.estimation.identifiability import (
    DETERMINED,
    NOT_DETERMINED,
    Identifiability,
    ParameterStanding,
)
from mb_estimation.estimation.result import EstimationResult, IterationRecord, RecordingEstimate
from mb_estimation.report import correlation_matrix, figures, write_report
from mb_estimation.signals.preprocess import GridData
from mb_estimation.validation import OpenLoopCheck
from mb_estimation.verdict import Verdict

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
N_STEPS = 50
DT = 0.02
GAP = slice(20, 25)  # unobserved grid points of the second recording
NAMES = ("rec one", "a<b>")
UNITS = {"J_Azz": "kg m^2", "b1": "N m s/rad", "tilt": "quaternion"}
METHOD = {"dt": DT, "kappa": 100.0, "filter_cutoff_hz": 10.0, "max_iterations": 60,
          "step_s": None, "refit": False, "advanced": {"refinement_levels": 2, "joint": True}}
# correlation, cost, parameters per iteration + (shadow, residuals, open loop) per recording
EXPECTED_FIGURES = 3 + 3 * len(NAMES)


def _quaternion(angle: float) -> np.ndarray:
    return np.array([np.cos(angle / 2), np.sin(angle / 2), 0.0, 0.0])


def _grid(index: int, name: str) -> GridData:
    time_s = 10.0 * index + DT * np.arange(N_STEPS)
    angles = np.stack([0.5 * np.sin(2.0 * time_s), np.pi - 0.3 * np.cos(3.0 * time_s)], axis=1)
    observed = np.ones(N_STEPS)
    if index == 1:
        observed[GAP] = 0.0
        angles[GAP] = 100.0  # would dominate any plot if drawn as a measurement
    return GridData(name=name, time_s=time_s, measured_angles=angles, filtered_angles=angles,
                    inputs=np.zeros((N_STEPS - 1, 1)), observed=observed, dt=DT)


def _estimate(grid: GridData) -> RecordingEstimate:
    shadow = np.where(grid.observed[:, None] > 0, grid.measured_angles, 0.0)
    shadow = shadow + 0.01 * np.cos(7.0 * grid.time_s)[:, None]
    zeros = np.zeros((N_STEPS, 2, 3))
    return RecordingEstimate(
        name=grid.name, time_s=grid.time_s, joint_angles=shadow,
        joint_rates=np.zeros((N_STEPS, 2)), position=zeros,
        orientation=np.tile([1.0, 0.0, 0.0, 0.0], (N_STEPS, 2, 1)), linear_velocity=zeros,
        angular_velocity=zeros, observation_mse=1e-4, impulse_mse=2e-4)


def _check(grid: GridData) -> OpenLoopCheck:
    time_s = grid.time_s
    simulated = np.stack([0.6 * np.sin(2.0 * time_s), np.pi - 0.2 * np.cos(3.0 * time_s)], axis=1)
    return OpenLoopCheck(name=grid.name, time_s=grid.time_s, measured=grid.measured_angles,
                         simulated=simulated, first_s=0.5, rms_first=np.array([0.01, 0.02]),
                         rms_all=np.array([0.03, 0.04]))


def _result(grids) -> EstimationResult:
    free = ("J_Azz", "b1", "tilt")
    std = {"J_Azz": np.array([1e-3]), "b1": np.array([np.inf]),
           "tilt": np.array([0.01, 0.02, 0.05])}
    covariance = np.diag([1e-6, np.inf, 1e-4, 4e-4, 2.5e-3])
    covariance[0, 2] = covariance[2, 0] = 0.5 * 1e-3 * 0.01  # correlation 0.5
    covariance[3, 4] = covariance[4, 3] = -0.95 * 0.02 * 0.05  # strongly correlated
    history = tuple(
        IterationRecord(iteration=k, cost=cost, observation_mse=0.4 * cost,
                        impulse_mse=0.6 * cost,
                        parameters={"J_Azz": np.array(0.02 - 0.005 * k),
                                    "b1": np.array(1e-3 / (k + 1)),
                                    "tilt": _quaternion(0.1 / (k + 1))},
                        damping=1e-3, gradient_norm=1.0 / (k + 1), step_norm=0.1, elapsed_s=k)
        for k, cost in enumerate((1.0, 1e-2, 3e-4)))
    parameters = {"l1": np.array(0.128), **history[-1].parameters, "J_Azz": np.array(0.01)}
    return EstimationResult(
        parameters=parameters, free=free, std=std,
        excited={"J_Azz": True, "b1": False, "tilt": True}, covariance=covariance,
        recordings=tuple(_estimate(g) for g in grids), cost=3e-4, observation_mse=1.2e-4,
        impulse_mse=1.8e-4, iterations=2, status="gradient",
        message="converged: gradient norm below tolerance", history=history,
        compile_time_s=1.5, solve_time_s=0.5)


def _calibration(result, grids, checks, notes=(), model_error_s=None):
    """What the report reads of a calibration (a hand-built stand-in: no fit runs here)."""
    return SimpleNamespace(
        result=result, grids=grids, notes=tuple(notes), units=UNITS, method=METHOD,
        verdict=Verdict((), "every free parameter determined"), stages=(),
        assessment=SimpleNamespace(replays=checks, predictions=(), step_dependence=(),
                                   note=None, model_error_correlation_s=model_error_s,
                                   identified=Identifiability(tuple(
                                       ParameterStanding(name, status, 0.1) for name, status in
                                       (("J_Azz", DETERMINED), ("b1", NOT_DETERMINED),
                                        ("tilt", DETERMINED))))))


@pytest.fixture(scope="module")
def inputs():
    grids = tuple(_grid(i, name) for i, name in enumerate(NAMES))
    return _result(grids), grids, tuple(_check(g) for g in grids)


@pytest.fixture(scope="module")
def report(inputs, tmp_path_factory):
    result, grids, checks = inputs
    directory = tmp_path_factory.mktemp("report")
    path = write_report(directory, _calibration(result, grids, checks,
                                                ["first <note>", "second"]),
                        title="Rig <7> & co")
    return directory, path, path.read_text(encoding="utf-8")


def test_report_files_are_written(report):
    directory, path, _ = report
    assert path == directory / "report.html"
    assert path.is_file()
    pngs = sorted((directory / "figures").glob("*.png"))
    assert len(pngs) == EXPECTED_FIGURES
    assert all(p.read_bytes().startswith(PNG_SIGNATURE) for p in pngs)


def test_report_embeds_every_figure_as_png_data_uri(report):
    directory, _, text = report
    assert text.count("data:image/png;base64,") == EXPECTED_FIGURES
    embedded = [base64.b64decode(data, validate=True)
                for data in re.findall(r'data:image/png;base64,([A-Za-z0-9+/=]+)"', text)]
    assert len(embedded) == EXPECTED_FIGURES
    assert all(png.startswith(PNG_SIGNATURE) for png in embedded)
    on_disk = {p.read_bytes() for p in (directory / "figures").glob("*.png")}
    assert set(embedded) == on_disk


def test_report_is_self_contained(report):
    text = report[2].lower()
    for reference in ("http://", "https://", "<script src", "<link", "@import", "url("):
        assert reference not in text


def test_report_content(report):
    text = report[2]
    for name in ("J_Azz", "b1", "tilt", "tilt_rx", "tilt_ry", "tilt_rz"):
        assert f">{name}<" in text
    assert "rec one" in text
    headings = [text.index(h) for h in ("<h2>Verdict", "<h2>Notes", "<h2>Method",
                                        "<h2>Parameters", "<h2>Parameter correlation",
                                        "<h2>Convergence", "<h2>Recordings")]
    assert headings == sorted(headings)
    assert text.count("not determined</span>") == 1  # b1 only
    assert "± ∞" in text  # b1's infinite std
    assert ">10 %<" in text  # J_Azz: 1e-3 / 0.01
    assert "± (0.01, 0.02, 0.05) rad" in text
    assert '<td class="strong">-0.95</td>' in text  # tilt_ry / tilt_rz
    assert f">{figures.MISSING}<" in text  # correlations of b1
    assert "converged: yes (gradient)" in text and "steps: 100" in text
    assert ">filter_cutoff_hz<" in text
    # settings as read, not as Python prints them
    assert "<td>none</td>" in text and "<td>no</td>" in text
    assert "<td>refinement_levels: 2, joint: yes</td>" in text and "None" not in text
    assert "Standard deviations from the linearised covariance;" in text


def test_the_report_says_where_the_std_include_the_models_error(inputs, tmp_path):
    result, grids, checks = inputs
    text = write_report(tmp_path, _calibration(result, grids, checks, model_error_s=0.2)
                        ).read_text(encoding="utf-8")
    assert ("Standard deviations from the sandwich covariance with the residuals' correlation "
            "in time (they include the model's error)") in text


def test_report_escapes_text(report):
    text = report[2]
    assert "a&lt;b&gt;" in text and "a<b>" not in text
    assert "Rig &lt;7&gt; &amp; co" in text
    assert "<li>first &lt;note&gt;</li>" in text


def test_report_rejects_grids_that_do_not_match_the_recordings(inputs, tmp_path):
    result, grids, checks = inputs
    with pytest.raises(ValueError, match="grids"):
        write_report(tmp_path, _calibration(result, grids[:1], checks))


def test_unobserved_points_are_not_drawn_as_measurements(inputs):
    result, grids, checks = inputs
    grid, estimate = grids[1], result.recordings[1]
    gap = np.zeros(N_STEPS, dtype=bool)
    gap[GAP] = True
    for figure in (figures.shadow_figure(grid.name, grid, estimate),
                   figures.residual_figure(grid.name, grid, estimate),
                   figures.open_loop_figure(grid.name, checks[1], grid.observed)):
        axes = figure.axes[:2]
        assert len(axes) == 2
        for joint, ax in enumerate(axes):
            measured = np.asarray(ax.lines[0].get_ydata(), dtype=float)
            assert np.isnan(measured[gap]).all()
            assert np.isfinite(measured[~gap]).all()
            assert np.abs(measured[~gap]).max() < 10.0
            assert ax.get_ylabel().endswith("[rad]")
            assert ax.get_ylim()[1] < 50.0, joint  # the sentinel 100 rad is not plotted


def test_residual_figure_reports_rms_of_observed_points(inputs):
    result, grids, _ = inputs
    grid, estimate = grids[1], result.recordings[1]
    figure = figures.residual_figure(grid.name, grid, estimate)
    observed = grid.observed > 0
    expected = np.sqrt(np.mean((0.01 * np.cos(7.0 * grid.time_s[observed])) ** 2))
    assert figure.axes[0].get_title(loc="left") == f"RMS {expected:.3g} rad"


def test_tangent_labels():
    std = {"J_Azz": np.array([1.0]), "tilt": np.ones(3), "b1": np.array([np.inf])}
    assert figures.tangent_labels(("J_Azz", "tilt", "b1"), std) == [
        "J_Azz", "tilt_rx", "tilt_ry", "tilt_rz", "b1"]


def test_correlation_matrix_of_a_regular_covariance():
    covariance = np.array([[4.0, 2.0, -1.0], [2.0, 9.0, 0.0], [-1.0, 0.0, 1.0]])
    correlation = correlation_matrix(covariance)
    np.testing.assert_allclose(np.diag(correlation), 1.0)
    np.testing.assert_allclose(correlation, correlation.T)
    np.testing.assert_allclose(correlation[0, 1], 2.0 / 6.0)
    np.testing.assert_allclose(correlation[0, 2], -0.5)


def test_correlation_matrix_marks_undetermined_parameters_nan_without_warnings():
    covariance = np.array([[4.0, 1.0, 0.0, 1.0],
                           [1.0, np.inf, 0.0, np.inf],
                           [0.0, 0.0, 0.0, 0.0],
                           [1.0, np.inf, 0.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        correlation = correlation_matrix(covariance)
        figure = figures.correlation_figure(correlation, ["a", "b", "c", "d"])
        figures.png_bytes(figure)
    valid = np.array([True, False, False, True])
    assert np.isnan(correlation[~valid]).all() and np.isnan(correlation[:, ~valid]).all()
    np.testing.assert_allclose(np.diag(correlation)[valid], 1.0)
    np.testing.assert_allclose(correlation[0, 3], 0.5)
    np.testing.assert_allclose(correlation, correlation.T, equal_nan=True)
    cells = [t.get_text() for t in figure.axes[0].texts]
    assert cells.count(figures.MISSING) == 12 and cells.count("1.00") == 2


def test_a_value_the_simulation_error_fit_moved_is_drawn_beside_the_joint_fits_history():
    history = [IterationRecord(iteration=k, cost=1.0 / (k + 1), observation_mse=0.0,
                               impulse_mse=0.0, parameters={"b2": np.asarray(1e-4 / (k + 1)),
                                                            "b1": np.asarray(1e-3)},
                               damping=1e-9, gradient_norm=1.0, step_norm=1.0, elapsed_s=0.0)
               for k in range(4)]
    figure = figures.parameter_history_figure(history, ("b1", "b2"), UNITS,
                                              {"b1": np.asarray(1e-3), "b2": np.asarray(9e-5)})
    first, second = figure.axes[:2]
    assert first.get_title() == "b1, final 0.001" and len(first.get_lines()) == 1
    assert second.get_title() == "b2: 2.5e-05, kept 9e-05"
    assert [line.get_ydata()[0] for line in second.get_lines()[1:]] == [9e-5]  # the kept value
    assert "simulation-error" in figure.get_suptitle()
    alone = figures.parameter_history_figure(history, ("b1", "b2"), UNITS)
    assert alone.axes[1].get_title() == "b2, final 2.5e-05"
    assert "simulation-error" not in alone.get_suptitle()
