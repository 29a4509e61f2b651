"""Does the rigid pendulum explain the peer rig's pendulum? A check independent of the estimator.

    python benchmarks/studies/bench_peer_pendulum.py [--free J,b|J,b,Jz|J,b,mu] [--segment-s 1]

The pendulum's own equation (the reduced-coordinate Lagrangian of test/reference_furuta.py)
driven by the *measured* arm angle (a cubic spline of the 30 Hz low-passed angle, for its
rate and acceleration), with the published masses and lengths of
config/examples/odrive_furuta.yaml: each recording cut into segments of ``--segment-s``,
each segment integrated (scipy DOP853) from the measured pendulum state and compared with the
measured pendulum angle; J_Byy and b2 (and ``Jz``: J_Bzz, ``mu``: a smoothed Coulomb torque)
fitted by scipy's least squares. Prints per recording the RMS angle error and the fitted
values ± their linearised std. If the model were right, J_Byy would agree across recordings.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy import integrate, interpolate, optimize, signal

from mb_estimation.config import load_config
from mb_estimation.io.recordings import read_recording

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "examples" / "odrive_furuta.yaml"
FILES = ("2V", "3V", "4V", "5V", "6V")
RATE_HZ = 500.0
START = {"J": 1.5e-5, "b": 1e-5, "Jz": 1.479e-5, "mu": 0.0}


def fit_pendulum(path: Path, config, free: tuple[str, ...], segment_s: float):
    """RMS error [rad] and ``{name: (value, std)}`` of the pendulum-only fit on one file."""
    p = config.parameters
    m, l2, la, g, jbx = (float(p[n]) for n in ("m_B", "l2", "lA", "gravity", "J_Bxx"))
    recording = read_recording(path, config)
    keep = recording.time_s >= recording.input_time_s[0]
    t, angles = recording.time_s[keep], recording.joint_angles[keep]
    uniform = np.arange(t[0], t[-1], 1.0 / RATE_HZ)
    arm = np.interp(uniform, t, angles[:, 0])
    pendulum = np.interp(uniform, t, angles[:, 1])
    sos = signal.butter(2, 30.0, fs=RATE_HZ, output="sos")
    spline = interpolate.CubicSpline(uniform, signal.sosfiltfilt(sos, arm))
    rate, acceleration = spline.derivative(1), spline.derivative(2)
    smooth = signal.sosfiltfilt(sos, pendulum)
    pendulum_rate = np.gradient(smooth, uniform)
    length = int(segment_s * RATE_HZ)
    starts = range(0, len(uniform) - length, length // 2)

    def errors(x):
        jyy, b2, jzz, mu = x
        inertia, coefficient = jyy + m * l2**2, m * l2**2 + jzz - jbx
        out = []
        for s in starts:
            window = uniform[s:s + length]

            def rhs(time, y):
                s2, c2 = np.sin(y[0]), np.cos(y[0])
                torque = (-m * la * l2 * c2 * acceleration(time)
                          + s2 * c2 * coefficient * rate(time) ** 2 - m * g * l2 * s2
                          - b2 * y[1] - mu * np.tanh(y[1] / 0.05))
                return [y[1], torque / inertia]

            run = integrate.solve_ivp(rhs, (window[0], window[-1]), [smooth[s], pendulum_rate[s]],
                                      t_eval=window, rtol=1e-8, atol=1e-10, method="DOP853")
            out.append(run.y[0] - pendulum[s:s + length])
        return np.concatenate(out)

    names = ("J", "b", "Jz", "mu")
    x0 = np.array([START[n] for n in names])
    index = [names.index(n) for n in free]

    def residual(z):
        x = x0.copy()
        x[index] = z
        return errors(x)

    solution = optimize.least_squares(residual, x0[index], x_scale=np.abs(x0[index]) + 1e-6,
                                      diff_step=1e-4)
    jacobian = solution.jac
    covariance = np.linalg.inv(jacobian.T @ jacobian) * np.mean(solution.fun**2)
    std = np.sqrt(np.diag(covariance))
    rms = float(np.sqrt(np.mean(solution.fun**2)))
    return rms, {n: (float(v), float(s)) for n, v, s in zip(free, solution.x, std, strict=True)}


def main() -> None:
    """Each recording: the fit's RMS error and values, as a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=REPO.parent / "shared" / "data" /
                        "peer-furuta-hardware", type=Path)
    parser.add_argument("--free", default="J,b", help="of J (J_Byy), b (b2), Jz (J_Bzz), mu")
    parser.add_argument("--segment-s", type=float, default=1.0)
    args = parser.parse_args()
    free = tuple(args.free.split(","))
    config = load_config(CONFIG)
    print("| recording | RMS [rad] | " + " | ".join(free) + " |")
    print("|---|---|" + "---|" * len(free))
    for name in FILES:
        rms, values = fit_pendulum(args.data / f"hardware_step_response_{name}.csv", config,
                                   free, args.segment_s)
        print(f"| {name} | {rms:.3g} | " + " | ".join(f"{v:.3g} ± {s:.2g}"
                                                       for v, s in values.values()) + " |",
              flush=True)


if __name__ == "__main__":
    main()
