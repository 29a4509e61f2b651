"""The node's transport adapter, transport-neutral part: input handlers and the shadow fan-out.

The rclpy node (:mod:`mb_estimation.ros.ros_node`) hands the handlers below its messages;
they read only the fields (``header.stamp.sec``/``nanosec``, ``name``, ``position``, ``effort``,
``data``), so any message object with them will do. No transport is imported here.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

from mb_estimation.errors import first_line
from mb_estimation.message_types import JOINT_STATE
from mb_estimation.online.core import EstimatorCore
from mb_estimation.stamps import stamp_to_ns

#: Accepted windows whose shadow states may wait for the publisher thread; beyond, the oldest
#: waiting window's states are dropped (counted as ``shadow_windows_dropped``).
SHADOW_BACKLOG_WINDOWS = 2


def input_handlers(core: EstimatorCore) -> tuple[Callable[[Any, int | None], None],
                                                 Callable[[Any, int | None], None] | None]:
    """``(on_joint_state, on_voltage)``, each ``(message, source_ns)``, for the config's inputs.

    ``source_ns`` is the middleware's source timestamp of the message [ns] (None where the
    transport has none): voltages are paired with joint states by it
    (:meth:`EstimatorCore.on_voltage_message`). ``on_voltage`` is None where the rig has no
    input, the voltage is in the joint states' effort or the config scripts it
    (``recording.voltage_script``).
    """
    recording = core.config.recording
    from_effort = recording.voltage_type == JOINT_STATE

    def on_joint_state(msg, source_ns: int | None) -> None:
        core.on_joint_state(stamp_to_ns(msg.header.stamp), msg.name, msg.position, source_ns,
                            msg.effort if from_effort else None)

    def on_voltage(msg, source_ns: int | None) -> None:
        core.on_voltage_message(msg.data, source_ns)

    has_voltage_topic = (bool(core.config.rig_spec.inputs) and not from_effort
                         and recording.voltage_script is None)
    return on_joint_state, (on_voltage if has_voltage_topic else None)


class ShadowFanout:
    """Publishes each accepted window's shadow states from a thread of its own.

    The core's worker hands a window's states over (:meth:`__call__`, the core's
    ``shadow_joint_states`` output) and goes on: a slow or blocking publisher (a reliable
    writer waiting for a late reader) cannot stall the estimator. At most
    :data:`SHADOW_BACKLOG_WINDOWS` windows wait; when a newer one arrives the oldest is
    dropped and counted. ``publish_one(stamp_ns, names, angles, rates)`` publishes one state;
    ``on_error(text)`` hears its failures.
    """

    def __init__(self, publish_one: Callable[..., None], on_error: Callable[[str], None],
                 name: str = "mb_estimation-shadow") -> None:
        self._publish_one = publish_one
        self._on_error = on_error
        self._windows: collections.deque = collections.deque()
        self._wake = threading.Condition()
        self._closed = False
        self.dropped = 0  # windows dropped because the publisher fell behind
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def __call__(self, stamps, names, angles, rates) -> None:
        with self._wake:
            dropping = len(self._windows) >= SHADOW_BACKLOG_WINDOWS
            if dropping:
                self._windows.popleft()
                self.dropped += 1
            self._windows.append((stamps, names, angles, rates))
            self._wake.notify()
        if dropping:
            self._on_error("~/shadow_joint_states: a window's states dropped (the publisher "
                           "is behind)")

    def with_dropped(self, snapshot: dict) -> dict:
        """A diagnostics ``snapshot`` with ``shadow_windows_dropped`` added, once any were."""
        return {**snapshot, "shadow_windows_dropped": self.dropped} if self.dropped else snapshot

    def close(self, timeout: float = 5.0) -> None:
        """Publish what waits (within ``timeout``), then stop the thread."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._windows and not self._closed:
                    self._wake.wait()
                if not self._windows:
                    return
                stamps, names, angles, rates = self._windows.popleft()
            try:
                for k in range(len(stamps)):
                    self._publish_one(stamps[k], names, angles[k], rates[k])
            except Exception as error:  # a failed publish must not end the thread
                self._on_error(f"~/shadow_joint_states: {first_line(error)}")
