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
import time
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
# again, in either worker under ``pytest -n``; commands run in-process by the tests use it too.
# It also holds the flags below.
if "MB_TEST_RUN_DIR" not in os.environ:
    os.environ["MB_TEST_RUN_DIR"] = tempfile.mkdtemp(prefix="mb_test_")
    (Path(os.environ["MB_TEST_RUN_DIR"]) / "xla").mkdir()
RUN_DIR = Path(os.environ["MB_TEST_RUN_DIR"])
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


#: Files of long, independent fits (no costly module fixture): each test is a unit of its own.
PER_TEST_FILES = frozenset({"test_calibrations.py", "test_shooting.py",
                            "test_reference_agreement.py"})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``pytest -n`` (pytest-xdist): each file is a unit, and the rclpy files one unit.

    The rclpy tests share the loopback network (its ROS domains, node names, /diagnostics) and
    time their messages, so they run one after another on one worker; whole files keep a
    module's fixtures (a running node) and compiled programs on one worker. The files of
    :data:`PER_TEST_FILES` are split into their tests: xdist hands out the units with the most
    tests first, so these single tests come last and the two workers end close together
    instead of one of them running a whole file of fits alone at the end.
    """
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndRclpy(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            name = Path(module).name
            if name in RCLPY_FILES:
                return "rclpy"
            return nodeid if name in PER_TEST_FILES else module

    return FilesAndRclpy(config, log)


# --- under ``pytest -n``: tests that time message streams alone on the machine -------------
# A 500 Hz bag replayed best effort to the node lost 4 % of its messages beside a worker that
# compiled. So a module that times streams uses the fixture ``alone_on_the_machine``: its
# worker raises a "wanted" flag and waits until no other worker is inside a test, and the
# others, before each test, wait while the flag is up. Flags are files in the run's folder.

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WAIT_LIMIT_S = 900.0  # a worker that died inside a test must not hang the run
_WANTED = RUN_DIR / "alone_wanted"


def _busy_flags() -> list[Path]:
    return [path for path in RUN_DIR.glob("busy_*") if path.name != f"busy_{WORKER}"]


def _wait(condition) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)


def _holding_the_machine() -> bool:
    return _WANTED.exists() and _WANTED.read_text() == WORKER


def _release_the_machine() -> None:
    if WORKER and _holding_the_machine():
        _WANTED.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def compiled_beforehand() -> None:
    """What a module compiles before it takes the machine alone; a module overrides it.

    Compiling is not timed, so it runs beside the other workers
    (``processes.compile_node_programs``).
    """


@pytest.fixture(scope="module")
def alone_on_the_machine(ros_network, compiled_beforehand):
    """The module's tests run with the other workers paused (one process: nothing to do).

    Request it before the module's other fixtures (``pytest.mark.usefixtures``), so that a
    node they start runs alone too; ``compiled_beforehand`` runs first.
    """
    if WORKER:
        _WANTED.write_text(WORKER)
        _wait(lambda: not _busy_flags())
    yield
    _release_the_machine()


@pytest.fixture(autouse=True)
def _pause_while_a_module_runs_alone():
    """Before each test, wait while another worker holds the machine; mark this one busy."""
    if not WORKER or _holding_the_machine():
        yield
        return
    busy = RUN_DIR / f"busy_{WORKER}"
    while True:
        _wait(lambda: not _WANTED.exists())
        busy.touch()
        if not _WANTED.exists():
            break
        busy.unlink()  # a module asked for the machine meanwhile: let it go first
    try:
        yield
    finally:
        busy.unlink(missing_ok=True)


def pytest_sessionfinish(session) -> None:
    """A worker whose last module held the machine lets the others go on."""
    _release_the_machine()


def pytest_unconfigure(config) -> None:
    if not WORKER:  # the controller (or the only process) made the folder
        shutil.rmtree(RUN_DIR, ignore_errors=True)
