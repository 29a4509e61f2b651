"""What the data determine: parameters, combinations, bounds (from a fit's covariance).

The rules on covariances built by hand, where the answer is known; the fits of
test_verdict.py check them on data.
"""

import numpy as np
import pytest

from mb_estimation.estimation.identifiability import (
    AT_LOWER_BOUND,
    AT_UPPER_BOUND,
    DETERMINED,
    NOT_DETERMINED,
    at_bound,
    identifiability,
)


def _log_covariance(values, log_covariance):
    """The covariance of ``values`` whose logarithms have ``log_covariance``."""
    scale = np.abs(np.asarray(values))
    return np.asarray(log_covariance) * np.outer(scale, scale)


def _identified(values, covariance, lower=None, upper=None):
    names = tuple(values)
    x = np.array([values[n] for n in names])
    std = {n: np.array([np.sqrt(covariance[i, i])]) for i, n in enumerate(names)}
    return identifiability(names, {n: np.array([values[n]]) for n in names}, std, covariance,
                           lower or {n: 0.0 for n in names}, upper or {n: 10.0 for n in names}
                           ) if x.size else None


def test_a_scale_the_data_leave_open_is_named_with_the_ratios_they_fix():
    """K and J_Azz (and b1) free together: their common scale open, their ratios sharp."""
    values = {"J_Azz": 2e-4, "K": 0.04, "b1": 0.01}
    spread = 1.2  # ±120 % along the common scale: ±69 % on each
    direction = np.ones(3) / np.sqrt(3)
    log_covariance = spread**2 * np.outer(direction, direction) + 0.01**2 * np.eye(3)
    identified = _identified(values, _log_covariance(list(values.values()), log_covariance))
    assert [p.status for p in identified.parameters] == [NOT_DETERMINED] * 3
    (combination,) = identified.undetermined
    assert set(combination.names) == {"J_Azz", "K", "b1"}
    assert combination.relative_std == pytest.approx(spread, rel=1e-3)
    assert "scaled together" in str(combination)
    ratios = {(r.numerator, r.denominator): r for r in identified.determined_ratios}
    assert len(ratios) == 2
    for ratio in ratios.values():
        assert ratio.power == pytest.approx(1.0, abs=1e-6)
        assert ratio.relative_std == pytest.approx(0.01 * np.sqrt(2), rel=1e-3)
        assert ratio.value == pytest.approx(values[ratio.numerator] / values[ratio.denominator])


def test_an_inertia_is_read_in_the_sum_the_arm_turns_with():
    """J_Azz is a small part of the arm's inertia I = J_Azz + F (F fixed: m_A l1², …).

    The data fix I/K and b1/K, so the open direction moves I, K and b1 together: in J_Azz's
    own logarithm it is almost all J_Azz, and without the sum no combination would be named.
    """
    values = {"J_Azz": 2e-4, "K": 0.04, "b1": 0.01}
    rest = 4e-3  # F [kg m²]
    spread = 1.2
    sums = np.array([values["J_Azz"] + rest, values["K"], values["b1"]])
    direction = np.ones(3) / np.sqrt(3)
    log_covariance = spread**2 * np.outer(direction, direction) + 0.01**2 * np.eye(3)
    covariance = _log_covariance(sums, log_covariance)  # an offset leaves it unchanged
    names = tuple(values)
    args = (names, {n: np.array([values[n]]) for n in names},
            {n: np.array([np.sqrt(covariance[i, i])]) for i, n in enumerate(names)},
            covariance, {n: 0.0 for n in names}, {n: 10.0 for n in names})
    assert identifiability(*args).undetermined == ()
    identified = identifiability(*args, offsets={"J_Azz": rest})
    (combination,) = identified.undetermined
    assert set(combination.names) == {"J_Azz", "K", "b1"}
    assert combination.relative_std == pytest.approx(spread, rel=1e-3)
    assert str(combination).startswith("(J_Azz + 0.004), K and b1 scaled together")
    shown = {str(r).split(" = ")[0] for r in identified.determined_ratios}
    assert shown == {"K/(J_Azz + 0.004)", "b1/(J_Azz + 0.004)"}, shown
    for ratio in identified.determined_ratios:
        assert ratio.value == pytest.approx(values[ratio.numerator] / sums[0])


