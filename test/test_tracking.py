"""``track``: recordings cut into the node's windows, fitted in parallel, the drift over them.

The cut is checked on a hand-made recording; the whole command on simulated bags of a rig
whose b1 rises 20 % per hour, recorded three times over that hour (10 s each): the rate is
found, and two worker processes of which one is killed mid-run, this process alone and a Dask
cluster that loses a worker mid-run all give the same numbers.
"""

import numpy as np
import pytest
import yaml

from mb_estimation.api import SIMULATED_START_TIME_S, write_simulated_bag
from mb_estimation.cli import main
from mb_estimation.config import apply_overrides, load_config
from mb_estimation.online.intake import WINDOW_MARGIN_FRACTION
from mb_estimation.signals import Recording
from mb_estimation.tracking import cut_windows, track_windows

RISE_PER_HOUR = 0.2


def test_windows_are_cut_as_the_node_cuts_them():
    time_s = np.arange(0.0, 12.001, 0.01)
    angles = np.stack([time_s, -time_s], axis=1)
    inputs = np.array([[1.0], [2.0], [3.0]])
    recording = Recording("r", time_s, angles, np.array([0.0, 4.0, 9.5]), inputs,
                          start_ns=5 * 10**9)
    windows = cut_windows(recording, 5.0, 2.5)
    assert [w.index for w in windows] == [1, 2, 3]  # at 0, 2.5, 5 s; 7.5 s would pass the end
    assert [w.start_s for w in windows] == [5.0, 7.5, 10.0]
    for window, start in zip(windows, (0.0, 2.5, 5.0), strict=True):
        piece = window.recording  # the span's samples (they fall on its ends here)
        assert piece.time_s[0] == pytest.approx(0.0) and piece.time_s[-1] == pytest.approx(5.0)
        np.testing.assert_allclose(piece.joint_angles[:, 0], piece.time_s + start)
    # off the grid: one neighbour on each side, only within a tenth of the window
    piece = cut_windows(recording, 5.0, 5.005)[1].recording  # from 5.005 s to 10.005 s
    assert piece.time_s[0] == pytest.approx(-0.005) and piece.time_s[-1] == pytest.approx(5.005)
    sparse = Recording("g", np.array([0.0, 0.2, 6.0, 12.0]), np.zeros((4, 2)), np.array([0.0]),
                       inputs[:1])
    piece = cut_windows(sparse, 5.0, 6.0)[1].recording  # 6..11 s: the sample at 12 s is too far
    np.testing.assert_allclose(piece.time_s, [0.0])
    assert WINDOW_MARGIN_FRACTION * 5.0 < 1.0
    # a recording spanning 9.999999999 s (stamps rounded to the nanosecond) holds two windows
    rounded = Recording("n", np.linspace(0.0, 10.0 - 1e-9, 1001), np.zeros((1001, 2)),
                        np.array([0.0]), inputs[:1])
    assert len(cut_windows(rounded, 5.0, 5.0)) == 2
    # the input held at each start counts from it; later changes within the window follow
    np.testing.assert_allclose(windows[0].recording.input_time_s, [0.0, 4.0])
    np.testing.assert_allclose(windows[1].recording.input_time_s, [0.0, 1.5])
    np.testing.assert_allclose(windows[1].recording.inputs[:, 0], [1.0, 2.0])
    np.testing.assert_allclose(windows[2].recording.input_time_s, [0.0, 4.5])
    np.testing.assert_allclose(windows[2].recording.inputs[:, 0], [2.0, 3.0])


@pytest.fixture(scope="module")
def wearing_rig(tmp_path_factory):
    """Three 10 s recordings of a rigid furuta_synthetic at 0, 30 and 60 min, b1 rising."""
    folder = tmp_path_factory.mktemp("wear")
    truth = apply_overrides(load_config("furuta_synthetic"), hinges="rigid")
    b1 = float(truth.parameters["b1"])
    bags = []
    for k, minutes in enumerate((0.0, 30.0, 60.0)):
        hours = minutes / 60.0
        config = apply_overrides(truth, set_values={"b1": b1 * (1 + RISE_PER_HOUR * hours)})
        bag = folder / f"recording_{k}"
        write_simulated_bag(config, "multisine", bag, duration_s=10.5, seed=k,
                            start_time_s=SIMULATED_START_TIME_S + 3600.0 * hours)
        bags.append(str(bag))
    return folder, bags, b1


