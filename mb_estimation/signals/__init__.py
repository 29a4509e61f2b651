"""Signals: recordings in model conventions, their preprocessing, the joint mapping maths."""

from mb_estimation.signals.joints import recorded_joint_states
from mb_estimation.signals.preprocess import GridData, Recording, prepare_recording

__all__ = ["GridData", "Recording", "prepare_recording", "recorded_joint_states"]
