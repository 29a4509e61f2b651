"""Compiled programs kept on disk: loaded instead of built again, equal results, safe keys."""

import functools

import numpy as np
import pytest

from mb_estimation import compiled, program_store
from mb_estimation.estimation.parameters import FreeParameters
from mb_estimation.estimation.residuals import ModelStructure, StepData
from mb_estimation.numerics import COMPILER_OPTIONS, RUN_ONCE_OPTIONS, jax, run_once
from mb_estimation.rigs import get_rig

jnp = jax.numpy

TRACES = []  # one entry each time the program below is traced


def scaled_sums(static, data: StepData, offset):
    """A small program over a registered pytree: traced only where ``TRACES`` grows."""
    TRACES.append(static)
    return {"sum": static * jnp.sum(data.measured_angles) + offset,
            "data": StepData(data.measured_angles * static, data.inputs, data.observed,
                             data.dt, data.sqrt_kappa, data.locked)}


def _data(n=5):
    return StepData(np.arange(2.0 * n).reshape(n, 2), np.ones((n - 1, 1)), np.ones(n),
                    np.asarray(0.01), np.asarray(3.0), np.zeros(2))


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh store folder; no program compiled in this process yet."""
    folder = tmp_path / program_store.FOLDER
    monkeypatch.setattr(program_store, "store_folder", lambda: folder)
    monkeypatch.setattr(compiled, "_PROGRAMS", compiled.OrderedDict())
    TRACES.clear()
    return folder


def test_a_stored_program_is_loaded_not_traced_and_gives_the_same_results(store):
    args = (_data(), 0.5)
    first = compiled.Compiler()(scaled_sums, 2.0, *args)
    assert len(TRACES) == 1 and len(list(store.iterdir())) == 1
    compiled._PROGRAMS.clear()  # as a new process: nothing compiled in memory
    again = compiled.Compiler()(scaled_sums, 2.0, *args)
    assert len(TRACES) == 1, "the stored program was traced again"
    plain = jax.jit(functools.partial(scaled_sums, 2.0))(*args)
    for result in (first, again):
        np.testing.assert_array_equal(result["sum"], plain["sum"])
        np.testing.assert_array_equal(result["data"].measured_angles,
                                      plain["data"].measured_angles)
        assert isinstance(result["data"], StepData)


def test_other_statics_shapes_or_source_are_other_programs(store, monkeypatch):
    compiler = compiled.Compiler()
    compiler(scaled_sums, 2.0, _data(), 0.5)
    compiler(scaled_sums, 3.0, _data(), 0.5)      # another static
    compiler(scaled_sums, 2.0, _data(6), 0.5)     # other shapes
    assert len(TRACES) == 3 and len(list(store.iterdir())) == 3
    compiled._PROGRAMS.clear()
    compiler(scaled_sums, 2.0, _data(), np.float64(0.5))  # a strong float, not a weak one
    assert len(TRACES) == 4 and len(list(store.iterdir())) == 4
    monkeypatch.setattr(program_store, "code_version", lambda: "edited source")
    compiled._PROGRAMS.clear()
    result = compiler(scaled_sums, 3.0, _data(), 0.5)
    assert len(TRACES) == 5 and len(list(store.iterdir())) == 5
    assert float(result["sum"]) == pytest.approx(3.0 * 45 + 0.5)


def test_a_damaged_file_is_traced_again_and_replaced(store):
    compiled.Compiler()(scaled_sums, 2.0, _data(), 0.5)
    (path,) = store.iterdir()
    path.write_bytes(b"not a program")
    compiled._PROGRAMS.clear()
    result = compiled.Compiler()(scaled_sums, 2.0, _data(), 0.5)
    assert len(TRACES) == 2 and float(result["sum"]) == pytest.approx(90.5)
    compiled._PROGRAMS.clear()
    compiled.Compiler()(scaled_sums, 2.0, _data(), 0.5)
    assert len(TRACES) == 2, "the damaged file was not replaced"


def test_without_a_cache_folder_nothing_is_stored(store, monkeypatch):
    monkeypatch.setattr(program_store, "store_folder", lambda: None)
    compiled.Compiler()(scaled_sums, 2.0, _data(), 0.5)
    compiled._PROGRAMS.clear()
    compiled.Compiler()(scaled_sums, 2.0, _data(), 0.5)
    assert len(TRACES) == 2 and not store.exists()


@run_once
def scaled_sums_once(static, data: StepData, offset):
    """:func:`scaled_sums` marked as run once: compiled with less optimisation."""
    return scaled_sums(static, data, offset)


@pytest.mark.parametrize("stored", [True, False])
def test_a_program_marked_run_once_compiles_with_its_options_and_the_same_results(
        store, monkeypatch, stored):
    if not stored:
        monkeypatch.setattr(program_store, "store_folder", lambda: None)
    options = []
    compile_lowered = jax.stages.Lowered.compile

    def recorded(lowered, compiler_options=None):
        options.append(compiler_options)
        return compile_lowered(lowered, compiler_options)

    monkeypatch.setattr(jax.stages.Lowered, "compile", recorded)
    args = (_data(), 0.5)
    once = compiled.Compiler()(scaled_sums_once, 2.0, *args)
    usual = compiled.Compiler()(scaled_sums, 2.0, *args)
    assert options == [RUN_ONCE_OPTIONS, COMPILER_OPTIONS]
    assert RUN_ONCE_OPTIONS["xla_backend_optimization_level"] == 0
    np.testing.assert_allclose(once["sum"], usual["sum"], rtol=1e-15)
    np.testing.assert_allclose(once["data"].measured_angles, usual["data"].measured_angles,
                               rtol=1e-15)


def test_descriptions_tell_structures_apart_and_refuse_what_they_cannot_name():
    rig = get_rig("furuta")
    spec = rig.spec
    describe = program_store.stable_description
    a = ModelStructure(rig, FreeParameters.of(spec, ("J_Azz", "b1")))
    assert describe(a) == describe(ModelStructure(rig, FreeParameters.of(spec, ("J_Azz", "b1"))))
    others = [ModelStructure(rig, FreeParameters.of(spec, ("b1", "J_Azz"))),
              ModelStructure(get_rig("furuta", drift_correction=True),
                             FreeParameters.of(spec, ("J_Azz", "b1"))),
              ModelStructure(get_rig("furuta", ripple_per_revolution=8),
                             FreeParameters.of(spec, ("J_Azz", "b1")))]
    assert len({describe(a), *map(describe, others)}) == 4
    assert "0x" not in describe(a)  # no address: the same in every process
    assert describe(lambda x: x) is None
    assert describe((1, functools.partial(lambda x: x))) is None
    assert describe({"k": object()}) is None
    assert describe(1) != describe(1.0) != describe(True)


def test_one_compiled_simulation_serves_every_length_step_rate_and_rigs_values():
    """One program runs a scenario's chunks: other lengths, steps, rates, values compile nothing."""
    from mb_estimation.config import load_config
    from mb_estimation.simulation import SIMULATION_CHUNK, simulate_recording

    values = dict(load_config("furuta_synthetic").parameters)
    rig = get_rig("furuta")

    def simulate(duration_s, dt=1e-3, rate_hz=500.0, **changes):
        return simulate_recording(rig, {**values, **changes}, "multisine", duration_s=duration_s,
                                  dt=dt, rate_hz=rate_hz, rigid=True)

    short = simulate(0.3)
    programs = len(compiled._PROGRAMS)
    longer = simulate(2 * SIMULATION_CHUNK / 500.0 + 0.1)  # three chunks, the last one cut
    other = simulate(0.3, K=2.0, J_Byy=1.5 * values["J_Byy"])
    finer = simulate(0.3, dt=2.5e-4, rate_hz=1000.0)  # 4 steps per sample, twice the samples
    assert len(compiled._PROGRAMS) == programs
    assert finer.joint_angles.shape == (301, 2)
    # the same motion of up to 0.5 rad, its input held half as long (1.4e-3 rad apart)
    np.testing.assert_allclose(finer.joint_angles[::2], short.joint_angles, atol=3e-3)
    assert longer.joint_angles.shape == (2 * SIMULATION_CHUNK + 51, 2)
    np.testing.assert_array_equal(longer.joint_angles[:151], short.joint_angles)
    np.testing.assert_array_equal(longer.inputs[:150], short.inputs[:150])
    np.testing.assert_allclose(other.inputs, short.inputs / 2.0, rtol=1e-15)  # K doubled
    assert not np.allclose(other.joint_angles, short.joint_angles)


