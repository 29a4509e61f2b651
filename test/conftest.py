"""Shared pytest fixtures; the whole session runs in a loopback-only network namespace.

The namespace is entered first thing, while pytest has a single thread (see
``loopback_namespace``): every rclpy participant the tests start, in process or as a
subprocess, can reach 127.0.0.1 only. Where it cannot be made, the tests that start rclpy
skip with the reason (``ros_network``).
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import loopback_namespace  # pytest puts test/ on sys.path before importing this file

NAMESPACE_ERROR = loopback_namespace.enter()

import pytest  # noqa: E402

from mb_estimation.numerics import configure_jax  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"

# The run's own folder: the controller makes it before the workers start (they inherit its
# path) and removes it at the end. It holds one compiled-code cache for the whole run (hermetic:
# fresh each run): a program one test compiled is read back by any later test that builds it
# again, in any worker under ``pytest -n``; commands run in-process by the tests use it too.
# A folder named by ``$MB_TEST_RUN_DIR`` beforehand is used and kept (never removed: it may
# hold anything); an empty value counts as none (not the current folder).
MADE_RUN_DIR = not os.environ.get("MB_TEST_RUN_DIR")
if MADE_RUN_DIR:
    os.environ["MB_TEST_RUN_DIR"] = tempfile.mkdtemp(prefix="mb_test_")
RUN_DIR = Path(os.environ["MB_TEST_RUN_DIR"])
(RUN_DIR / "xla").mkdir(parents=True, exist_ok=True)
os.environ["MB_ESTIMATION_CACHE_DIR"] = str(RUN_DIR / "xla")
configure_jax()


@pytest.fixture(scope="session")
def ros_network() -> None:
    """Skip unless this session runs in the loopback-only network namespace (rclpy tests)."""
    if NAMESPACE_ERROR is not None:
        pytest.skip(f"no loopback-only network namespace, so no rclpy: {NAMESPACE_ERROR}")


@pytest.fixture(scope="session")
def node_compile_cache(tmp_path_factory) -> str:
    """One compile cache for the node processes of the end-to-end tests.

    They estimate the same rig and free set, so the second node starts from the first one's
    compiled code.
    """
    return str(tmp_path_factory.mktemp("xla"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """Root of the repository (where package.xml lives)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """``../shared/data`` next to the repository (CI has it); skips the test when it is absent."""
    if not SHARED_DATA_DIR.is_dir():
        pytest.skip(f"shared data folder not found: {SHARED_DATA_DIR}")
    return SHARED_DATA_DIR


@pytest.fixture
def ament_prefix(tmp_path, monkeypatch):
    """The package in an ament index, as ``colcon build`` installs it (pip does not).

    ``share/ament_index/resource_index/packages/mb_estimation``, ``share/mb_estimation`` with
    the launch files and configs, and ``lib/mb_estimation/estimator_node`` and ``exciter_node``
    running this interpreter; prepended to ``AMENT_PREFIX_PATH`` (after it, the ROS wheels' own
    prefix).
    """
    prefix = tmp_path / "install"
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    (index / "mb_estimation").write_text("")
    share = prefix / "share" / "mb_estimation"
    (share / "launch").mkdir(parents=True)
    (share / "config" / "examples").mkdir(parents=True)
    for source in [REPO_ROOT / "package.xml", *(REPO_ROOT / "launch").glob("*.launch.py"),
                   *(REPO_ROOT / "config").glob("*.yaml"),
                   *(REPO_ROOT / "config" / "examples").glob("*.yaml")]:
        target = share / source.relative_to(REPO_ROOT)
        target.write_bytes(source.read_bytes())
    (prefix / "lib" / "mb_estimation").mkdir(parents=True)
    for name, module in (("estimator_node", "ros_node"), ("exciter_node", "ros_exciter")):
        executable = prefix / "lib" / "mb_estimation" / name
        executable.write_text(f"#!/bin/sh\nexec {sys.executable} -m mb_estimation.ros.{module} "
                              '"$@"\n')
        executable.chmod(0o755)
    paths = [str(prefix), sys.prefix, *filter(None, os.environ.get("AMENT_PREFIX_PATH",
                                                                   "").split(os.pathsep))]
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join(paths))
    return prefix


#: Test files that start rclpy: one work unit under ``pytest -n`` (below).
RCLPY_FILES = frozenset(path.name for path in Path(__file__).parent.glob("test_*.py")
                        if "ros_network" in path.read_text(encoding="utf-8"))

#: Test files that time callbacks in their own process against the wall clock (the node core's
#: callbacks while its worker is stuck): they join the rclpy unit, whose worker keeps the normal
#: priority. At the least priority a callback waited 65 ms for the processes of the rclpy tests.
CALLBACK_TIMING_FILES = frozenset({"test_node_core.py"})

#: The files of the unit handed out first, on a worker at the normal priority (below).
TIMED_FILES = RCLPY_FILES | CALLBACK_TIMING_FILES


#: Files of long, independent fits (no costly module fixture): each test is a unit of its own.
PER_TEST_FILES = frozenset({"test_calibrations.py", "test_shooting.py",
                            "test_reference_agreement.py"})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: a worker per usable core for the numerical tests, and one for the rclpy ones.

    The rclpy tests mostly wait on their node processes and the streams between them, in real
    time; the worker that runs them leaves its core to the others meanwhile.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``pytest -n`` (pytest-xdist): each file is a unit, and the rclpy files one unit.

    The rclpy tests share the loopback network (its ROS domains, node names, /diagnostics) and
    time their messages, so they run one after another on one worker, the first unit handed
    out (its processes come first on the CPU: below), with the files that time callbacks in
    process (:data:`CALLBACK_TIMING_FILES`); whole files keep a module's fixtures (a
    running node) and compiled programs on one worker. The files of :data:`PER_TEST_FILES` are
    split into their tests: xdist hands out the units with the most tests first, so these
    single tests come last and the workers end close together instead of one of them running
    a whole file of fits alone at the end.
    """
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndRclpy(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            name = Path(module).name
            if name in TIMED_FILES:
                return "rclpy"
            return nodeid if name in PER_TEST_FILES else module

        def _assign_work_unit(self, node) -> None:
            if "rclpy" in self.workqueue:
                self.workqueue.move_to_end("rclpy", last=False)
            super()._assign_work_unit(node)

    return FilesAndRclpy(config, log)


# --- under ``pytest -n``: the rclpy tests' processes first on the CPU ------------------------
# A 500 Hz bag replayed best effort to the node lost 4 % of its messages beside a worker that
# compiled. So every worker whose first test is not in :data:`TIMED_FILES` (all but the one
# that runs the rclpy unit, handed out first) lowers its own priority to the least: the node,
# player and listener processes of the rclpy tests, and the node core's timed callbacks, at
# the normal priority, take a core whenever they need one, and the numerical tests use what
# they leave.

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
LEAST_PRIORITY = 19  # nice value
_priority_chosen = False


def pytest_runtest_setup(item) -> None:
    """On a worker's first test: give way to the timed tests unless it is one of them."""
    global _priority_chosen
    if WORKER and not _priority_chosen:
        _priority_chosen = True
        if item.path.name not in TIMED_FILES:
            os.nice(LEAST_PRIORITY - os.nice(0))


def pytest_unconfigure(config) -> None:
    if MADE_RUN_DIR:  # the controller (or the only process): the workers inherit its path
        shutil.rmtree(RUN_DIR, ignore_errors=True)
