"""Fusion of per-window parameter estimates and its persistence (mb_estimation.online.fusion).

Scalars are checked against the closed-form information-weighted mean and variance, the fused
std against simulated i.i.d. windows (consistency of the error with the reported std),
quaternions against the geodesic split, and the YAML files against round trips, failed writes
and corrupt contents.
"""

import math

import numpy as np
import pytest
import yaml

from mb_estimation.io import files
from mb_estimation.lie import quat_boxminus, quat_boxplus
from mb_estimation.online.fusion import (
    ParameterEstimate,
    covariance_from_information,
    fuse,
    information_from_covariance,
    load_estimate,
    save_estimate,
)

INF = math.inf


def scalars(values, covariance, windows=1):
    """Estimate of scalar parameters a, b, c, ... with the given values and covariance."""
    names = tuple("abcdefgh"[: len(values)])
    return ParameterEstimate(names, {n: np.array([v]) for n, v in zip(names, values, strict=True)},
                             np.array(covariance, dtype=float), windows)


def one(value, variance, windows=1):
    return scalars([value], [[variance]], windows)


def rotation(axis, angle):
    axis = np.asarray(axis, dtype=float)
    return quat_boxplus(np.array([1.0, 0.0, 0.0, 0.0]), angle * axis / np.linalg.norm(axis))


def angle_between(p, q):
    return float(np.linalg.norm(quat_boxminus(p, q)))


# --- scalars: closed forms ------------------------------------------------------------------------


def test_two_scalar_windows_are_the_information_weighted_mean():
    fused = fuse(one(1.0, 0.5), one(4.0, 2.0))
    weight_1, weight_2 = 1 / 0.5, 1 / 2.0
    mean = (weight_1 * 1.0 + weight_2 * 4.0) / (weight_1 + weight_2)
    assert fused.values["a"] == pytest.approx([mean], rel=1e-14)
    assert fused.covariance[0, 0] == pytest.approx(1 / (weight_1 + weight_2), rel=1e-14)
    assert fused.std["a"] == pytest.approx([math.sqrt(1 / (weight_1 + weight_2))], rel=1e-14)
    assert fused.values["a"][0] == pytest.approx(1.6)  # (2·1 + 0.5·4) / 2.5
    assert fused.windows == 2


def test_three_scalar_windows_with_two_parameters():
    windows = [scalars([1.0, -3.0], np.diag([0.1, 4.0])),
               scalars([1.5, -1.0], np.diag([0.4, 1.0])),
               scalars([0.7, -2.0], np.diag([0.2, 0.25]))]
    fused = None
    for window in windows:
        fused = fuse(fused, window)
    for index, name in enumerate("ab"):
        weights = np.array([1 / np.diagonal(w.covariance)[index] for w in windows])
        values = np.array([w.values[name][0] for w in windows])
        assert fused.values[name][0] == pytest.approx(weights @ values / weights.sum(), rel=1e-13)
        assert fused.std[name][0] == pytest.approx(1 / math.sqrt(weights.sum()), rel=1e-13)
    assert fused.covariance[0, 1] == 0.0
    assert fused.windows == 3


def test_first_window_is_returned_unchanged():
    window = scalars([2.0, 3.0], [[0.5, 0.1], [0.1, 0.3]], windows=1)
    fused = fuse(None, window)
    assert fused.values["a"][0] == 2.0 and fused.values["b"][0] == 3.0
    np.testing.assert_allclose(fused.covariance, window.covariance, rtol=1e-14)
    assert fused.windows == 1


