"""Shared pytest fixtures; the whole session runs in a loopback-only network namespace.

The namespace is entered first thing, while pytest has a single thread (see
``loopback_namespace``): every rclpy participant the tests start, in process or as a
subprocess, can reach 127.0.0.1 only. Where it cannot be made, the tests that start rclpy
skip with the reason (``ros_network``).
"""

import os
import shutil
import tempfile
import time
from pathlib import Path

import loopback_namespace  # pytest puts test/ on sys.path before importing this file

NAMESPACE_ERROR = loopback_namespace.enter()

import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"

# Commands run in-process by the tests keep no compiled code on disk (hermetic runs); compiled
# functions are still shared within the session.
os.environ["MB_ESTIMATION_CACHE_DIR"] = ""


@pytest.fixture(scope="session")
def ros_network() -> None:
    """Skip unless this session runs in the loopback-only network namespace (rclpy tests).

    Under ``pytest -n`` it also takes the machine for the rclpy unit (end of this file).
    """
    if NAMESPACE_ERROR is not None:
        pytest.skip(f"no loopback-only network namespace, so no rclpy: {NAMESPACE_ERROR}")
    _take_the_machine()


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


#: Test files that start rclpy: one work unit under ``pytest -n`` (below).
RCLPY_FILES = frozenset(path.name for path in Path(__file__).parent.glob("test_*.py")
                        if "ros_network" in path.read_text(encoding="utf-8"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``pytest -n`` (pytest-xdist): each file is a unit, and the rclpy files one unit.

    The rclpy tests share the loopback network (its ROS domains, node names, /diagnostics) and
    time their messages, so they run one after another on one worker; whole files keep a
    module's fixtures (a running node) and compiled programs on one worker.
    """
    from xdist.scheduler import LoadScopeScheduling

    class FilesAndRclpy(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "rclpy" if Path(module).name in RCLPY_FILES else module

    return FilesAndRclpy(config, log)


# --- under ``pytest -n``: the rclpy tests alone on the machine ------------------------------
# They time real message streams (a 500 Hz bag, best effort), and a worker compiling beside
# them starved the node enough to lose 4 % of a stream. So while the rclpy unit runs, the other
# workers pause between their tests: its worker raises a "wanted" flag and waits until no other
# worker is inside a test; the others, before each test, wait while the flag is up. Flags are
# files in a folder the controller makes before the workers start (they inherit its path).

if "MB_TEST_LOCK_DIR" not in os.environ:
    os.environ["MB_TEST_LOCK_DIR"] = tempfile.mkdtemp(prefix="mb_test_")
LOCK_DIR = Path(os.environ["MB_TEST_LOCK_DIR"])
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
WAIT_LIMIT_S = 900.0  # a worker that died inside a test must not hang the run
_WANTED = LOCK_DIR / "rclpy_wanted"


def _busy_flags() -> list[Path]:
    return [path for path in LOCK_DIR.glob("busy_*") if path.name != f"busy_{WORKER}"]


def _wait(condition) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)


def _take_the_machine() -> None:
    """Raise the flag and wait until the other workers are out of their tests."""
    if WORKER and not (_WANTED.exists() and _WANTED.read_text() == WORKER):
        _WANTED.write_text(WORKER)
        _wait(lambda: not _busy_flags())


@pytest.fixture(autouse=True)
def _rclpy_alone(request):
    """Pause this worker while another runs rclpy tests; run rclpy tests with the rest paused.

    (The rclpy fixtures also take the machine through ``ros_network``, which they set up before
    any test-level fixture, a running node included.)
    """
    if not WORKER:  # one process: nothing runs beside
        yield
        return
    if Path(str(request.node.path)).name in RCLPY_FILES:
        _take_the_machine()
        yield
        return
    if _WANTED.exists() and _WANTED.read_text() == WORKER:
        _WANTED.unlink()  # this worker's rclpy unit is done
    busy = LOCK_DIR / f"busy_{WORKER}"
    while True:
        _wait(lambda: not _WANTED.exists())
        busy.touch()
        if not _WANTED.exists():
            break
        busy.unlink()  # the rclpy unit asked meanwhile: let it go first
    try:
        yield
    finally:
        busy.unlink(missing_ok=True)


def pytest_sessionfinish(session) -> None:
    """A worker whose last tests were the rclpy unit lets the others go on."""
    if WORKER and _WANTED.exists() and _WANTED.read_text() == WORKER:
        _WANTED.unlink(missing_ok=True)


def pytest_unconfigure(config) -> None:
    if not WORKER:  # the controller (or the only process) made the folder
        shutil.rmtree(LOCK_DIR, ignore_errors=True)
