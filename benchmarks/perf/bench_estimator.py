"""Joint estimation speed on the swing-up problem, against scipy.optimize.least_squares.

Run pinned to one core, e.g.::

    taskset -c 0 python benchmarks/perf/bench_estimator.py [--quick] [--data model|paper]
        [--json FILE]

The swing-up problem: a 10 s swing-up recorded at 1000 Hz with angle noise 0.001 rad (seed 0),
estimated on the grid h = 0.01 with κ = 100 from the initial values of ``config/furuta.yaml``:
its 11 free parameters (13 tangent dimensions, the tilt has 3), every compliance 1e-4.

``--data model`` (default): simulated with ``config/furuta_synthetic.yaml`` with every compliance
1e-4 (the estimation's) at step 1e-3 (one step per sample), so the fit differs from the data's
model only in its step (0.01 vs 1e-3). ``--data paper``: simulated as in §4.7 / G.3 (the config
as written, ε = 1e-6, step 1e-4); on these data the 13-parameter fit has no minimum near the
truth (J_Ayy runs away), so the solve stops at the iteration limit.

Our solver runs with the paper's settings (20 iterations, ε_g = 10, ε_δ = 1e-6): a first call
compiles, a second identical call is timed. The same unknowns (every state's and the
parameters' tangent offsets from the initial point) then go to
``scipy.optimize.least_squares`` (``trf``, ``x_scale`` ``"jac"`` or ``1``, a sparse Jacobian
assembled from our per-step blocks), timed after a warm-up of its jitted functions.
``scaling`` times our solve for 10, 30 and 100 s of data (``--quick``: 3 s problem; 2, 4 and
8 s). Nothing is cached on disk; the C allocator is set up as every entry point sets it up
(``numerics.reuse_freed_memory``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import platform
import resource
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")  # scipy's side on one core too

import numpy as np  # noqa: E402
import scipy  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402
from scipy.sparse import csr_matrix  # noqa: E402

from mb_estimation import lie  # noqa: E402
from mb_estimation.config import apply_overrides, builtin_config_path, load_config  # noqa: E402
from mb_estimation.estimation import EstimationProblem, SolverSettings, estimate  # noqa: E402
from mb_estimation.estimation.parameters import (  # noqa: E402
    FreeParameters,
    parameters_boxplus,
    tangent_bounds,
)
from mb_estimation.estimation.residuals import (  # noqa: E402
    ModelStructure,
    StepData,
    linearize,
    recording_residuals,
)
from mb_estimation.estimation.solver import states_from_angles  # noqa: E402
from mb_estimation.multibody import state_boxplus  # noqa: E402
from mb_estimation.numerics import jax, reuse_freed_memory  # noqa: E402
from mb_estimation.rigs import get_rig, parameter_arrays  # noqa: E402
from mb_estimation.setup import set_up  # noqa: E402
from mb_estimation.signals import Recording, prepare_recording  # noqa: E402
from mb_estimation.simulation import simulate_recording  # noqa: E402

jnp = jax.numpy
reuse_freed_memory()  # as configure_jax does for mb-estimation and the node

SIMULATION_STEP = {"model": 1e-3, "paper": 1e-4}  # [s]
RATE_HZ = 1000.0
NOISE_RAD = 1e-3
SEED = 0
GRID_STEP = 0.01  # h [s]
SETTINGS = SolverSettings(kappa=100.0, max_iterations=20, gradient_tolerance=10.0,
                          step_tolerance=1e-6)  # the paper's (§4.6)
COMPLIANCE = 1e-4  # every hinge compliance of the fit (and of the ``model`` data)


def configs(data: str):
    """The truth config and the fit config (Table 1 initial values, compliance 1e-4)."""
    truth = load_config(builtin_config_path("furuta_synthetic"))
    if data == "model":
        truth = apply_overrides(truth, compliance=COMPLIANCE)
    initial = load_config(builtin_config_path("furuta"))
    fit = apply_overrides(truth, compliance=COMPLIANCE, free=list(initial.free),
                          set_values={name: initial.parameters[name] for name in initial.free})
    return truth, fit


def swingup_problem(duration_s: float, data: str = "model") -> EstimationProblem:
    """The swing-up problem with ``duration_s`` seconds of simulated data."""
    truth, fit = configs(data)
    simulated = simulate_recording(get_rig("furuta"), truth.parameters, "swingup",
                                   duration_s=duration_s, dt=SIMULATION_STEP[data],
                                   rate_hz=RATE_HZ, noise_rad=NOISE_RAD, seed=SEED)
    recording = Recording(f"swingup {duration_s:g} s", simulated.time_s,
                          simulated.measured_angles, simulated.time_s, simulated.inputs)
    grid = prepare_recording(recording, GRID_STEP, fit.advanced.filter_cutoff_hz)
    return set_up(fit, [recording]).problem((grid,))


def time_ours(problem: EstimationProblem):
    """Compile (first call), then time a second identical call: ``(first, second, wall_s)``."""
    first = estimate(problem, SETTINGS)
    started = time.perf_counter()
    second = estimate(problem, SETTINGS)
    return first, second, time.perf_counter() - started


# --- scipy.optimize.least_squares on the same unknowns -------------------------------------


def left_jacobian(rotation_vector):
    """Left Jacobian ``J_l(φ)`` ``[..., 3, 3]`` of SO(3): ``exp(φ + δ) ≈ exp(J_l(φ) δ) exp(φ)``."""
    theta2 = jnp.sum(rotation_vector**2, axis=-1)[..., None, None]
    small = theta2 < 1e-8
    safe2 = jnp.where(small, 1.0, theta2)
    theta = jnp.sqrt(safe2)
    a = jnp.where(small, 0.5 - theta2 / 24.0, (1.0 - jnp.cos(theta)) / safe2)
    b = jnp.where(small, 1.0 / 6.0 - theta2 / 120.0, (theta - jnp.sin(theta)) / (safe2 * theta))
    k = lie.skew(rotation_vector)
    return jnp.eye(3) + a * k + b * (k @ k)


def _point(structure, base_free, base_states, z):
    """``(x_base ⊞ z_x, χ_base ⊞ z_χ)``."""
    num_steps, num_bodies = base_states.position.shape[:2]
    size = num_steps * num_bodies * 12
    states = state_boxplus(base_states, z[:size].reshape(num_steps, num_bodies, 12))
    return states, parameters_boxplus(structure.free, base_free, z[size:])


def _residual_vector(structure, fixed, base_free, base_states, data, z):
    states, values = _point(structure, base_free, base_states, z)
    return recording_residuals(structure, fixed, values, states, data).ravel()


def _jacobian_values(structure, fixed, base_free, base_states, data, z):
    """Nonzeros of ``∂r/∂z`` in CSR order (see :func:`_sparsity`).

    The blocks of :func:`linearize` are derivatives with respect to a perturbation δ applied at
    the current point, ``(x_base ⊞ z) ⊞ δ``; scipy needs them with respect to ``z``. Positions,
    velocities and scalar parameters add, so the two coincide there; for the rotation parts
    (orientations, the tilt) ``exp(z + δz) ⋆ e ≈ exp(J_l(z) δz) ⋆ exp(z) ⋆ e``, so those three
    columns are multiplied by the left Jacobian ``J_l(z)``: the Jacobian is exact, not the
    ``z = 0`` approximation.
    """
    free = structure.free
    states, values = _point(structure, base_free, base_states, z)
    lin = linearize(structure, fixed, values, states, data)
    num_steps, num_rows = lin.residuals.shape
    num_bodies = base_states.position.shape[1]
    size = num_steps * num_bodies * 12
    rotations = left_jacobian(z[:size].reshape(num_steps, num_bodies, 12)[..., 3:6])

    def chain(block, rotation):  # block [k, m, nb*12], rotation [k, nb, 3, 3]
        block = block.reshape(block.shape[0], num_rows, num_bodies, 12)
        turned = jnp.einsum("kmbi,kbij->kmbj", block[..., 3:6], rotation)
        return block.at[..., 3:6].set(turned).reshape(block.shape[0], num_rows, num_bodies * 12)

    current = chain(lin.current, rotations)
    previous = chain(lin.previous[1:], rotations[:-1])  # block k depends on x_{k-1}
    parameters = lin.parameters
    for name, kind in zip(free.names, free.kinds, strict=True):
        if kind == "quaternion":
            part = free.slices[name]
            parameters = parameters.at[..., part].set(
                parameters[..., part] @ left_jacobian(z[size:][part]))
    first = jnp.concatenate([current[0], parameters[0]], axis=-1).ravel()
    rest = jnp.concatenate([previous, current[1:], parameters[1:]], axis=-1).ravel()
    return jnp.concatenate([first, rest])


def _sparsity(num_steps: int, num_rows: int, state_size: int, parameter_size: int):
    """CSR ``indices`` and ``indptr`` of ``∂r/∂z``, ``z = [δx_0 .. δx_{n-1}, δχ]``.

    Rows of block 0 see ``x_0`` and χ; rows of block ``k ≥ 1`` see ``x_{k-1}, x_k`` and χ, in
    increasing column order, so the row-major flattening of ``[previous, current, parameters]``
    is the CSR data.
    """
    start = num_steps * state_size
    parameter_columns = start + np.arange(parameter_size)
    first = np.tile(np.concatenate([np.arange(state_size), parameter_columns]), num_rows)
    steps = np.arange(1, num_steps)[:, None, None]
    state_columns = (steps - 1) * state_size + np.arange(2 * state_size)[None, None, :]
    state_columns = np.broadcast_to(state_columns, (num_steps - 1, num_rows, 2 * state_size))
    tail = np.broadcast_to(parameter_columns, (num_steps - 1, num_rows, parameter_size))
    rest = np.concatenate([state_columns, tail], axis=-1).ravel()
    lengths = np.concatenate([np.full(num_rows, state_size + parameter_size),
                              np.full((num_steps - 1) * num_rows, 2 * state_size + parameter_size)])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    return np.concatenate([first, rest]).astype(np.int64), indptr.astype(np.int64)


def time_scipy(problem: EstimationProblem, max_nfev: int, x_scale: str,
               tolerance: float = 1e-8, tr_solver: str = "lsmr") -> dict:
    """Solve ``problem`` with ``least_squares`` (trf) on the tangent offsets; warm-up untimed.

    ``tolerance``: scipy's ``ftol``, ``xtol`` and ``gtol`` (its default 1e-8); ``tr_solver``:
    ``lsmr`` (sparse Jacobian, iterative) or ``exact`` (the Jacobian made dense, SVD per
    iteration: small problems only). The result's ``scipy_trace`` is the cost of every residual
    evaluation, in order.
    """
    rig = problem.rig
    grid = problem.recordings[0]
    free = FreeParameters.of(rig.spec, problem.free)
    structure = ModelStructure(rig, free)
    values = parameter_arrays(problem.parameters)
    fixed = {k: v for k, v in values.items() if k not in free.names}
    base_free = {k: values[k] for k in free.names}
    data = StepData(jnp.asarray(grid.measured_angles), jnp.asarray(grid.inputs),
                    jnp.asarray(grid.observed), jnp.asarray(grid.dt),
                    jnp.asarray(np.sqrt(SETTINGS.kappa)), jnp.asarray(grid.locked_mask))
    base_states = jax.jit(functools.partial(states_from_angles, structure))(
        fixed, base_free, jnp.asarray(grid.filtered_angles), jnp.asarray(grid.dt))
    residual_fn = jax.jit(functools.partial(_residual_vector, structure))
    jacobian_fn = jax.jit(functools.partial(_jacobian_values, structure))

    num_steps, num_bodies = base_states.position.shape[:2]
    state_size = 12 * num_bodies
    num_rows = state_size + len(rig.spec.joints)
    size = num_steps * state_size + free.size
    indices, indptr = _sparsity(num_steps, num_rows, state_size, free.size)
    shape = (num_steps * num_rows, size)

    in_callbacks = [0.0]  # seconds spent in fun and jac (our model), the rest is scipy's
    trace = []  # the cost of every residual evaluation

    def fun(z):
        started = time.perf_counter()
        out = np.asarray(residual_fn(fixed, base_free, base_states, data, jnp.asarray(z)))
        in_callbacks[0] += time.perf_counter() - started
        trace.append(float(np.sum(out ** 2)) / num_steps)
        return out

    def jac(z):
        started = time.perf_counter()
        nonzeros = np.asarray(jacobian_fn(fixed, base_free, base_states, data, jnp.asarray(z)))
        out = csr_matrix((nonzeros, indices, indptr), shape=shape)
        if tr_solver == "exact":
            out = out.toarray()
        in_callbacks[0] += time.perf_counter() - started
        return out

    lower = np.full(size, -np.inf)
    upper = np.full(size, np.inf)
    low, high = tangent_bounds(free, {k: np.asarray(v) for k, v in base_free.items()},
                               problem.lower, problem.upper)
    lower[num_steps * state_size:] = low
    upper[num_steps * state_size:] = high

    z0 = np.zeros(size)
    started = time.perf_counter()
    initial_cost = float(np.sum(fun(z0) ** 2)) / num_steps
    jac(z0)
    warmup_s = time.perf_counter() - started
    in_callbacks[0] = 0.0
    trace.clear()
    started = time.perf_counter()
    result = least_squares(fun, z0, jac=jac, bounds=(lower, upper), method="trf",
                           x_scale="jac" if x_scale == "jac" else float(x_scale),
                           max_nfev=max_nfev, ftol=tolerance, xtol=tolerance, gtol=tolerance,
                           tr_solver=tr_solver)
    total_s = time.perf_counter() - started
    _, estimated = _point(structure, base_free, base_states, jnp.asarray(result.x))
    return {
        "scipy_total_s": total_s,
        "scipy_callbacks_s": in_callbacks[0],
        "scipy_compile_s": warmup_s,
        "scipy_cost": float(np.sum(result.fun**2)) / num_steps,
        "scipy_initial_cost": initial_cost,
        "scipy_nfev": int(result.nfev),
        "scipy_njev": int(result.njev) if result.njev is not None else None,
        "scipy_status": int(result.status),
        "scipy_message": str(result.message),
        "scipy_max_nfev": max_nfev,
        "scipy_x_scale": x_scale,
        "scipy_tr_solver": tr_solver,
        "scipy_hit_max_nfev": int(result.status) == 0,
        "scipy_unknowns": size,
        "scipy_residuals": shape[0],
        "scipy_nonzeros": len(indices),
        "scipy_parameters": {k: np.asarray(v).tolist() for k, v in estimated.items()},
        "scipy_trace": list(trace),
    }


# --- both solvers to the same cost on a problem scipy solves ------------------------------

RELEASE_FREE = {"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4}  # §4.7's start (Table 1)
TIGHT = SolverSettings(kappa=SETTINGS.kappa, max_iterations=200, gradient_tolerance=1e-10,
                       step_tolerance=1e-12)


def release_problem(duration_s: float = 10.0) -> EstimationProblem:
    """The §4.7 release inside the model class: four parameters, every other value true.

    Simulated by the model itself (SPOOK at the fit's step h = 0.01 and compliance 1e-4, one
    sample per step, noise 1e-3 rad), so the fit's minimum is the data's noise, not a model
    error: a problem both solvers can finish. J_Azz, J_Byy, b1, b2 start from Table 1.
    """
    truth, _ = configs("model")
    simulated = simulate_recording(get_rig("furuta"), truth.parameters, "release",
                                   duration_s=duration_s, dt=GRID_STEP, rate_hz=1.0 / GRID_STEP,
                                   noise_rad=NOISE_RAD, seed=SEED)
    recording = Recording(f"release {duration_s:g} s", simulated.time_s,
                          simulated.measured_angles, simulated.time_s, simulated.inputs)
    fit = apply_overrides(truth, free=tuple(RELEASE_FREE), set_values=RELEASE_FREE)
    grid = prepare_recording(recording, GRID_STEP, fit.advanced.filter_cutoff_hz)
    return set_up(fit, [recording]).problem((grid,))


def _timed(run):
    started = time.perf_counter()
    out = run()
    return out, time.perf_counter() - started


def equal_cost_comparison(x_scale: str = "jac", relative: float = 1e-6,
                          duration_s: float = 1.0, max_nfev: int = 400,
                          tr_solver: str = "exact") -> dict:
    """Ours and scipy's trf, each timed to the same cost: the better final cost × (1 + relative).

    Both first run to tight tolerances (ours: ``TIGHT``; scipy: ftol = xtol = gtol = 1e-15,
    ``max_nfev`` evaluations at most; its iterations cost about a second each on the 10 s
    problem, hence 3 s by default); the target is the lower final cost times ``1 + relative``. Each
    is then timed again, stopped where its first run reached the target: ours after the first
    iteration whose cost is at most the target, scipy after the residual evaluation that was.
    A solver that never reached the target is reported with its final cost and ``null`` time.
    """
    problem = release_problem(duration_s)
    estimate(problem, TIGHT)  # compile
    ours = estimate(problem, TIGHT)
    reference = time_scipy(problem, max_nfev, x_scale, tolerance=1e-15, tr_solver=tr_solver)
    target = min(ours.cost, reference["scipy_cost"]) * (1.0 + relative)
    reached = [k for k, record in enumerate(ours.history) if record.cost <= target]
    ours_s = ours_cost = None
    if reached:
        settings = dataclasses.replace(TIGHT, max_iterations=max(reached[0], 1))
        stopped, ours_s = _timed(lambda: estimate(problem, settings))
        ours_cost = stopped.cost
    evaluations = [n for n, cost in enumerate(reference["scipy_trace"], 1) if cost <= target]
    scipy_s = scipy_cost = None
    if evaluations:
        stopped = time_scipy(problem, evaluations[0], x_scale, tolerance=1e-15,
                             tr_solver=tr_solver)
        scipy_s, scipy_cost = stopped["scipy_total_s"], stopped["scipy_cost"]
    return {
        "problem": f"{duration_s:g} s release at h = 0.01 inside the model class, "
                   "J_Azz J_Byy b1 b2 free",
        "scipy_tr_solver": tr_solver,
        "target_cost": target, "relative": relative,
        "ours_final_cost": ours.cost, "ours_iterations_to_target": reached[0] if reached else None,
        "ours_s": ours_s, "ours_cost": ours_cost,
        "scipy_final_cost": reference["scipy_cost"], "scipy_final_nfev": reference["scipy_nfev"],
        "scipy_evaluations_to_target": evaluations[0] if evaluations else None,
        "scipy_s": scipy_s, "scipy_cost": scipy_cost,
        "ratio": scipy_s / ours_s if ours_s and scipy_s else None,
        "parameters": {name: {"ours": float(np.ravel(ours.parameters[name])[0]),
                              "scipy": float(np.ravel(reference["scipy_parameters"][name])[0])}
                       for name in RELEASE_FREE},
    }


def machine_info() -> dict:
    """Where the numbers come from."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = None
    return {"platform": platform.platform(), "processor": platform.processor(),
            "machine": platform.machine(), "cpu_count": os.cpu_count(), "affinity": cores,
            "python": sys.version.split()[0], "jax": jax.__version__,
            "numpy": np.__version__, "scipy": scipy.__version__,
            "jax_devices": [str(d) for d in jax.devices()],
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


def _show(key, value) -> None:
    print(f"{key:>28}: {value:.4g}" if isinstance(value, float) else f"{key:>28}: {value}")


def main() -> None:
    """Time our solve, scipy's and our scaling with the data length; print (and save) them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="3 s problem; scaling over 2, 4 and 8 s")
    parser.add_argument("--scipy-max-nfev", type=int, default=200,
                        help="cap on scipy's residual evaluations (default 200)")
    parser.add_argument("--data", choices=("model", "paper"), default="model",
                        help="how the swing-up is simulated (module doc; default model)")
    parser.add_argument("--scipy-x-scale", choices=("jac", "1"), default="jac",
                        help="scipy's variable scaling: 'jac' (its column norms) or 1 (none)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--ours-only", action="store_true",
                        help="our solve only (total_s, compile_s): no scipy, no scaling")
    args = parser.parse_args()
    duration = 3.0 if args.quick else 10.0
    durations = (2.0, 4.0, 8.0) if args.quick else (10.0, 30.0, 100.0)

    truth, fit = configs(args.data)
    problem = swingup_problem(duration, args.data)
    num_steps = problem.recordings[0].num_steps
    first, ours, total_s = time_ours(problem)
    print(f"swing-up {duration:g} s, h = {GRID_STEP:g}, kappa = {SETTINGS.kappa:g}: "
          f"{num_steps} steps, {FreeParameters.of(problem.rig.spec, problem.free).size} "
          "parameter dimensions")
    result = {
        "data": args.data,
        "duration_s": duration,
        "steps": num_steps,
        "total_s": total_s,
        "iterations": ours.iterations,
        "per_iteration_s": total_s / max(ours.iterations, 1),
        "compile_s": first.compile_time_s,
        "solve_s": ours.solve_time_s,
        "cost": ours.cost,
        "initial_cost": ours.history[0].cost,
        "converged": ours.converged,
        "message": ours.message,
    }
    for key, value in result.items():
        _show(key, value)
    if args.ours_only:
        return

    print(f"scipy.optimize.least_squares (trf, x_scale={args.scipy_x_scale}, sparse jac, lsmr):")
    scipy_result = time_scipy(problem, args.scipy_max_nfev, args.scipy_x_scale)
    del scipy_result["scipy_trace"]
    for key, value in scipy_result.items():
        if key != "scipy_parameters":
            _show(key, value)
    if scipy_result["scipy_hit_max_nfev"]:
        print(f"{'':>28}  scipy stopped at the cap max_nfev = {args.scipy_max_nfev}")
    result.update(scipy_result)

    print("to the same cost (equal_cost_comparison):")
    result["equal_cost"] = equal_cost_comparison(args.scipy_x_scale)
    for key, value in result["equal_cost"].items():
        if key != "parameters":
            _show(key, value)

    print(f"{'parameter':>10} {'truth':>11} {'initial':>11} {'ours':>11} {'scipy':>11}")
    table = {}
    for name in problem.free:
        row = [np.ravel(truth.parameters[name]), np.ravel(fit.parameters[name]),
               np.ravel(ours.parameters[name]), np.ravel(scipy_result["scipy_parameters"][name])]
        table[name] = dict(zip(("truth", "initial", "ours", "scipy"),
                               (r.tolist() if r.size > 1 else float(r[0]) for r in row),
                               strict=True))
        for i in range(row[0].size):
            label = name if row[0].size == 1 else f"{name}[{i}]"
            print(f"{label:>10} " + " ".join(f"{r[i]:11.4g}" for r in row))
    result["parameters"] = table
    del result["scipy_parameters"]

    print("scaling (our solve, second call):")
    print(f"{'duration [s]':>14} {'steps':>7} {'total [s]':>10} {'iterations':>10} "
          f"{'per iteration [s]':>18} {'compile [s]':>12} {'peak RSS [MB]':>14}")
    scaling, per_iteration, iterations, peak_rss = {}, {}, {}, {}
    for seconds in durations:
        if seconds == duration:
            scaled, wall, compile_s, steps = ours, total_s, first.compile_time_s, num_steps
        else:
            scaled_problem = swingup_problem(seconds, args.data)
            steps = scaled_problem.recordings[0].num_steps
            warm, scaled, wall = time_ours(scaled_problem)
            compile_s = warm.compile_time_s
        scaling[steps] = wall
        iterations[steps] = scaled.iterations
        per_iteration[steps] = wall / max(scaled.iterations, 1)
        # The process's peak resident memory so far (Linux: KiB): the longest point runs last.
        peak_rss[steps] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(f"{seconds:14g} {steps:7d} {wall:10.3g} {scaled.iterations:10d} "
              f"{per_iteration[steps]:18.3g} {compile_s:12.3g} {peak_rss[steps]:14.0f}")
    result.update(scaling=scaling, scaling_per_iteration_s=per_iteration,
                  scaling_iterations=iterations, scaling_peak_rss_mb=peak_rss,
                  machine=machine_info())
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
