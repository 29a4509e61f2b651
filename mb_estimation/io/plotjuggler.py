"""PlotJuggler CSV exports of ROS 2 topics, read into the same arrays as bags.

PlotJuggler writes one row per received message: ``__time`` (receive time [s]) and one column per
message field, ``<topic>/<field path>``; a row fills only its own topic's columns. Joint states
appear per joint name: ``<topic>/header/stamp``, ``<topic>/<joint>/position`` (``velocity``,
``effort``); a Float64 as ``<topic>/data``, a Float64MultiArray as ``<topic>/data.<index>``.
Columns are picked by name (a topic's leading slash may be left out, as other loggers do); all
others are ignored.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from mb_estimation.io.bags import BagError, JointStates
from mb_estimation.stamps import NS_PER_S

RECEIVE_TIME_COLUMN = "__time"


def _topic_prefix(topic: str) -> str:
    return "/" + topic.strip("/")


def _float(cell: str) -> float:
    try:
        return float(cell) if cell.strip() else np.nan
    except ValueError:
        return np.nan


class PlotJugglerCsv:
    """The columns of one CSV export, parsed lazily by name."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise BagError(f"no recording at {self.path}: the file does not exist")
        try:
            with self.path.open(newline="", encoding="utf-8") as handle:
                rows = list(csv.reader(handle))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise BagError(f"{self.path} is not a readable CSV file ({exc})") from None
        names = [name.strip() for name in rows[0]] if rows else []
        if RECEIVE_TIME_COLUMN not in names:
            raise BagError(f"{self.path} is not a PlotJuggler CSV export: no "
                           f"{RECEIVE_TIME_COLUMN!r} column in its header line")
        self.header = [name if name in (RECEIVE_TIME_COLUMN, "") else _topic_prefix(name)
                       for name in names]  # an empty name (a trailing comma) names no topic
        self._rows = rows[1:]
        self._index = {name: k for k, name in enumerate(self.header)}

    def column(self, name: str) -> np.ndarray:
        """Values of column ``name`` (NaN where a row leaves it empty)."""
        k = self._index[name]
        return np.array([_float(row[k]) if k < len(row) else np.nan for row in self._rows])

    def topics(self, *named: str) -> list[str]:
        """Topic-like column prefixes (``/a/b/c`` → ``/a``), and each of ``named`` a column has.

        A column's path does not say where its topic ends: a topic in a namespace
        (``/rig/motor_cmd``) is found by its name.
        """
        names = {"/" + c.strip("/").split("/")[0] for c in self.header if c.startswith("/")}
        prefixes = (_topic_prefix(topic) for topic in named)
        names |= {prefix for prefix in prefixes
                  if any(c.startswith(prefix + "/") for c in self.header)}
        return sorted(names)

    def joint_states(self, topic: str) -> JointStates:
        """Joint states of ``topic``, as :func:`~mb_estimation.io.bags.read_joint_states` has them.

        ``time_ns`` is None when the export has no header stamp column.
        """
        prefix = _topic_prefix(topic)
        names = [c[len(prefix) + 1:-len("/position")] for c in self.header
                 if c.startswith(prefix + "/") and c.endswith("/position")]
        if not names:
            raise BagError(f"no joint states of topic {prefix!r} in {self.path} (no "
                           f"'{prefix}/<joint>/position' columns); its topics: "
                           f"{', '.join(self.topics()) or 'none'}")
        positions = np.stack([self.column(f"{prefix}/{n}/position") for n in names], axis=1)
        stamp_column = f"{prefix}/header/stamp"
        stamps = self.column(stamp_column) if stamp_column in self._index else None
        rows = ~np.all(np.isnan(positions), axis=1)
        if stamps is not None:
            rows |= ~np.isnan(stamps)
        efforts = velocities = None
        if all(f"{prefix}/{n}/effort" in self._index for n in names):
            efforts = np.stack([self.column(f"{prefix}/{n}/effort") for n in names], axis=1)[rows]
        if all(f"{prefix}/{n}/velocity" in self._index for n in names):
            velocities = np.stack([self.column(f"{prefix}/{n}/velocity") for n in names],
                                  axis=1)[rows]
        receive = self.column(RECEIVE_TIME_COLUMN)[rows]
        return JointStates(
            time_ns=None if stamps is None else np.round(stamps[rows] * NS_PER_S).astype(np.int64),
            receive_time_ns=np.round(receive * NS_PER_S).astype(np.int64),
            names=names,
            positions=positions[rows],
            velocities=velocities,
            efforts=efforts,
        )

    def float64(self, topic: str, index: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(receive_time_ns, values)`` of a Float64 or Float64MultiArray topic.

        A Float64 is the column ``<topic>/data``, a Float64MultiArray ``<topic>/data.<index>``;
        one entry per message.
        """
        prefix = _topic_prefix(topic)
        for name in (f"{prefix}/data", f"{prefix}/data.{index}"):
            if name in self._index:
                values = self.column(name)
                rows = ~np.isnan(values)
                # a message whose value is NaN still fills its row's other fields
                layout = [c for c in self.header if c.startswith(prefix + "/") and c != name]
                for other in layout:
                    rows |= ~np.isnan(self.column(other))
                receive = self.column(RECEIVE_TIME_COLUMN)[rows]
                return np.round(receive * NS_PER_S).astype(np.int64), values[rows]
        present = [c for c in self.header if c.startswith(prefix + "/")]
        if present:
            raise BagError(f"topic {prefix!r} in {self.path} has no column {prefix}/data or "
                           f"{prefix}/data.{index}; its columns: {', '.join(present)}")
        raise BagError(f"topic {prefix!r} not in {self.path}; its topics: "
                       f"{', '.join(self.topics()) or 'none'}")
