"""Shared pytest fixtures; the whole session runs in a loopback-only network namespace.

The namespace is entered first thing, while pytest has a single thread (see
``loopback_namespace``): every rclpy participant the tests start, in process or as a
subprocess, can reach 127.0.0.1 only. Where it cannot be made, the tests that start rclpy
skip with the reason (``ros_network``).
"""

import os
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
