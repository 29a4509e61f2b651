"""The test run's own folder (``test/conftest.py``): made and removed by the run.

A folder named by ``$MB_TEST_RUN_DIR`` beforehand is used and kept; an empty value is none.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TEST_DIR = Path(__file__).resolve().parent


def _run_one_test(folder: Path, run_dir: str | None) -> Path:
    """A one-test pytest run in ``folder`` under this suite's conftest; returns its temp folder.

    ``$MB_TEST_RUN_DIR`` is ``run_dir`` (None: unset). The run's working folder holds a file
    of its own that must outlive it.
    """
    for name in ("conftest.py", "loopback_namespace.py"):
        shutil.copy(TEST_DIR / name, folder / name)
    (folder / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    (folder / "kept.txt").write_text("a file of the user's")
    temp = folder / "temp"
    temp.mkdir()
    env = {name: value for name, value in os.environ.items()
           if not name.startswith("PYTEST_XDIST")}  # a run of its own, not this worker
    env.pop("MB_TEST_RUN_DIR", None)
    env.update(TMPDIR=str(temp), **({} if run_dir is None else {"MB_TEST_RUN_DIR": run_dir}))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "--rootdir", str(folder), "test_nothing.py"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (folder / "kept.txt").read_text() == "a file of the user's"
    return temp


@pytest.mark.parametrize("run_dir", ["", None])
def test_a_run_makes_its_folder_and_removes_it_and_nothing_else(tmp_path, run_dir):
    temp = _run_one_test(tmp_path, run_dir)
    assert list(temp.iterdir()) == []  # the run's folder (made under TMPDIR) is gone


def test_a_folder_given_to_the_run_is_used_and_kept(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    _run_one_test(tmp_path, str(mine))
    assert (mine / "notes.txt").read_text() == "mine" and (mine / "xla").is_dir()