def test_correlated_covariances_give_the_gaussian_product():
    covariance_1 = np.array([[2.0, 1.2], [1.2, 1.0]])
    covariance_2 = np.array([[0.5, -0.3], [-0.3, 0.8]])
    x_1, x_2 = np.array([1.0, 2.0]), np.array([1.5, 1.0])
    fused = fuse(scalars(x_1, covariance_1), scalars(x_2, covariance_2))
    information_1 = np.linalg.inv(covariance_1)
    information_2 = np.linalg.inv(covariance_2)
    covariance = np.linalg.inv(information_1 + information_2)
    mean = covariance @ (information_1 @ x_1 + information_2 @ x_2)
    np.testing.assert_allclose(fused.covariance, covariance, rtol=1e-12)
    np.testing.assert_allclose([fused.values["a"][0], fused.values["b"][0]], mean, rtol=1e-12)
    # the correlation matters: the diagonal-only answer is different
    diagonal = ((x_1 / np.diag(covariance_1) + x_2 / np.diag(covariance_2))
                / (1 / np.diag(covariance_1) + 1 / np.diag(covariance_2)))
    assert abs(fused.values["a"][0] - diagonal[0]) > 1e-2


# --- many windows: 1/sqrt(n) and consistency -----------------------------------------------------


def test_std_shrinks_like_one_over_sqrt_n():
    rng = np.random.default_rng(1)
    sigma = 0.3
    fused = None
    for n in range(1, 101):
        fused = fuse(fused, one(2.0 + sigma * rng.standard_normal(), sigma**2))
        assert fused.std["a"][0] == pytest.approx(sigma / math.sqrt(n), rel=1e-12)
    assert fused.windows == 100


def test_fused_error_is_consistent_with_the_fused_std():
    """Over 200 repeats of 40 windows with unequal honest stds, (x̂ − θ)/σ̂ has variance 1."""
    rng = np.random.default_rng(20240611)
    repeats, windows, truth = 200, 40, 0.7
    normalised = []
    for _ in range(repeats):
        sigmas = np.exp(rng.uniform(np.log(0.05), np.log(3.0), windows))
        fused = None
        for sigma in sigmas:
            fused = fuse(fused, one(truth + sigma * rng.standard_normal(), sigma**2))
        assert fused.std["a"][0] == pytest.approx(1 / math.sqrt(np.sum(sigmas**-2.0)), rel=1e-12)
        normalised.append((fused.values["a"][0] - truth) / fused.std["a"][0])
    normalised = np.array(normalised)
    # sample variance of 200 standard normals: std ≈ sqrt(2/199) ≈ 0.1; allow ~3.5σ
    print(f"normalised error: mean {normalised.mean():.3f}, variance {normalised.var():.3f}")
    assert 0.65 < normalised.var(ddof=1) < 1.4
    assert abs(normalised.mean()) < 3.5 / math.sqrt(repeats)


# --- directions without information --------------------------------------------------------------


def test_infinite_variance_leaves_that_parameter_unchanged():
    previous = scalars([1.0, 2.0], np.diag([0.5, 0.5]), windows=3)
    new = scalars([1e6, 4.0], [[INF, 0.0], [0.0, 0.5]])
    fused = fuse(previous, new)
    assert fused.values["a"][0] == 1.0
    assert fused.std["a"][0] == pytest.approx(math.sqrt(0.5), rel=1e-14)
    assert fused.values["b"][0] == pytest.approx(3.0, rel=1e-14)
    assert fused.std["b"][0] == pytest.approx(0.5, rel=1e-14)
    assert fused.windows == 4


def test_a_singular_finite_covariance_gives_no_information_in_its_null_direction():
    previous = scalars([1.0, 2.0], np.diag([0.5, 0.5]))
    fused = fuse(previous, scalars([7.0, 4.0], np.diag([0.0, 0.5])))
    assert fused.values["a"][0] == 1.0 and fused.std["a"][0] == pytest.approx(math.sqrt(0.5))
    assert fused.values["b"][0] == pytest.approx(3.0)


