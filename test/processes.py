"""Background processes for the end-to-end tests: output collected line by line."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def mb_estimation(*args: str) -> list[str]:
    """The argv of ``mb-estimation ARGS`` run by this interpreter."""
    return [sys.executable, "-m", "mb_estimation.cli", *args]


def compile_node_programs(cache_dir: str, *node_args: str) -> None:
    """``mb-estimation node NODE_ARGS --compile-only`` into ``cache_dir``.

    A node started afterwards with that cache loads its solver instead of compiling it: run it
    before a test that times the node's messages.
    """
    done = subprocess.run([*mb_estimation("node", *node_args, "--compile-only")],
                          env=dict(os.environ, MB_ESTIMATION_CACHE_DIR=cache_dir),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "compiled the solver" in done.stdout, done.stderr


def wait_until(predicate, timeout: float, period: float = 0.1) -> bool:
    """Poll ``predicate`` until it is true (True) or ``timeout`` [s] has passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period)
    return bool(predicate())


class Process:
    """``argv`` in the background (cwd: the repository), stdout and stderr kept as lines."""

    def __init__(self, argv, env):
        self.lines = []
        self.process = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip())

    def tail(self, count: int = 30) -> str:
        return "\n".join(self.lines[-count:])

    def wait_for(self, text, timeout):
        """Wait until a line contains ``text``; AssertionError with the output if it does not."""
        if not wait_until(lambda: any(text in line for line in self.lines)
                          or self.process.poll() is not None, timeout):
            raise AssertionError(f"no {text!r} after {timeout:g} s:\n{self.tail()}")
        time.sleep(0.2)  # the reader may still be behind a process that just exited
        if not any(text in line for line in self.lines):
            raise AssertionError(f"no {text!r}; the process exited with "
                                 f"{self.process.returncode}:\n{self.tail()}")

    def stop(self, signal_first=None):
        """Terminate (or send ``signal_first``), wait up to 30 s, kill; the exit status."""
        if self.process.poll() is None:
            if signal_first is None:
                self.process.terminate()
            else:
                self.process.send_signal(signal_first)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(5)
        return self.process.returncode


#: Runs a launch file under the real launch system: ``python -c LAUNCH_SCRIPT FILE name:=value``.
LAUNCH_SCRIPT = """
import sys
from launch import LaunchService
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

service = LaunchService()
service.include_launch_description(IncludeLaunchDescription(
    PythonLaunchDescriptionSource(sys.argv[1]),
    launch_arguments=[argument.split(":=", 1) for argument in sys.argv[2:]]))
sys.exit(service.run())
"""
