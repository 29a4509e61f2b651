"""What a user can combine on ``calibrate``: it writes its files, or fails in one line first.

A property test over the options a user combines — the free set (any of the config's
parameters, one to all), the hinges declared rigid or compliant, ``--compliance``,
``--simulation-refinement auto/on/off``, ``--estimator paper`` — on a short recording long
enough for every stage (the simulation-error fit included). Whatever the combination,
``calibrate`` either exits 0 or 1 with parameters.yaml (the free set, a verdict),
ros_parameters.yaml, states.csv and report.html written, or exits 2 with one line on stderr
before any fit has started. The default run checks the property on the combination that lost
a finished fit on the default path (then follows the same calibration through its calls, room
by room: its programs compiled once); each drawn combination compiles its own programs (a
minute on two cores), so the draws are asked for: ``MB_TEST_COMBINATIONS=N`` draws N at
random (the rigid hinges with the tilt free, which crashed the same way, among them).
"""

import contextlib
import cProfile
import io
import os
import pstats
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from mb_estimation.cli import main
from mb_estimation.config import load_config

SHORT_RUN = {"advanced": {"simulation_segment_s": 0.5}, "simulation": {"dt": 1e-3}}
PARAMETERS = tuple(load_config("furuta_synthetic").parameters)


@pytest.fixture(scope="module")
def short_recording(tmp_path_factory):
    """0.9 s of the rigid rig's multisine at 100 Hz, and a config whose stages all fit it.

    One shooting segment of 0.5 s (none twice as long fits): one length to compile.
    """
    folder = tmp_path_factory.mktemp("combinations")
    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" /
                           "furuta_synthetic.yaml").read_text())
    for section, values in SHORT_RUN.items():
        data.setdefault(section, {}).update(values)
    config = folder / "short.yaml"
    config.write_text(yaml.safe_dump(data))
    bag = folder / "bag"
    assert main(["simulate", "multisine", "--config", str(config), "--hinges", "rigid",
                 "--duration", "0.9", "--rate", "100", "--noise", "0.001",
                 "--output", str(bag)]) == 0
    return folder, config, bag


def calibrate(folder, config, bag, options):
    """Run ``calibrate`` in this process; its exit status, output and error output."""
    output = folder / f"out{len(list(folder.glob('out*')))}"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["calibrate", str(bag), "--config", str(config), "--output",
                       str(output), *options])
    return status, output, out.getvalue(), err.getvalue()


def assert_written_or_refused_before_the_fit(status, output, out, err, free):
    if status == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("mb-estimation: error: "), err
        assert not re.search(r"^calibrating ", out, re.MULTILINE), out  # no fit had started
        return
    assert status in (0, 1), (status, err)
    for name in ("parameters.yaml", "ros_parameters.yaml", "states.csv", "report.html"):
        assert (output / name).is_file(), name
    document = yaml.safe_load((output / "parameters.yaml").read_text())
    assert list(document["parameters"]) == [name for name in PARAMETERS if name in free]
    assert "trustworthy" in document["verdict"]


combinations = st.fixed_dictionaries({
    "free": st.lists(st.sampled_from(PARAMETERS), min_size=1, max_size=len(PARAMETERS),
                     unique=True),
    "hinges": st.sampled_from(["rigid", "compliant"]),
    "compliance": st.sampled_from([None, 1e-8, 1e-5]),
    "refinement": st.sampled_from([None, "auto", "on", "off"]),
    "paper": st.booleans(),
})


def options_of(case) -> list[str]:
    options = ["--free", ",".join(case["free"]), "--hinges", case["hinges"]]
    if case["compliance"] is not None:
        options += ["--compliance", str(case["compliance"])]
    if case["refinement"] is not None:
        options += ["--simulation-refinement", case["refinement"]]
    if case["paper"]:
        options += ["--estimator", "paper"]
    return options


COMPLIANT_SUBSET = {"free": ["J_Azz", "J_Byy", "b1", "b2", "tilt"], "hinges": "compliant",
                    "compliance": None, "refinement": None, "paper": False}
DRAWN = int(os.environ.get("MB_TEST_COMBINATIONS", "0"))