def test_neither_estimate_informative_keeps_the_previous_value_and_infinite_std():
    first = fuse(None, scalars([1.0, 2.0], [[INF, 0.0], [0.0, 1.0]]))
    assert first.std["a"][0] == INF and first.std["b"][0] == 1.0
    fused = fuse(first, scalars([-5.0, 3.0], [[INF, 0.0], [0.0, 1.0]]))
    assert fused.values["a"][0] == 1.0
    assert fused.std["a"][0] == INF
    assert fused.values["b"][0] == pytest.approx(2.5)
    # a later informative window then sets it
    fused = fuse(fused, scalars([4.0, 2.5], np.diag([2.0, 1.0])))
    assert fused.values["a"][0] == pytest.approx(4.0)
    assert fused.std["a"][0] == pytest.approx(math.sqrt(2.0))


def window_with_undetermined_directions(rng) -> ParameterEstimate:
    """Four scalars a-d, about 40 % of them undetermined (``inf`` or 0 variance), at random."""
    m = rng.standard_normal((4, 4))
    covariance = m @ m.T
    undetermined = rng.random(4) < 0.4
    covariance[undetermined, :] = 0.0
    covariance[:, undetermined] = 0.0
    covariance[undetermined, undetermined] = INF if rng.random() < 0.5 else 0.0
    return scalars(rng.standard_normal(4) * 1e3, covariance)


def test_random_undetermined_directions_never_produce_non_finite_values():
    rng = np.random.default_rng(5)
    fused = None
    for _ in range(200):
        fused = fuse(fused, window_with_undetermined_directions(rng))
        assert all(np.all(np.isfinite(v)) for v in fused.values.values())
        assert not np.any(np.isnan(fused.covariance))


def test_information_and_covariance_conversions():
    covariance = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, INF]])
    information = information_from_covariance(covariance)
    np.testing.assert_allclose(information[:2, :2], np.linalg.inv(covariance[:2, :2]),
                               rtol=1e-14)
    assert np.all(information[2] == 0.0) and np.all(information[:, 2] == 0.0)
    back = covariance_from_information(information)
    np.testing.assert_allclose(back[:2, :2], covariance[:2, :2], rtol=1e-13)
    assert back[2, 2] == INF and np.all(back[2, :2] == 0.0) and np.all(back[:2, 2] == 0.0)
    # partly determined: a + b known, a − b not → both undetermined, never invented
    partial = covariance_from_information(np.array([[1.0, 1.0], [1.0, 1.0]]))
    assert np.all(np.diagonal(partial) == INF)
    with pytest.raises(ValueError, match="NaN"):
        information_from_covariance(np.array([[math.nan]]))
    with pytest.raises(ValueError, match="negative"):
        information_from_covariance(np.array([[-1.0]]))
    with pytest.raises(ValueError, match="semidefinite"):
        information_from_covariance(np.array([[1.0, 2.0], [2.0, 1.0]]))


# --- quaternions --------------------------------------------------------------------------------


def test_numpy_quaternion_operations_match_lie():
    from mb_estimation import lie

    rng = np.random.default_rng(7)
    for scale in (1e-9, 1e-3, 0.5, 1.5, 3.0):
        e = rng.standard_normal(4)
        e /= np.linalg.norm(e)
        psi = scale * rng.standard_normal(3)
        np.testing.assert_allclose(quat_boxplus(e, psi), np.asarray(lie.boxplus(e, psi)),
                                   atol=1e-15)
        other = quat_boxplus(e, psi)
        np.testing.assert_allclose(quat_boxminus(other, e), np.asarray(lie.boxminus(other, e)),
                                   atol=1e-14, rtol=1e-12)
        if np.linalg.norm(psi) < math.pi:  # otherwise ⊟ returns the shorter rotation
            np.testing.assert_allclose(quat_boxminus(other, e), psi, atol=1e-14, rtol=1e-9)
        else:
            shorter = quat_boxminus(other, e)
            assert np.linalg.norm(shorter) <= math.pi
            assert angle_between(quat_boxplus(e, shorter), other) < 1e-12


def _reference_boxplus(e, psi):
    """The fusion's own numpy formulas before they became mb_estimation.lie's (issue 17)."""
    theta = float(np.linalg.norm(psi))
    sinc_half = 0.5 if theta == 0.0 else math.sin(0.5 * theta) / theta
    q = _reference_multiply(np.concatenate([[math.cos(0.5 * theta)], sinc_half * psi]), e)
    return q / np.linalg.norm(q)