def test_programs_compiled_on_another_processor_or_with_other_flags_are_other_programs(
        monkeypatch):
    """An executable may use every instruction of the processor that compiled it."""
    here = program_store.code_version.__wrapped__()
    assert here == program_store.code_version.__wrapped__()
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    flagged = program_store.code_version.__wrapped__()
    monkeypatch.setattr(program_store, "_processor", lambda: "another processor")
    assert len({here, flagged, program_store.code_version.__wrapped__()}) == 3


def doubled_sum(data: StepData, offset):
    TRACES.append("doubled_sum")
    return 2.0 * jnp.sum(data.measured_angles) + offset


def test_a_compiled_function_is_stored_and_loaded_like_the_solvers_programs(store):
    function = compiled.compiled_function(doubled_sum)
    assert float(function(_data(), 0.5)) == pytest.approx(90.5)
    assert len(TRACES) == 1 and len(list(store.iterdir())) == 1
    assert float(function(_data(), 1.5)) == pytest.approx(91.5)  # the same program
    compiled._PROGRAMS.clear()  # as a new process
    assert float(function(_data(), 0.5)) == pytest.approx(90.5)
    assert len(TRACES) == 1, "the stored program was traced again"
    function(_data(6), 0.5)  # other shapes: another program
    assert len(TRACES) == 2 and len(list(store.iterdir())) == 2


def test_a_jax_cache_switched_on_by_the_environment_leaves_the_stored_programs_whole(tmp_path):
    """``$JAX_COMPILATION_CACHE_DIR`` would switch XLA's own cache on; it stays off.

    An executable that cache gives back serialises without its functions: stored, then
    loaded by a third process, it failed when run (``NOT_FOUND: Function ... not found``).
    """
    import os
    import subprocess
    import sys

    script = ("import numpy as np\n"
              "from mb_estimation import lie\n"
              "from mb_estimation.numerics import configure_jax\n"
              "configure_jax()\n"
              "print(lie.quat_boxplus(np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.2, 0.0, 0.0])))")
    outputs = []
    for store in ("first", "second", "second"):  # the third process loads what the second kept
        env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",  # small programs too
                   MB_ESTIMATION_CACHE_DIR=str(tmp_path / store))
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    assert not (tmp_path / "jax").exists() or not any((tmp_path / "jax").iterdir())


def test_a_store_that_fails_leaves_no_piece_of_a_file(tmp_path, monkeypatch):
    """A full disk (the rename fails after the write): nothing stored, nothing left behind."""
    monkeypatch.setattr(program_store.serialize_executable, "serialize", lambda _: (b"x",))

    def full_disk(source, target):
        raise OSError("No space left on device")

    monkeypatch.setattr(program_store.os, "replace", full_disk)
    program_store._store(tmp_path / "program.executable", None)
    assert list(tmp_path.iterdir()) == []