FREE = "J_Azz,J_Byy,b1,b2"


def _track_killing_once(worker_pid, killed):
    """``track_windows`` that SIGKILLs the process ``worker_pid()`` once the first verdict is back.

    The pid killed is appended to ``killed``.
    """
    import os
    import signal

    import mb_estimation.tracking

    track_windows_here = mb_estimation.tracking.track_windows

    def killing(config, windows, **options):
        def kill_once(verdict):
            options["progress"](verdict)
            if not killed:
                killed.append(worker_pid())
                os.kill(killed[0], signal.SIGKILL)
        return track_windows_here(config, windows, **{**options, "progress": kill_once})

    return killing


@pytest.fixture(scope="module")
def tracked(wearing_rig):
    """``track`` on two local worker processes, one killed once the first window is back.

    Its output folder and what it printed.
    """
    import contextlib
    import io
    import multiprocessing

    import mb_estimation.tracking

    folder, bags, _ = wearing_rig
    output = folder / "tracked"
    printed = io.StringIO()
    killed = []
    killing = _track_killing_once(lambda: multiprocessing.active_children()[0].pid, killed)
    with contextlib.redirect_stdout(printed), pytest.MonkeyPatch.context() as patch:
        patch.setattr(mb_estimation.tracking, "track_windows", killing)
        status = main(["track", *bags, "--config", "furuta_synthetic", "--free", FREE,
                       "--output", str(output), "--workers", "2"])
    assert status == 0 and killed, printed.getvalue()
    return output, printed.getvalue()


def test_a_window_whose_worker_keeps_dying_is_given_up_and_the_rest_go_on():
    import concurrent.futures
    import multiprocessing

    import worker_deaths

    from mb_estimation.tracking.windows import WORKER_DEATHS_ALLOWED, bounded_map

    started = []

    def pool():
        started.append(1)
        return concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"))

    run = bounded_map(pool, 1, lambda item, reason: (item, reason))
    results = list(run(worker_deaths.tenfold_or_die, [1, -1, 2]))
    assert results == [10, (-1, f"its worker process died {WORKER_DEATHS_ALLOWED} times"), 20]
    assert len(started) == 1 + WORKER_DEATHS_ALLOWED


def test_track_finds_the_rate_and_workers_change_nothing(wearing_rig, tracked):
    folder, bags, b1 = wearing_rig
    output, printed = tracked
    assert "6 of 6 windows accepted" in printed and "on 2 worker(s)" in printed
    summary = yaml.safe_load((output / "tracking.yaml").read_text())
    rate = summary["parameters"]["b1"]
    truth = b1 * RISE_PER_HOUR
    assert abs(rate["rate_per_hour"] - truth) < 2 * rate["rate_std"]
    assert rate["rate_std"] < truth / 2  # found, not just covered
    assert set(summary["recordings"]) == set(bags)
    assert (output / "drift.png").stat().st_size > 10_000
    assert "Drift alarm" in (output / "report.html").read_text()
    rows = (output / "windows.csv").read_text().splitlines()
    assert len(rows) == 7 and rows[0].startswith("end_s,recording,window,accepted,reason")
    plain = (output / "report.html").stat().st_mode & 0o777  # as a plain write makes it
    for name in ("windows.csv", "tracking.yaml"):  # others on a shared machine read them too
        assert (output / name).stat().st_mode & 0o777 == plain, name

    # the same windows in this process (its XLA multi-threaded): the same numbers to round-off
    config = apply_overrides(load_config("furuta_synthetic"), free=FREE.split(","))
    from mb_estimation.api import read_recordings

    windows = [w for r in read_recordings(config, bags) for w in cut_windows(r, 5.0, 5.0)]
    here = track_windows(config, windows).final
    np.testing.assert_allclose(here.rates[2], rate["rate_per_hour"], rtol=1e-8)
    np.testing.assert_allclose(here.estimate.values["b1"][0],
                               summary["parameters"]["b1"]["value"], rtol=1e-10)