def _reference_boxminus(a, b):
    e = _reference_multiply(a, b * np.array([1.0, -1.0, -1.0, -1.0]))
    e = -e if e[0] < 0.0 else e
    n = float(np.linalg.norm(e[1:]))
    return np.zeros(3) if n == 0.0 else 2.0 * math.atan2(n, float(e[0])) / n * e[1:]


def _reference_multiply(a, b):
    (aw, ax, ay, az), (bw, bx, by, bz) = a, b
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])


def test_quaternion_operations_match_the_former_numpy_formulas():
    rng = np.random.default_rng(17)
    for scale in (0.0, 1e-12, 1e-6, 1e-3, 0.01, 0.5, 3.0, 3.14159, 6.0):
        for _ in range(20):
            e = rng.standard_normal(4)
            e /= np.linalg.norm(e)  # both signs of w
            psi = scale * rng.standard_normal(3)
            np.testing.assert_allclose(quat_boxplus(e, psi), _reference_boxplus(e, psi),
                                       rtol=0.0, atol=1e-14)
            other = _reference_boxplus(e, psi)
            np.testing.assert_allclose(quat_boxminus(other, e), _reference_boxminus(other, e),
                                       rtol=0.0, atol=1e-14)


def tilt_estimate(tilt, variances, scalar=0.0, windows=1):
    covariance = np.diag([1.0, *variances])
    return ParameterEstimate(("m", "tilt"), {"m": np.array([scalar]), "tilt": tilt},
                             covariance, windows)


def test_two_tilts_fuse_on_the_geodesic_split_by_information():
    rng = np.random.default_rng(11)
    base = rng.standard_normal(4)
    base /= np.linalg.norm(base)
    axis = np.array([0.3, -1.0, 0.5]) / np.linalg.norm([0.3, -1.0, 0.5])
    theta = 0.2
    other = quat_boxplus(base, theta * axis)
    variance_1, variance_2 = 1e-4, 3e-4
    fused = fuse(tilt_estimate(base, [variance_1] * 3), tilt_estimate(other, [variance_2] * 3))
    weight_2 = (1 / variance_2) / (1 / variance_1 + 1 / variance_2)  # = 0.25
    tilt = fused.values["tilt"]
    assert np.linalg.norm(tilt) == pytest.approx(1.0, abs=1e-15)
    assert angle_between(tilt, base) == pytest.approx(weight_2 * theta, rel=1e-12)
    assert angle_between(other, tilt) == pytest.approx((1 - weight_2) * theta, rel=1e-12)
    np.testing.assert_allclose(quat_boxminus(tilt, base), weight_2 * theta * axis, rtol=1e-12)
    np.testing.assert_allclose(fused.std["tilt"],
                               np.full(3, math.sqrt(1 / (1 / variance_1 + 1 / variance_2))),
                               rtol=1e-12)
    # the other order lands on the same rotation
    reverse = fuse(tilt_estimate(other, [variance_2] * 3), tilt_estimate(base, [variance_1] * 3))
    assert angle_between(reverse.values["tilt"], tilt) < 1e-12
    # the sign of a quaternion does not matter
    flipped = fuse(tilt_estimate(base, [variance_1] * 3), tilt_estimate(-other, [variance_2] * 3))
    assert angle_between(flipped.values["tilt"], tilt) < 1e-12


def test_tilt_rotation_about_an_undetermined_axis_is_ignored():
    previous = tilt_estimate(np.array([1.0, 0.0, 0.0, 0.0]), [0.01, 0.01, 0.01], scalar=1.0)
    new_tilt = quat_boxplus(np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.1, 0.2, 0.05]))
    new = ParameterEstimate(("m", "tilt"), {"m": np.array([3.0]), "tilt": new_tilt},
                            np.diag([1.0, 0.01, INF, 0.01]))
    fused = fuse(previous, new)
    np.testing.assert_allclose(quat_boxminus(fused.values["tilt"], previous.values["tilt"]),
                               [0.05, 0.0, 0.025], atol=1e-15)
    assert fused.values["m"][0] == pytest.approx(2.0)
    np.testing.assert_allclose(fused.std["tilt"], [math.sqrt(0.005), 0.1, math.sqrt(0.005)],
                               rtol=1e-12)


