"""The fade in and out of an input played on a rig: a raised cosine at its ends.

Pure numpy (no JAX), so that the exciter node and the experiment design share it. The design
multiplies its input by :func:`fade`; the exciter holds whatever it plays within ``max_input``
times the same fade, so a designed input plays unchanged (its magnitude never exceeds the
rising bound) and any other file starts and ends without a step on the motor.
"""

from __future__ import annotations

import numpy as np

#: The fade in and out of a played input [s] (the exciter's default, and excite's design).
RAMP_S = 0.5


def fade(count: int, rate_hz: float, ramp_s: float = RAMP_S) -> np.ndarray:
    """Per sample ``[count]``: 0 → 1 over the first ``ramp_s`` [s] (raised cosine), 1, back to 0.

    The ramps take ``round(ramp_s · rate_hz)`` samples each, at most half the samples.
    """
    ramp = min(int(round(ramp_s * rate_hz)), count // 2)
    envelope = np.ones(count)
    if ramp:
        rise = 0.5 - 0.5 * np.cos(np.pi * (np.arange(ramp) + 0.5) / ramp)
        envelope[:ramp], envelope[count - ramp:] = rise, rise[::-1]
    return envelope