def test_a_dask_cluster_that_loses_a_worker_gives_the_same_numbers(wearing_rig, tracked,
                                                                   monkeypatch):
    """A loopback-only local cluster; one worker killed once the first window is back."""
    import os

    import mb_estimation.tracking

    distributed = pytest.importorskip("distributed")
    folder, bags, _ = wearing_rig
    output = folder / "on_cluster"
    killed = []
    monkeypatch.setattr(mb_estimation.tracking, "track_windows",
                        _track_killing_once(lambda: pids[0], killed))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        status = main(["track", *bags, "--config", "furuta_synthetic", "--free", FREE,
                       "--output", str(output), "--cluster", cluster.scheduler_address])
        assert status == 0 and killed
        client.wait_for_workers(2, timeout=60)
        assert pids[0] not in client.run(os.getpid).values()  # lost, and replaced
    local, _ = tracked
    assert (output / "tracking.yaml").read_text() == (local / "tracking.yaml").read_text()

    def numbers(path):  # all but the fit times
        return [row.split(",")[:5] + row.split(",")[6:] for row in path.read_text().splitlines()]

    assert numbers(output / "windows.csv") == numbers(local / "windows.csv")


def test_recordings_that_overlap_in_time_are_said(capsys):
    """Bags that share a start (simulated, a clock reset): their windows read as of one time."""
    from types import SimpleNamespace

    from mb_estimation.cli.track import _warn_of_overlap

    def recording(start_s):
        return SimpleNamespace(start_ns=int(start_s * 1e9), time_s=np.array([0.0, 8.0]))

    spans = []
    for name, start_s in (("a", 1000.0), ("b", 3000.0), ("c", 1004.0)):
        _warn_of_overlap(spans, recording(start_s), name)
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == ["warning: c overlaps a in time: the drift filter takes their windows as "
                        "of one time (their rates then say nothing); check the recordings' "
                        "clocks"]


def test_a_bad_cluster_address_or_output_is_one_line_and_leaves_no_folder(tmp_path, capsys,
                                                                         wearing_rig):
    bag = wearing_rig[1][0]
    output = tmp_path / "out"
    assert main(["track", str(bag), "--config", "furuta_synthetic", "--output", str(output),
                 "--cluster", "127.0.0.1"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("mb-estimation: error: --cluster 127.0.0.1: not a scheduler's "
                            "address") and "tcp://127.0.0.1:8786" in error
    assert "Traceback" not in error and not output.exists()
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["track", str(bag), "--config", "furuta_synthetic", "--output",
                 str(afile)]) == 2
    assert f"{afile}: exists and is not a folder" in capsys.readouterr().err


def test_a_worker_lost_while_the_set_up_is_broadcast_is_retried():
    """A worker killed as the run starts fails the set-up's broadcast: it is registered again."""
    pytest.importorskip("distributed")
    from mb_estimation.tracking.cluster import JaxSetUp, cluster_map

    class Client:
        registered = 0

        def register_plugin(self, plugin):
            assert isinstance(plugin, JaxSetUp)
            self.registered += 1
            if self.registered == 1:
                raise OSError("Stream is closed")  # distributed's CommClosedError is one

    client = Client()
    cluster_map(client, 2)
    assert client.registered == 2


def test_a_window_that_contradicts_the_fused_estimate_is_said_in_its_reason(tmp_path):
    """As the node says it: fused all the same, the reason and tracking.yaml say so."""
    from mb_estimation.online.fusion import ParameterEstimate
    from mb_estimation.tracking import write_tracking
    from mb_estimation.tracking.windows import TrackedWindow

    config = apply_overrides(load_config("furuta_synthetic"), free=["J_Azz"])

    def verdict(index, value):
        estimate = ParameterEstimate(names=("J_Azz",), values={"J_Azz": np.array([value])},
                                     covariance=np.array([[1e-12]]), windows=1)
        return TrackedWindow("r", index, 1e9 + 5.0 * index, True, "accepted", estimate, 0.1)

    for second, contradicts in ((0.003 + 1e-7, False), (0.003 + 1e-5, True)):
        prebuilt = [verdict(1, 0.003), verdict(2, second)]
        tracking = track_windows(config, [None, None],
                                 map=lambda _, items, given=prebuilt: given)
        assert len(tracking.drift) == 2  # fused either way
        assert [w.contradicts for w in tracking.windows] == [False, contradicts]
        if contradicts:
            assert tracking.windows[1].reason.startswith(
                "accepted; contradicts the fused estimate: its values and the fused ones differ")
            write_tracking(tmp_path, config, tracking)
            assert yaml.safe_load((tmp_path / "tracking.yaml").read_text())["contradicting"] == 1