# --- errors -------------------------------------------------------------------------------------


def test_mismatched_names_or_kinds_are_rejected():
    with pytest.raises(ValueError, match="names differ"):
        fuse(scalars([1.0, 2.0], np.eye(2)), ParameterEstimate(
            ("b", "a"), {"a": np.array([1.0]), "b": np.array([2.0])}, np.eye(2)))
    with pytest.raises(ValueError, match="names differ"):
        fuse(one(1.0, 1.0), scalars([1.0, 2.0], np.eye(2)))
    quaternion = ParameterEstimate(("a",), {"a": np.array([1.0, 0.0, 0.0, 0.0])}, np.eye(3))
    with pytest.raises(ValueError, match="kinds differ"):
        fuse(one(1.0, 1.0), quaternion)


@pytest.mark.parametrize("bad", [math.nan, INF, -INF])
def test_a_new_window_with_non_finite_values_is_rejected(bad):
    with pytest.raises(ValueError, match="non-finite value"):
        fuse(one(1.0, 1.0), one(bad, 1.0))
    with pytest.raises(ValueError, match="non-finite value"):
        fuse(None, one(bad, 1.0))


def test_bad_numbers_are_rejected():
    with pytest.raises(ValueError, match="unit quaternion"):
        fuse(None, ParameterEstimate(("t",), {"t": np.array([1.0, 0.1, 0.0, 0.0])}, np.eye(3)))
    with pytest.raises(ValueError, match="NaN"):
        fuse(one(1.0, 1.0), one(1.0, math.nan))
    with pytest.raises(ValueError, match="non-finite value"):
        fuse(one(math.nan, 1.0), one(1.0, 1.0))


def test_malformed_estimates_are_rejected_at_construction():
    with pytest.raises(ValueError, match="values are given"):
        ParameterEstimate(("a", "b"), {"a": np.array([1.0])}, np.eye(2))
    with pytest.raises(ValueError, match="shape"):
        ParameterEstimate(("a",), {"a": np.array([1.0, 2.0])}, np.eye(2))
    with pytest.raises(ValueError, match="covariance must have shape"):
        ParameterEstimate(("a", "t"), {"a": np.array([1.0]), "t": np.array([1.0, 0, 0, 0])},
                          np.eye(2))
    with pytest.raises(ValueError, match="duplicate"):
        ParameterEstimate(("a", "a"), {"a": np.array([1.0])}, np.eye(2))
    with pytest.raises(ValueError, match="windows"):
        one(1.0, 1.0, windows=0)


def test_estimates_are_immutable():
    estimate = one(1.0, 1.0)
    with pytest.raises(AttributeError):
        estimate.windows = 2
    with pytest.raises(ValueError):
        estimate.values["a"][0] = 2.0
    with pytest.raises(ValueError):
        estimate.covariance[0, 0] = 2.0


# --- persistence --------------------------------------------------------------------------------


def stored_example():
    tilt = quat_boxplus(np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.01, -0.02, 0.003]))
    covariance = np.diag([1.0 / 3.0, 1e-7, INF, 2e-7, 1.23456789012345e-300])
    covariance[0, 1] = covariance[1, 0] = 1e-5
    return ParameterEstimate(("J_Azz", "tilt", "b1"),
                             {"J_Azz": np.array([0.0123456789]), "tilt": tilt,
                              "b1": np.array([-1e-4 / 3])},
                             covariance, windows=17)


def assert_same(a, b):
    assert a.names == b.names and a.windows == b.windows
    for name in a.names:
        np.testing.assert_array_equal(a.values[name], b.values[name])
    np.testing.assert_array_equal(a.covariance, b.covariance)