@settings(max_examples=max(DRAWN, 1), deadline=None, derandomize=False,
          phases=[Phase.explicit, Phase.generate] if DRAWN else [Phase.explicit],
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(case=combinations)
# the default path on compliant hinges: its simulation-error stage refits the scalars only
# (not tilt), and writing that stage crashed after the fit (the fit was lost)
@example(case=COMPLIANT_SUBSET)
def test_calibrate_writes_its_files_or_fails_in_one_line_before_the_fit(short_recording,
                                                                          case):
    status, output, out, err = calibrate(*short_recording, options_of(case))
    assert_written_or_refused_before_the_fit(status, output, out, err, case["free"])


def assert_the_last_stage_ran_and_shows_what_it_did_not_fit(output):
    stages = yaml.safe_load((output / "parameters.yaml").read_text())["refinement"]
    assert stages["formulation"][-1] == "simulation"
    last = {name: entry["values"][-1] for name, entry in stages["parameters"].items()}
    assert None in last.values(), last  # a parameter the stage did not fit: null
    return last


def test_a_calibration_goes_one_way_through_the_layers(short_recording, monkeypatch):
    """One calibration from the command line followed through its calls, every stage run.

    The property's example again (the default path on compliant hinges, its last stage fitting
    the scalars, not the tilt), so its programs are compiled already.

    Entered from :func:`mb_estimation.api.calibrate`, the rooms of a calibration come once
    each, in the order read, set up, fit, assess, judge, write (every function of those rooms
    that the api calls is recorded as it is called). And no function of a lower room calls one
    of a higher room — test_layers.py's import rule as the code runs (every caller–callee pair
    of the run, from the profiler) — but for the observers the command passes down: the
    progress events it prints (``cli.printing``'s ``show``, relayed by the fit's ``relay``),
    and what the set-up found before the fit (``print_set_up``).
    """
    from test_layers import LEVEL, STAGES, room_of

    from mb_estimation import api, report

    entered = []

    def recorded(function, stage):
        def call(*args, **kwargs):
            if not entered or entered[-1] != stage:
                entered.append(stage)
            return function(*args, **kwargs)
        return call

    for name, value in vars(api).items():
        room = getattr(value, "__module__", "").split(".")[1:2]
        if callable(value) and room and room[0] in STAGES:
            monkeypatch.setattr(api, name, recorded(value, STAGES[room[0]]))
    monkeypatch.setattr(report, "write_report", recorded(report.write_report, "write"))
    profiler = cProfile.Profile()
    status, output, out, err = profiler.runcall(calibrate, *short_recording,
                                                options_of(COMPLIANT_SUBSET))
    assert status in (0, 1), err
    assert_written_or_refused_before_the_fit(status, output, out, err, COMPLIANT_SUBSET["free"])
    last = assert_the_last_stage_ran_and_shows_what_it_did_not_fit(output)
    assert last["tilt"] is None and None not in (last["b2"], last["J_Azz"])
    assert entered == ["read", "set up", "fit", "assess", "judge", "write"]
    upward = set()
    for (filename, _, name), (*_, callers) in pstats.Stats(profiler).stats.items():
        callee = room_of(filename)
        for caller_file, _, caller_name in callers:
            caller = room_of(caller_file)
            if callee and caller and LEVEL[caller] < LEVEL[callee]:
                upward.add(f"{caller}.{caller_name} → {callee}.{name}")
    observer = {"estimation.record → fitting.relay", "fitting.fit → cli.show",
                "fitting.relay → cli.show", "api.calibrate → cli.print_set_up"}
    assert upward <= observer, sorted(upward - observer)
    assert "fitting.relay → cli.show" in upward  # the progress was printed, through the relay


@pytest.mark.parametrize(("options", "message"), [
    (["--start", "-3"], r"--start -3 s: a recording is trimmed from 0 s on"),
    (["--start", "5"], r"--start 5 s is beyond the end of .* \(0.9 s long\)"),
    (["--start", "0.5", "--end", "0.4"], r"--end 0.4 s is not after --start 0.5 s"),
    (["--end", "3"], r"--end 3 s is outside .* \(0 to 0.9 s\)"),
    (["--free", "J_Azz,J_Azz"], r"--free: J_Azz is named twice"),
    (["--free", "J_Azz,J_Q"], r"--free: free.J_Q: not a parameter of rig furuta"),
    (["--output", "/proc/no_such_folder/out"], r"/proc/no_such_folder/out: cannot write there"),
])
def test_what_can_be_checked_before_the_fit_is(short_recording, options, message):
    folder, config, bag = short_recording
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["calibrate", str(bag), "--config", str(config), "--output",
                       str(folder / "unused"), *options])
    assert status == 2 and len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
    assert re.search(message, err.getvalue()), err.getvalue()
    assert "calibrating" not in out.getvalue()


def test_held_joints_are_checked_before_the_fit(short_recording):
    """``--held``: a recording given, the rig's joints, a fit that can hold them (compliant: no).

    The recording named as it was given (here with a trailing slash, which its name as read
    drops).
    """
    folder, config, bag = short_recording
    held = r"the arm \(it spans .* rad\) is held \(--held\); a joint held still is fitted on " \
           r"rigid hinges"
    for source, value, message in (
            (str(bag), "nope=arm", r"--held nope=arm: give RECORDING=JOINTS, RECORDING one of "
                                   r"the recordings given"),
            (str(bag), f"{bag}=elbow", r"elbow is not a joint of rig furuta \(its joints: arm, "
                                       r"pendulum\)"),
            (str(bag), f"{bag}=arm", held),
            (f"{bag}/", f"{bag}/=arm", held)):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(["calibrate", source, "--config", str(config), "--output",
                           str(folder / "unused"), "--held", value])
        assert status == 2 and len(err.getvalue().strip().splitlines()) == 1, err.getvalue()
        assert re.search(message, err.getvalue()), err.getvalue()
        assert "calibrating" not in out.getvalue()
