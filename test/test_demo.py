"""The demo: its shipped experiment is what ``excite`` designed, and the demo calibrates from it.

The shipped design must be excite's output for the demo's free parameters at the demo's first
guess (its file equals the multisine of the tones it lists, and its predicted std are what the
bound gives for that input there); the whole demo (slow: it is the README's first command)
ends TRUSTWORTHY with every true value inside 3 std of its estimate.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from mb_estimation.cli import main
from mb_estimation.cli.simulate import DEMO_EXPERIMENT, DEMO_FREE, DEMO_GUESS
from mb_estimation.config import apply_overrides, builtin_file, load_config
from mb_estimation.config.schema import ConfigError
from mb_estimation.excitation import predicted_response
from mb_estimation.io.excitation_files import read_excitation
from mb_estimation.multisines import at_peak, multisine
from mb_estimation.setup import rig_of


def test_the_shipped_experiment_is_excites_design_for_the_demo():
    path = builtin_file(DEMO_EXPERIMENT)
    document = yaml.safe_load(path.with_name("excitation.yaml").read_text())
    assert document["designed_at"] == DEMO_GUESS
    assert tuple(document["design"]["parameters"]) == DEMO_FREE
    assert document["improved_on_the_multisine"]
    time_s, inputs = read_excitation(path)
    tones = document["input"]
    np.testing.assert_allclose(inputs, at_peak(multisine(
        time_s, np.array(tones["amplitudes"]), np.array(tones["frequencies_hz"]),
        np.array(tones["phases_rad"])), tones["peak"]), rtol=0, atol=1e-12)
    assert 1.0 / (time_s[1] - time_s[0]) == pytest.approx(document["rate_hz"])
    config = apply_overrides(load_config("furuta_synthetic"), set_values=DEMO_GUESS)
    response = predicted_response(rig_of(config), config.parameters, DEMO_FREE, time_s, inputs,
                                  np.zeros(4), document["noise_rad"])
    for name, predicted in document["design"]["parameters"].items():
        # the file's std came from the bound's forward differences (about six digits); its
        # sensitivities are exact now, and agree with them to that
        assert response.std[name] == pytest.approx(predicted["std"], rel=1e-5), name
    assert (document["design"]["worst_relative_std"]
            < 0.6 * document["multisine"]["worst_relative_std"])


def test_a_shipped_file_not_there_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="no/such.csv: not found beside the built-in"):
        builtin_file("no/such.csv")


def test_an_input_not_there_is_refused_before_anything_is_written(tmp_path, capsys):
    output = tmp_path / "out"
    assert main(["demo", "--input", str(tmp_path / "none.csv"), "--output", str(output)]) == 2
    error = capsys.readouterr().err.strip()
    assert "none.csv" in error and len(error.splitlines()) == 1, error
    assert not output.exists()


@pytest.mark.slow
def test_the_demo_calibrates_the_rig_from_its_designed_experiment(tmp_path, capsys):
    assert main(["demo", "--output", str(tmp_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "verdict: TRUSTWORTHY" in printed
    fitted = yaml.safe_load((tmp_path / "parameters.yaml").read_text())
    truth = load_config("furuta_synthetic").parameters
    for name in DEMO_FREE:
        entry = fitted["parameters"][name]
        assert abs(entry["value"] - truth[name]) < 3 * entry["std"], (name, entry)