def test_save_and_load_round_trip(tmp_path):
    path = tmp_path / "estimate.yaml"
    assert load_estimate(path) is None
    estimate = stored_example()
    save_estimate(path, estimate)
    text = path.read_text()
    assert ".inf" in text and text.rstrip().endswith("...")
    loaded = load_estimate(path)
    assert_same(loaded, estimate)  # bit-exact, inf included
    assert loaded.std["tilt"][1] == INF
    assert sorted(p.name for p in tmp_path.iterdir()) == ["estimate.yaml"]
    # overwrite with a fused one
    fused = fuse(loaded, stored_example())
    save_estimate(path, fused)
    assert_same(load_estimate(path), fused)


def test_a_failed_write_leaves_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "estimate.yaml"
    save_estimate(path, stored_example())
    before = path.read_bytes()

    def broken_dump(*args, **kwargs):
        raise RuntimeError("disk on fire")

    with monkeypatch.context() as patch:
        patch.setattr(yaml, "safe_dump", broken_dump)
        with pytest.raises(RuntimeError, match="disk on fire"):
            save_estimate(path, fuse(stored_example(), stored_example()))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["estimate.yaml"]

    # failing after the temporary file was written: it is removed, the old file stays
    def broken_replace(source, destination):
        raise OSError("rename failed")

    with monkeypatch.context() as patch:
        patch.setattr(files.os, "replace", broken_replace)
        with pytest.raises(OSError, match="rename failed"):
            save_estimate(path, fuse(stored_example(), stored_example()))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["estimate.yaml"]
    assert_same(load_estimate(path), stored_example())


def test_saving_non_finite_values_is_refused(tmp_path):
    with pytest.raises(ValueError, match="non-finite"):
        save_estimate(tmp_path / "x.yaml", one(math.nan, 1.0))
    assert list(tmp_path.iterdir()) == []


def test_truncated_files_are_rejected(tmp_path):
    path = tmp_path / "estimate.yaml"
    save_estimate(path, stored_example())
    text = path.read_text()
    cuts = sorted({*range(0, len(text) - 4, 7), len(text) - 4, len(text) - 3})
    for cut in cuts:
        path.write_text(text[:cut])
        with pytest.raises(ValueError, match="corrupt") as error:
            load_estimate(path)
        assert "\n" not in str(error.value) and str(path) in str(error.value)


@pytest.mark.parametrize("content", [
    "{{{ not yaml\n...\n",
    "just a string\n...\n",
    "format: other\nversion: 1\n...\n",
    "format: mb_estimation/parameter_estimate\nversion: 1\nnames: [a]\n...\n",
    "format: mb_estimation/parameter_estimate\nversion: 1\nwindows: 1\nnames: [a]\n"
    "values: {a: [1.0, 2.0]}\ncovariance: [[1.0]]\n...\n",
    "format: mb_estimation/parameter_estimate\nversion: 1\nwindows: 1\nnames: [a]\n"
    "values: {a: [.nan]}\ncovariance: [[1.0]]\n...\n",
    "format: mb_estimation/parameter_estimate\nversion: 1\nwindows: 1\nnames: [a]\n"
    "values: {a: [1.0]}\ncovariance: [[1.0], [2.0, 3.0]]\n...\n",
    "format: mb_estimation/parameter_estimate\nversion: 1\nwindows: x\nnames: [a]\n"
    "values: {a: [1.0]}\ncovariance: [[1.0]]\n...\n",
])
def test_corrupt_files_are_rejected_with_one_line(tmp_path, content):
    path = tmp_path / "estimate.yaml"
    path.write_text(content)
    with pytest.raises(ValueError, match="corrupt parameter estimate") as error:
        load_estimate(path)
    assert "\n" not in str(error.value)


def test_binary_garbage_is_rejected(tmp_path):
    path = tmp_path / "estimate.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="estimate") as error:
        load_estimate(path)
    assert "\n" not in str(error.value)
