"""Compiling ahead: programs compiled in a thread before the work that runs them needs them.

A calibration's model programs do not depend on its data, and its checks' simulators do not
depend on its estimate: the demo compiles the first while it simulates the bag, ``calibrate``
the second while it fits. Each test makes sure the work afterwards compiles nothing of what was
compiled ahead — and that the programs were not there already, so that the test can fail.
"""

from __future__ import annotations

import dataclasses
import threading
import types

import numpy as np
import pytest

from mb_estimation import compiled, numerics, program_store
from mb_estimation.compiled import Compiler
from mb_estimation.config import apply_overrides, load_config
from mb_estimation.estimation.residuals import first_jacobians, transition_jacobians
from mb_estimation.fitting import fit
from mb_estimation.numerics import jax
from mb_estimation.rigs import built_system, get_rig, parameter_arrays
from mb_estimation.setup import compile_ahead, model_of, on_grid, rig_of, set_up
from mb_estimation.signals import Recording
from mb_estimation.simulation import simulate_recording

jnp = jax.numpy

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # one XLA compilation


@pytest.fixture(autouse=True)
def _compiling_for_real(monkeypatch):
    """No compiled programs on disk here: these tests count XLA compilations.

    The test run's program store would answer for programs that another test compiled.
    """
    monkeypatch.setattr(program_store, "store_folder", lambda: None)


class CountedCompiles:
    """Counts XLA compilations in the ``with`` block (every thread's)."""

    def __enter__(self):
        self.count = 0

        def listener(event, duration, **_):
            if event == BACKEND_COMPILE:
                self.count += 1

        self._listener = listener
        jax.monitoring.register_event_duration_secs_listener(listener)
        return self

    def __exit__(self, *_):
        jax.monitoring.unregister_event_duration_listener(self._listener)


def _slow_to_compile(scale, x):
    """A program that takes a noticeable time to compile (a long chain of distinct ops).

    ``scale`` is static, as the estimator's structure is: each call binds it anew, so JAX's
    own caches do not see two calls as one program.
    """
    for i in range(150):
        x = jnp.sin(x * (scale + 1e-3 * i)) + jnp.cos(x @ x.T) * 1e-3
    return x


def test_a_program_asked_for_while_it_compiles_is_compiled_once():
    """Two threads asking for one program at once: one compiles, the other waits for it."""
    x = np.eye(7)
    barrier = threading.Barrier(2)
    compilers = [Compiler(), Compiler()]
    results = [None, None]

    def run(index):
        barrier.wait()
        results[index] = compilers[index](_slow_to_compile, 1.0, x)

    with CountedCompiles() as compiles:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert compiles.count == 1
    np.testing.assert_array_equal(results[0], results[1])
    # the waiting solve counts its wait as compiling, as it would have compiled itself
    assert all(compiler.seconds > 0.0 for compiler in compilers)
    assert not compiled._COMPILING


def _model_programs():
    return {key for key in compiled._PROGRAMS
            if key[0] in (first_jacobians, transition_jacobians)}


def test_compiling_ahead_compiles_the_fits_model_programs():
    """:func:`~mb_estimation.setup.compile_ahead` from the config alone; the fit compiles none.

    On a recording of another length and rate than the warm-up's (one second at 500 Hz, two
    consistent levels), so one compilation serves both steps.
    """
    config = apply_overrides(load_config("furuta_synthetic"), free=["J_Bzz", "K", "b2"])
    config = dataclasses.replace(config, method=dataclasses.replace(
        config.method, simulation_refinement="off"))
    before = _model_programs()
    assert compile_ahead(config) > 0.0
    compiled_ahead = _model_programs() - before
    assert len(compiled_ahead) == 2  # the first block's and the transitions' Jacobians
    sim = simulate_recording(get_rig("furuta"), config.parameters, "swingup", duration_s=1.0,
                             dt=1e-3, rate_hz=500.0, noise_rad=1e-3, seed=1)
    recording = Recording("swingup", sim.time_s, sim.measured_angles, sim.time_s, sim.inputs)
    fitted = fit(set_up(config, [recording]))
    assert len(fitted.levels) == 2  # two steps, one program
    assert _model_programs() - before == compiled_ahead
    assert np.isfinite(fitted.joint.cost)


def test_the_checks_compile_while_the_fit_runs():
    """The model's ``compile_checks`` before the estimate exists; the checks compile nothing.

    A grid step of 8 ms, which no other test uses: the batched prediction over its 0.5 s
    horizon is compiled ahead, here first. The replay's chunk program serves every step, so
    another test's replay may have built it already.
    """
    truth = load_config("furuta_synthetic")
    config = dataclasses.replace(truth, simulation=dataclasses.replace(truth.simulation,
                                                                       dt=1e-3))
    sim = simulate_recording(get_rig("furuta"), config.parameters, "swingup", duration_s=1.5,
                             dt=1e-3, rate_hz=125.0)
    recording = Recording("swingup", sim.time_s, sim.joint_angles, sim.time_s, sim.inputs)
    grids = on_grid(config, [recording], 0.008)
    model = model_of(config)
    # the system's build is shared by every simulation of this rig: compiled before counting
    built_system(rig_of(config), parameter_arrays(config.parameters))
    programs = set(compiled._PROGRAMS)
    with CountedCompiles() as ahead:
        model.compile_checks(config.parameters, grids[0])
    compiled_ahead = {key[0].__name__ for key in set(compiled._PROGRAMS) - programs}
    assert "_predicted_angles" in compiled_ahead and ahead.count >= 1, compiled_ahead
    assert {key[0].__name__ for key in compiled._PROGRAMS} >= {"_predicted_angles",
                                                                "_driven_chunk"}
    # what a fit reports: its parameters, and body states on the grid
    states = jax.tree_util.tree_map(np.asarray, sim.states)
    result = types.SimpleNamespace(
        parameters={name: np.asarray(value)
                    for name, value in parameter_arrays(config.parameters).items()},
        recordings=(states,))
    with CountedCompiles() as checks:
        predictions = model.predictions(result.parameters, grids, result.recordings)
        replays = model.replays(result.parameters, grids, result.recordings)
    assert checks.count == 0
    assert predictions[0].starts == 3 and np.all(predictions[0].rms < 1e-6)  # its own model
    assert np.isfinite(replays[0].rms_all).all()  # at the grid's own 8 ms step: not exact


def test_compiling_meanwhile_runs_beside_the_block_and_keeps_out_of_its_way(monkeypatch):
    """The thread runs while the block does; its errors stay in it; one core starts nothing."""
    monkeypatch.setattr(numerics.os, "sched_getaffinity", lambda pid: {0, 1})
    seen, started = [], threading.Event()

    def ahead(tag):
        seen.append((tag, threading.current_thread() is not threading.main_thread()))
        started.set()

    with numerics.compiling_meanwhile(ahead, "beside"):
        assert started.wait(30)  # while the block runs, in its own thread
    assert seen == [("beside", True)]

    def failing():
        raise RuntimeError("not the block's error")

    with numerics.compiling_meanwhile(failing):
        pass  # the block compiles what it needs itself and meets any real error there
    monkeypatch.setattr(numerics.os, "sched_getaffinity", lambda pid: {0})
    with numerics.compiling_meanwhile(ahead, "one core"):
        pass
    assert seen == [("beside", True)]
