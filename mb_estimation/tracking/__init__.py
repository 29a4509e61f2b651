"""Wear over logs (``mb-estimation track``): the node's windows fitted offline, the drift over them.

:mod:`.windows` cuts, judges and tracks (pure: the caller passes the ``map`` that runs the
windows, local worker processes or a cluster); :mod:`.files` writes ``windows.csv`` and
``tracking.yaml``.
"""

from mb_estimation.tracking.files import write_tracking
from mb_estimation.tracking.windows import (
    TrackedWindow,
    Tracking,
    WindowToFit,
    bounded_map,
    cut_windows,
    judge_window,
    lost_window,
    track_windows,
)

__all__ = ["TrackedWindow", "Tracking", "WindowToFit", "bounded_map", "cut_windows",
           "judge_window", "lost_window", "track_windows", "write_tracking"]
