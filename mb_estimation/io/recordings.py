"""Recordings from rosbag2 bags, in model conventions (DESIGN §5).

This reads what ``mb-estimation simulate`` and a well-behaved driver write: joint states with
header stamps, the voltage as std_msgs/Float64 or Float64MultiArray (log time) or as a joint's
effort entry, joints mapped with offset and sign from the config.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mb_estimation.io.bags import BagError, read_float64, read_joint_states
from mb_estimation.io.config import Config
from mb_estimation.rigs.parameters import RIGS
from mb_estimation.signals import Recording

_NS = 1e-9


def read_recording(path: str | Path, config: Config) -> Recording:
    """The recording in bag ``path`` as the config's rig sees it.

    Times are seconds on the bag's clock. Raises :class:`BagError` naming what is missing.
    """
    settings = config.recording
    rig = RIGS[config.rig]
    states = read_joint_states(path, settings.joint_states_topic)
    names = states["names"]
    angles = []
    for joint in rig.joints:
        mapping = settings.joints[joint]
        if mapping.name not in names:
            raise BagError(f"{path}: joint {mapping.name!r} (the {joint}) is not in "
                           f"{settings.joint_states_topic}; it has {', '.join(names)}")
        angles.append(mapping.to_model(states["positions"][:, names.index(mapping.name)]))
    time_s = states["time_ns"] * _NS
    if not rig.inputs:
        return Recording(str(path), time_s, np.stack(angles, axis=1), np.zeros(0),
                         np.zeros((0, 0)))
    if settings.voltage_joint is not None:
        if states["efforts"] is None or settings.voltage_joint not in names:
            raise BagError(f"{path}: no effort of joint {settings.voltage_joint!r} to read the "
                           "voltage from")
        input_time_s = time_s
        voltage = states["efforts"][:, names.index(settings.voltage_joint)]
    else:
        voltage_ns, voltage = read_float64(path, settings.voltage_topic, settings.voltage_index)
        input_time_s = voltage_ns * _NS
    return Recording(str(path), time_s, np.stack(angles, axis=1), input_time_s,
                     np.asarray(voltage, float)[:, None])