def test_a_direction_the_data_hold_nothing_of_is_named_from_the_bounds_information():
    """An open direction is named from the bound's information.

    The bound's covariance is ``inf`` throughout; its information still shows the open
    direction (the arm's inertia, K and b1 together) and the sharp ratios.
    """
    values = {"J_Azz": 2e-4, "K": 0.04, "b1": 0.01}
    rest = 4e-3
    names = tuple(values)
    sums = np.array([values["J_Azz"] + rest, values["K"], values["b1"]])
    direction = np.ones(3) / np.sqrt(3)
    log_information = 1e4 * (np.eye(3) - np.outer(direction, direction))  # ±1 % across it
    information = log_information / np.outer(sums, sums)
    infinite = np.full((3, 3), np.inf)
    identified = identifiability(
        names, {n: np.array([values[n]]) for n in names},
        {n: np.array([1e-3 * values[n]]) for n in names}, np.diag([1e-3 * v for v in sums]),
        {n: 0.0 for n in names}, {n: 10.0 for n in names},
        bound=(names, infinite, information), offsets={"J_Azz": rest})
    assert [p.status for p in identified.parameters] == [NOT_DETERMINED] * 3
    (combination,) = identified.undetermined
    assert set(combination.names) == {"J_Azz", "K", "b1"}
    assert str(combination).endswith("scaled together (without limit)")
    assert len(identified.determined_ratios) == 2
    for ratio in identified.determined_ratios:
        assert ratio.relative_std == pytest.approx(0.01 * np.sqrt(2), rel=1e-6)


def test_determined_parameters_name_no_combination():
    values = {"J_Azz": 3e-3, "J_Byy": 4e-3}
    identified = _identified(values, np.diag([(0.01 * 3e-3) ** 2, (0.02 * 4e-3) ** 2]))
    assert [p.status for p in identified.parameters] == [DETERMINED, DETERMINED]
    assert identified.undetermined == () and identified.determined_ratios == ()


def test_half_its_value_is_the_limit_of_a_determined_parameter():
    """b2 = 3.8e-5 ± 4.7e-5 is not determined (the std is 124 % of the value)."""
    values = {"b2": 3.8e-5, "b1": 1e-3}
    identified = _identified(values, np.diag([4.7e-5**2, (0.49e-3) ** 2]))
    assert identified.standing("b2").status == NOT_DETERMINED
    assert identified.standing("b2").relative_std == pytest.approx(4.7 / 3.8)
    assert identified.standing("b1").status == DETERMINED


def test_a_value_on_its_bound_is_at_its_bound_whatever_its_std():
    values = {"J_Azz": 1e-12, "b2": 0.0, "K": 2.0}
    identified = _identified(values, np.diag([1e-20, 1e-12, 1e-8]),
                             lower={"J_Azz": 1e-12, "b2": 0.0, "K": 0.0},
                             upper={"J_Azz": 1.0, "b2": 1.0, "K": 2.0})
    assert [p.status for p in identified.parameters] == [AT_LOWER_BOUND, AT_LOWER_BOUND,
                                                         AT_UPPER_BOUND]
    assert identified.with_status(AT_LOWER_BOUND) == ("J_Azz", "b2")
    assert at_bound(1e-12, 1e-12) and not at_bound(1.1e-12, 1e-12)
    assert not at_bound(5.0, np.inf)


