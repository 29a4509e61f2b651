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
