"""What calibrate, crossval, sweep and demo print while a fit runs and after it."""

from __future__ import annotations


def fit_progress(quiet: bool, config, states_only: bool = False):
    """What a fit's :class:`~mb_estimation.fitting.Progress` events print.

    A line as each stage starts and a line per iteration (the simulation fit's segment length
    and step each time they change); None (nothing) with ``quiet``.
    ``states_only``: the fit estimates the states alone (crossval).
    """
    if quiet:
        return None
    free = ("the states" if states_only else
            f"{len(config.free)} parameters ({', '.join(config.free)}) and the states")

    shooting = [None]  # the segment length and step of the last shooting line

    def show(event) -> None:
        if event.shooting is not None and event.shooting != shooting[0]:
            shooting[0] = event.shooting
            print(f"  segments of {event.shooting[0]:g} s, simulation step "
                  f"{event.shooting[1]:.3g} s", flush=True)
        if event.iteration is None:
            print(_stage_line(event, free), flush=True)
        elif event.record is not None:
            entry = event.record
            print(f"  iteration {entry.iteration:3d}: cost {entry.cost:.4e} (observation "
                  f"{entry.observation_mse:.3e}, impulse {entry.impulse_mse:.3e}), "
                  f"|g| {entry.gradient_norm:.3g}, {entry.elapsed_s:.1f} s", flush=True)
        else:
            shown = ", ".join(f"{name} {value:.6g}" for name, value in event.values.items())
            print(f"  shooting iteration {event.iteration:3d}  angle MSE {event.cost:.6g} rad²"
                  f"  {shown}", flush=True)
    return show


def print_set_up(setup) -> None:
    """What reading did to the recordings and what the set-up found that the fit will not mend.

    Printed before the fit starts: a misread recording is seen before minutes of fitting.
    """
    print_notes(setup.notes)
    if setup.drives_conflict is not None:
        print(f"warning: {setup.drives_conflict}; the verdict will name it", flush=True)


def _stage_line(event, free: str) -> str:
    """The line a stage starts with."""
    from mb_estimation.fitting import StageKind

    stage = event.stage
    if stage.kind is StageKind.SIMULATION:
        return (f"refining the parameters through the simulator (step {stage.dt:g} s, multiple "
                f"shooting over segments of {stage.shooting.segment_s:g} s, lengthened while "
                "the simulator follows the data)")
    grid = f"{event.steps} steps of {stage.dt:g} s"
    if stage.kind is StageKind.PAPER:
        return f"calibrating {free} of {event.recordings} recording(s), the paper's single " \
            f"fit: {grid}"
    level = sum(s.kind is StageKind.JOINT for s in event.stages[:event.index + 1])
    levels = sum(s.kind is StageKind.JOINT for s in event.stages)
    return (f"calibrating {free} of {event.recordings} recording(s), consistent path level "
            f"{level} of {levels}: {grid}")


def print_notes(notes) -> None:
    """What reading did to the recordings, a note per line."""
    for note in notes:
        print(f"note: {note}", flush=True)


def print_parameters(result, identified, truth=None) -> None:
    """Each free parameter ± its std (and the truth), and its status where not determined.

    ``identified``: what the data determine (the status ``not determined``, ``at its lower
    bound`` …, as the verdict reads it).
    """
    import numpy as np

    from mb_estimation.estimation.identifiability import DETERMINED
    from mb_estimation.io.parameter_files import gravity_tilt

    for name in result.free:
        value = np.ravel(result.parameters[name])
        std = np.ravel(result.std[name])
        if value.size == 4:  # a tilt: the two angles gravity leans by; about it, nothing shows
            tilt = gravity_tilt(value, std)
            line = (f"  {name:8s} gravity leans {tilt['about_x_rad']:.3g} ± "
                    f"{tilt['std_rad'][0]:.2g} rad about x, {tilt['about_z_rad']:.3g} ± "
                    f"{tilt['std_rad'][1]:.2g} rad about z; about gravity: not determined")
            print(line)
            continue
        text = " ".join(f"{v:.6g}" for v in value)
        spread = " ".join(f"{s:.2g}" for s in std)
        line = f"  {name:8s} {text} ± {spread}"
        if truth is not None:
            line += f"   (truth {' '.join(f'{v:.6g}' for v in np.ravel(truth[name]))})"
        status = identified.standing(name).status
        if status != DETERMINED:
            line += f"   {status}"
        print(line)