def test_a_quaternion_is_determined_by_its_two_observable_directions():
    names = ("tilt", "J_Azz")
    values = {"tilt": np.array([1.0, 0.0, 0.0, 0.0]), "J_Azz": np.array([3e-3])}
    std = {"tilt": np.array([1e-3, np.inf, 2e-3]), "J_Azz": np.array([1e-5])}
    covariance = np.diag([1e-6, np.inf, 4e-6, 1e-10])
    identified = identifiability(names, values, std, covariance, {"J_Azz": 0.0},
                                 {"J_Azz": 1.0})
    assert identified.standing("tilt").status == DETERMINED
    assert identified.standing("J_Azz").status == DETERMINED


def test_a_tilt_is_reported_as_the_two_angles_gravity_leans_by():
    """A rotation about gravity (here 10.5°, as the demo's fit once printed) shows nowhere."""
    from mb_estimation.io.parameter_files import gravity_tilt

    half = 0.5 * np.radians(10.5)
    lean_x, lean_z = 0.01, -0.02
    about_gravity = np.array([np.cos(half), 0.0, np.sin(half), 0.0])
    about_x = np.array([np.cos(lean_x / 2), np.sin(lean_x / 2), 0.0, 0.0])
    about_z = np.array([np.cos(lean_z / 2), 0.0, 0.0, np.sin(lean_z / 2)])
    from mb_estimation.lie import quat_multiply

    for spin in (np.array([1.0, 0.0, 0.0, 0.0]), about_gravity):
        tilt = gravity_tilt(np.asarray(quat_multiply(about_x, spin)), [1e-4, np.inf, 2e-4])
        assert tilt["about_x_rad"] == pytest.approx(lean_x, abs=1e-12)
        assert tilt["about_z_rad"] == pytest.approx(0.0, abs=1e-12)
        assert tilt["std_rad"] == [1e-4, 2e-4] and "not determined" in tilt["about_gravity"]
    tilt = gravity_tilt(about_z, [1e-4, np.inf, 2e-4])
    assert tilt["about_z_rad"] == pytest.approx(lean_z, abs=1e-12)


def test_the_furuta_arms_inertias_are_read_in_its_rest_inertia():
    from types import SimpleNamespace

    from mb_estimation.assess import rest_inertia_offsets
    from mb_estimation.config import apply_overrides, load_config
    from mb_estimation.rigs.furuta import rest_inertia
    from mb_estimation.setup import set_up, warm_up_recording

    config = apply_overrides(load_config("furuta_synthetic"), free=["J_Azz", "J_Byy", "K"])
    values = dict(config.parameters)
    setup = set_up(config, [warm_up_recording(config, 0.5, 100.0)])
    offsets = rest_inertia_offsets(setup, SimpleNamespace(parameters=values, free=config.free))
    assert offsets == {"J_Azz": pytest.approx(rest_inertia(values) - values["J_Azz"])}


def test_ros_parameters_yaml_gives_no_std_to_what_is_no_estimate(tmp_path):
    """ros_parameters.yaml: −1 for a value not determined or at its bound, whatever its std.

    As the node publishes what it has not determined; the status spelt as the
    identifiability's.
    """
    import yaml

    from mb_estimation.estimation import identifiability
    from mb_estimation.io import parameter_files

    assert parameter_files.DETERMINED == identifiability.DETERMINED
    document = {"parameters": {
        "J_Azz": {"value": 3e-3, "std": 1e-6, "status": identifiability.DETERMINED},
        "b1": {"value": 1e-3, "std": 2.7e-3, "status": identifiability.NOT_DETERMINED},
        "b2": {"value": 0.0, "std": 8.8e-5, "status": identifiability.AT_LOWER_BOUND},
        "K": {"value": 1.0, "std": float("inf")}}}
    parameter_files.write_parameter_files(tmp_path, document, {"J_Azz": 3e-3, "b1": 1e-3,
                                                               "b2": 0.0, "K": 1.0}, "node")
    ros = yaml.safe_load((tmp_path / "ros_parameters.yaml").read_text())["node"][
        "ros__parameters"]
    assert [ros[f"estimate_std.{name}"] for name in ("J_Azz", "b1", "b2", "K")] == [
        1e-6, -1.0, -1.0, -1.0]
