"""The configuration API under its old path.

Kept for scripts written against ``mb_estimation.io.config``; new code imports
:mod:`mb_estimation.config` (and :func:`mb_estimation.signals.recorded_joint_states`).
"""

import mb_estimation.config
from mb_estimation.config import *  # noqa: F403  (the package's public names, its __all__)
from mb_estimation.signals.joints import recorded_joint_states

__all__ = [*mb_estimation.config.__all__, "recorded_joint_states"]
