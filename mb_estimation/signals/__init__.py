"""Signals: recordings in model conventions and their preprocessing onto the estimation grid."""

from mb_estimation.signals.preprocess import GridData, Recording, prepare_recording

__all__ = ["GridData", "Recording", "prepare_recording"]
