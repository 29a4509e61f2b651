"""Shared pytest fixtures."""

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"

# Commands run in-process by the tests keep no compiled code on disk (hermetic runs); compiled
# functions are still shared within the session.
os.environ["MB_ESTIMATION_CACHE_DIR"] = ""


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


@pytest.fixture()
def dds_loopback(monkeypatch):
    """DDS confined to 127.0.0.1 (CYCLONEDDS_URI from ``loopback_config``), no ROS_DOMAIN_ID.

    Cyclone DDS reads CYCLONEDDS_URI when a domain is created in the process (its first
    participant), so the tests using this fixture close their participants.
    """
    pytest.importorskip("cyclonedds")
    from mb_estimation.transport.dds_bus import loopback_config

    monkeypatch.setenv("CYCLONEDDS_URI", loopback_config())
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
