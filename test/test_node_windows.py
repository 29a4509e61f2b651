"""The node's own estimator on windows of a simulated rig (issues 5, 16): physical, compiled once.

furuta_synthetic run as a rig runs (SPOOK at 1e-4 s, its own stiff 1e-6 hinges, 0.001 rad
noise, sampled at 100 Hz) — not inside any estimator's model class. The node estimates 5 s
windows from Table 1's start values on the consistent path at its fixed 1 ms step
(:func:`~mb_estimation.online.windows.window_step`); the paper's single fit at h = 0.01 on
such data lands on shadow values (benchmarks/RESULTS.md, issues 3 and 5).
"""

import numpy as np
import pytest
from configs import TABLE_1, TRUTH

from mb_estimation.config import apply_overrides, load_config
from mb_estimation.online.core import EstimatorCore
from mb_estimation.online.windows import (
    estimate_window,
    why_rejected,
    window_config,
    window_step,
)
from mb_estimation.setup import rig_of
from mb_estimation.signals import Recording
from mb_estimation.simulation import simulate_recording

RATE_HZ = 100.0


def _window(sim, start_s: float, window_s: float) -> Recording:
    """The samples of ``[start_s, start_s + window_s]``, times from the window's start."""
    inside = (sim.time_s >= start_s - 1e-9) & (sim.time_s <= start_s + window_s + 1e-9)
    time_s = sim.time_s[inside] - start_s
    return Recording(f"window at {start_s:g} s", time_s, sim.measured_angles[inside], time_s,
                     sim.inputs[inside])


def test_node_windows_estimate_the_rig_s_own_inertias_with_the_program_of_its_warm_up():
    truth = load_config("furuta_synthetic")
    sim = simulate_recording(rig_of(truth), truth.parameters, "swingup", duration_s=10.0,
                             dt=truth.simulation.dt, rate_hz=RATE_HZ,
                             noise_rad=truth.simulation.noise_rad)
    config = apply_overrides(truth, free=list(TABLE_1), set_values=TABLE_1)
    assert config.advanced.estimator == "consistent" and window_step(config) == 1e-3
    core = EstimatorCore(config)
    assert core.warm_up() > 0 and "warm_up_error" not in core.diagnostics()

    window_s = config.node.window_s
    swing_up = estimate_window(config, _window(sim, 0.0, window_s))
    assert swing_up.compile_time_s == 0.0  # the warm-up compiled it
    assert why_rejected(swing_up, config.node.max_cost) is None
    errors = {name: float(swing_up.parameters[name]) / value - 1.0
              for name, value in TRUTH.items()}
    assert max(abs(e) for e in errors.values()) < 0.02, errors
    assert {entry.dt for entry in swing_up.history} == {1e-3}  # one level, at the node's step
    # a window's fit may take 1.5 strides of solving (then the next window waits)
    assert window_config(config).method.time_limit_s == pytest.approx(1.5 * config.node.stride_s)
    states = swing_up.recordings[0]
    assert states.time_s[0] == 0.0 and states.time_s[-1] == window_s
    assert len(states.time_s) == round(window_s / 1e-3) + 1

    later = estimate_window(config, _window(sim, 2.5, window_s))  # other data, same program
    assert later.compile_time_s == 0.0
    assert np.all(np.isfinite(later.recordings[0].joint_angles))