def print_step_dependence(calibration) -> None:
    """How far each free parameter moved over the consistent path's last two steps."""
    import numpy as np

    rows = calibration.assessment.step_dependence
    if not rows:
        return
    coarse, fine = (level.stage for level in calibration.fit.levels[-2:])
    print(f"step dependence (h = {coarse.dt:g} s → {fine.dt:g} s):")
    for row in rows:
        change = " ".join(f"{v:+.3g}" for v in row.change)
        with np.errstate(divide="ignore", invalid="ignore"):
            sigmas = " ".join(f"{v:.2g}" for v in np.abs(row.change) / row.std)
        said = ("at its bound: not an estimate the step could move" if row.settled is None
                else "settled" if row.settled else "STILL MOVES with the step: a shadow value")
        print(f"  {row.name:8s} change {change} ({sigmas} std): {said}")


def print_predictions(checks, advice=None) -> None:
    """RMS error of the short-horizon predictions at the longest lead time (and the advice)."""
    for check in checks:
        if not check.starts:
            continue
        errors = ", ".join(f"{v:.3g}" for v in check.rms[-1])
        print(f"prediction {check.horizons_s[-1]:.3g} s ahead from {check.starts} estimated "
              f"states, RMS angle error [rad] (arm, pendulum): {errors} ({check.name})")
    if advice:
        print(f"note: {advice}")


def print_open_loop(checks) -> None:
    """The fitted model replayed open loop on each recording's input (validation)."""
    from mb_estimation.validation import FOLLOWED_RAD

    print("open-loop replay from the estimated initial state, RMS angle error [rad] "
          "(arm, pendulum):")
    for check in checks:
        first = ", ".join(f"{v:.3g}" for v in check.rms_first)
        whole = ", ".join(f"{v:.3g}" for v in check.rms_all)
        length = check.time_s[-1] - check.time_s[0]
        followed = ("" if check.followed_s >= length else
                    f"; within {FOLLOWED_RAD:g} rad for the first {check.followed_s:.3g} s")
        print(f"  {check.name}: first {check.first_s:g} s ({first}), all {length:.3g} s "
              f"({whole}){followed}")


def print_verdict(calibration) -> None:
    """The precision against the Cramér–Rao bound, what the data determine, the verdict."""
    import numpy as np

    result, assessment = calibration.result, calibration.assessment
    bound, identified = assessment.bound, assessment.identified
    if bound is not None:
        shown = []
        for name in bound.names:
            value = abs(float(np.ravel(result.parameters[name])[0]))
            if value > 0:
                std = float(np.ravel(result.std[name])[0])
                shown.append(f"{name} {100 * std / value:.2g} % (bound "
                             f"{100 * bound.std[name] / value:.2g} %)")
        if shown:
            print("relative std against the Cramér–Rao bound (a simulation-error fit's best on "
                  "these data): " + ", ".join(shown))
    for standing in identified.parameters:
        if not standing.determined:
            print(f"  {standing.name}: {standing.status}")
    if identified.determined_ratios:
        print("the data determine " + ", ".join(str(r) for r in identified.determined_ratios))
    for line in calibration.verdict.lines():
        print(line)


def print_calibration(calibration, truth=None, *, notes: bool = True) -> None:
    """What a :class:`~mb_estimation.calibration.Calibration` found.

    What reading did to the recordings (unless ``notes`` is False: :func:`print_set_up` said
    it before the fit), the fit (beside ``truth``, the demo's values), how far its values
    moved with the step, its predictions and open-loop replays, the precision against the
    Cramér–Rao bound, what the data determine, and the verdict.
    """
    assessment = calibration.assessment
    if notes:
        print_notes(calibration.notes)
    print(calibration.result.message)
    print_parameters(calibration.result, assessment.identified, truth)
    print_step_dependence(calibration)
    print_predictions(assessment.predictions, assessment.note)
    print_open_loop(assessment.replays)
    print_verdict(calibration)


def print_written(output, calibration) -> None:
    """The files calibrate wrote and the time it took."""
    result = calibration.result
    urdf = " calibrated.urdf," if calibration.setup.config.rig == "furuta" else ""
    print(f"wrote {output}/parameters.yaml, ros_parameters.yaml, states.csv,{urdf} report.html "
          f"({result.compile_time_s:.1f} s compiling, {result.solve_time_s:.1f} s solving)")
    if urdf:
        from mb_estimation.io.urdf_files import urdf_notes

        for note in urdf_notes(calibration.setup.config, result.parameters):
            print(f"note: calibrated.urdf: {note}")
