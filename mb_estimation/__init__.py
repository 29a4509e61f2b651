"""mb_estimation: joint state and parameter estimation for a Furuta pendulum rig.

Implements Marklund, Servin & Larson, "Joint parameter and state estimation for regularized
time-discrete multibody dynamics" (the paper in ``shared/reference``): a SPOOK time-stepper in
maximal coordinates, inverse-dynamics impulse residuals and a structured Levenberg–Marquardt.
"""

__version__ = "0.3.0"
