"""Independent reduced-coordinate reference model of a Furuta pendulum.

This module is a *test oracle*: it shares no code with ``mb_estimation`` and
uses only numpy and scipy.  It describes the Furuta pendulum with the two
joint angles ``theta = (theta1, theta2)`` and derives the equations of motion
analytically from the Lagrangian.

Geometry (all vectors in the world frame, y up)
-----------------------------------------------
* Hinge 1 sits at the origin with axis world +y.  ``theta1`` rotates arm A
  about +y (right-hand rule).
* Arm frame at ``theta1 = 0``: ``x_A = e_x`` (along the arm), ``y_A = -e_z``,
  ``z_A = e_y`` (so ``J_Azz`` is the inertia about the motor axis);
  ``R_A(theta1) = Ry(theta1) @ R_A0``.
* A's centre of mass is at ``l1 * x_A``; hinge 2 is at ``lA * x_A`` with axis
  ``x_A``.  ``theta2`` rotates pendulum B relative to A about ``x_A``;
  ``theta2 = 0`` is hanging down, ``theta2 = pi`` is upright.
* Pendulum frame at ``theta1 = theta2 = 0``: ``x_B = -e_y`` (along the rod,
  from hinge 2 towards B's centre of mass), ``y_B = e_x`` (swing axis),
  ``z_B = e_z``;  ``R_B = R_A(theta1) @ Rx(theta2) @ C`` with
  ``C = R_A0.T @ R_B0``.  B's centre of mass is at ``lA * x_A + l2 * x_B``.
* Inertias are principal in the body frames and taken about each body's
  centre of mass.
* Gravity is ``R(tilt) @ (0, -g, 0)`` with the unit quaternion
  ``tilt = [w, x, y, z]`` and ``g = params["gravity"]`` (9.82 when absent).

Derivation (closed form)
------------------------
Expressed in A's frame, ``omega_A = dtheta1 z_A`` and
``omega_B = dtheta1 z_A + dtheta2 x_A``, with B-frame axes
``x_B = (0, s2, -c2)``, ``y_B = (1, 0, 0)``, ``z_B = (0, -c2, -s2)`` and
B's centre of mass at ``(lA, l2 s2, -l2 c2)`` (A coordinates).  The kinetic
energy ``T = 1/2 dtheta^T M(theta2) dtheta`` then has::

    M11 = J_shaft + J_Azz + m_A l1^2 + m_B lA^2
          + J_Bxx c2^2 + (m_B l2^2 + J_Bzz) s2^2
    M12 = m_B lA l2 c2
    M22 = J_Byy + m_B l2^2

M depends on ``theta2`` only, so Lagrange's equations
``d/dt(M dtheta) - 1/2 dtheta^T dM/dtheta dtheta = Q`` give the velocity
product terms::

    h1 = M11'(theta2) dtheta1 dtheta2 + M12'(theta2) dtheta2^2
    h2 = -1/2 M11'(theta2) dtheta1^2

with ``M11' = 2 s2 c2 (m_B l2^2 + J_Bzz - J_Bxx)``, ``M12' = -m_B lA l2 s2``.
The generalised gravity forces are ``Q_i = sum_b m_b (d p_b / d theta_i) . g``
with ``p_A = l1 (c1, 0, -s1)`` and
``p_B = lA (c1, 0, -s1) + l2 (-s1 s2, -c2, -c1 s2)``.  The motor adds
``K u(t)`` and viscous friction ``-b1 dtheta1`` to the first equation, and
``-b2 dtheta2`` to the second one.

Independently of this closed form, :func:`body_kinematics` builds the body
poses and velocities from rotation matrices; :func:`energy_reference` uses
it, so energy-conservation tests cross-check the closed-form dynamics.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy.integrate import solve_ivp

GRAVITY = 9.82
"""Gravity magnitude in m/s^2 (exact value used by the reference)."""

RTOL = 1e-11
ATOL = 1e-12

_R_A0 = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
"""Columns are x_A, y_A, z_A at theta1 = 0: (1,0,0), (0,0,-1), (0,1,0)."""

_R_B0 = np.array([[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
"""Columns are x_B, y_B, z_B at theta = 0: (0,-1,0), (1,0,0), (0,0,1)."""

_C = _R_A0.T @ _R_B0

_PARAM_NAMES = (
    "l1", "lA", "l2", "m_A", "m_B",
    "J_Axx", "J_Ayy", "J_Azz", "J_Bxx", "J_Byy", "J_Bzz",
    "J_shaft", "K", "b1", "b2",
)


def quat_to_matrix(q: Sequence[float]) -> np.ndarray:
    """Rotation matrix of the quaternion ``q = [w, x, y, z]`` (normalised first)."""
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def gravity_vector(params: dict) -> np.ndarray:
    """World gravity ``R(tilt) @ (0, -g, 0)``.

    ``g = params["gravity"]`` (9.82 if absent); identity tilt if absent.
    """
    tilt = params.get("tilt", (1.0, 0.0, 0.0, 0.0))
    return quat_to_matrix(tilt) @ np.array([0.0, -params.get("gravity", GRAVITY), 0.0])


def _rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _drot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[0.0, 0.0, 0.0], [0.0, -s, -c], [0.0, c, -s]])


def _drot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[-s, 0.0, c], [0.0, 0.0, 0.0], [-c, 0.0, -s]])


def _vee(S: np.ndarray) -> np.ndarray:
    """Vector of the skew-symmetric part of ``S``."""
    return 0.5 * np.array([S[2, 1] - S[1, 2], S[0, 2] - S[2, 0], S[1, 0] - S[0, 1]])


def body_kinematics(params: dict, theta, dtheta) -> dict:
    """Poses and velocities of bodies A and B built from rotation matrices.

    This deliberately does not use the closed-form mass matrix: rotations are
    composed as ``R_A = Ry(theta1) R_A0`` and ``R_B = R_A Rx(theta2) C``, their
    time derivatives follow from the exact derivatives of the elementary
    rotations, angular velocities are ``vee(dR R^T)`` and linear velocities
    are the time derivatives of ``p_A = R_A (l1 e1)`` and
    ``p_B = R_A (lA e1) + R_B (l2 e1)``.

    Returns a dict with keys ``R_A, R_B`` (3x3), ``omega_A, omega_B, p_A,
    p_B, v_A, v_B`` (3-vectors, world frame).
    """
    t1, t2 = float(theta[0]), float(theta[1])
    d1, d2 = float(dtheta[0]), float(dtheta[1])
    e1 = np.array([1.0, 0.0, 0.0])
    Ry, dRy = _rot_y(t1), _drot_y(t1)
    Rx, dRx = _rot_x(t2), _drot_x(t2)
    R_A = Ry @ _R_A0
    dR_A = d1 * dRy @ _R_A0
    R_B = R_A @ Rx @ _C
    dR_B = dR_A @ Rx @ _C + d2 * R_A @ dRx @ _C
    p_A = R_A @ (params["l1"] * e1)
    v_A = dR_A @ (params["l1"] * e1)
    p_B = R_A @ (params["lA"] * e1) + R_B @ (params["l2"] * e1)
    v_B = dR_A @ (params["lA"] * e1) + dR_B @ (params["l2"] * e1)
    return {
        "R_A": R_A, "R_B": R_B,
        "omega_A": _vee(dR_A @ R_A.T), "omega_B": _vee(dR_B @ R_B.T),
        "p_A": p_A, "p_B": p_B, "v_A": v_A, "v_B": v_B,
    }


def _inertia(params: dict, body: str) -> np.ndarray:
    return np.diag([params[f"J_{body}xx"], params[f"J_{body}yy"], params[f"J_{body}zz"]])


def kinetic_energy_reference(params: dict, theta, dtheta) -> float:
    """Kinetic energy (J) from :func:`body_kinematics`, plus the motor shaft."""
    k = body_kinematics(params, theta, dtheta)
    T = 0.5 * params["J_shaft"] * float(dtheta[0]) ** 2
    for b, m in (("A", params["m_A"]), ("B", params["m_B"])):
        R, w, v = k[f"R_{b}"], k[f"omega_{b}"], k[f"v_{b}"]
        I_world = R @ _inertia(params, b) @ R.T
        T += 0.5 * m * float(v @ v) + 0.5 * float(w @ I_world @ w)
    return T


def potential_energy_reference(params: dict, theta) -> float:
    """Gravitational potential energy (J), zero with both centres at the origin."""
    k = body_kinematics(params, theta, (0.0, 0.0))
    g = gravity_vector(params)
    return -float(params["m_A"] * g @ k["p_A"] + params["m_B"] * g @ k["p_B"])


def energy_reference(params: dict, theta, dtheta) -> float:
    """Total mechanical energy (kinetic + potential, J) of the state."""
    return kinetic_energy_reference(params, theta, dtheta) + potential_energy_reference(
        params, theta
    )


def angular_momentum_y(params: dict, theta, dtheta) -> float:
    """World-y angular momentum about the origin (kg m^2/s) from body velocities.

    Sums ``m p x v + R I R^T omega`` over both bodies and adds the motor shaft
    rotor ``J_shaft * dtheta1`` (the rotor spins about +y).
    """
    k = body_kinematics(params, theta, dtheta)
    L = np.array([0.0, params["J_shaft"] * float(dtheta[0]), 0.0])
    for b, m in (("A", params["m_A"]), ("B", params["m_B"])):
        R = k[f"R_{b}"]
        L = L + m * np.cross(k[f"p_{b}"], k[f"v_{b}"])
        L = L + R @ _inertia(params, b) @ R.T @ k[f"omega_{b}"]
    return float(L[1])


def _constants(params: dict) -> tuple:
    """Pack the parameters needed by the closed-form dynamics into floats."""
    p = {name: float(params[name]) for name in _PARAM_NAMES}
    g = gravity_vector(params)
    m_A, m_B, l1, lA, l2 = p["m_A"], p["m_B"], p["l1"], p["lA"], p["l2"]
    m11_const = p["J_shaft"] + p["J_Azz"] + m_A * l1 * l1 + m_B * lA * lA
    m11_c2 = p["J_Bxx"]
    m11_s2 = m_B * l2 * l2 + p["J_Bzz"]
    m12 = m_B * lA * l2
    m22 = p["J_Byy"] + m_B * l2 * l2
    arm_moment = m_A * l1 + m_B * lA
    rod_moment = m_B * l2
    return (
        m11_const, m11_c2, m11_s2, m12, m22, arm_moment, rod_moment,
        float(g[0]), float(g[1]), float(g[2]), p["K"], p["b1"], p["b2"],
    )


def mass_matrix(params: dict, theta) -> np.ndarray:
    """Closed-form 2x2 mass matrix ``M(theta)`` (J_shaft included in M[0,0])."""
    c = _constants(params)
    s2, c2 = math.sin(float(theta[1])), math.cos(float(theta[1]))
    m11 = c[0] + c[1] * c2 * c2 + c[2] * s2 * s2
    m12 = c[3] * c2
    return np.array([[m11, m12], [m12, c[4]]])


def _accel(c: tuple, t1: float, t2: float, d1: float, d2: float, u: float):
    """Joint accelerations from the closed-form equations (scalar, fast)."""
    (m11_const, m11_c2, m11_s2, m12c, m22, arm_moment, rod_moment,
     gx, gy, gz, K, b1, b2) = c
    s1, c1 = math.sin(t1), math.cos(t1)
    s2, c2 = math.sin(t2), math.cos(t2)
    m11 = m11_const + m11_c2 * c2 * c2 + m11_s2 * s2 * s2
    m12 = m12c * c2
    dm11 = 2.0 * s2 * c2 * (m11_s2 - m11_c2)
    dm12 = -m12c * s2
    h1 = dm11 * d1 * d2 + dm12 * d2 * d2
    h2 = -0.5 * dm11 * d1 * d1
    q1 = arm_moment * (-s1 * gx - c1 * gz) + rod_moment * s2 * (-c1 * gx + s1 * gz)
    q2 = rod_moment * (-c2 * s1 * gx + s2 * gy - c2 * c1 * gz)
    f1 = K * u - b1 * d1 + q1 - h1
    f2 = -b2 * d2 + q2 - h2
    det = m11 * m22 - m12 * m12
    return (m22 * f1 - m12 * f2) / det, (m11 * f2 - m12 * f1) / det


def accelerations(params: dict, theta, dtheta, u: float = 0.0) -> np.ndarray:
    """Joint accelerations ``ddtheta`` for the state and voltage ``u``."""
    c = _constants(params)
    return np.array(_accel(c, float(theta[0]), float(theta[1]),
                           float(dtheta[0]), float(dtheta[1]), float(u)))


def zoh_voltage(times, values) -> Callable[[float], float]:
    """Zero-order-hold function: ``values[k]`` on ``[times[k], times[k+1])``.

    Before ``times[0]`` the voltage is 0; after the last breakpoint it holds
    ``values[-1]``.
    """
    times = np.asarray(times, dtype=float)
    values = np.asarray(values, dtype=float)

    def u(t: float) -> float:
        k = int(np.searchsorted(times, t, side="right")) - 1
        return 0.0 if k < 0 else float(values[k])

    return u


def _rk4_segment(c, y, t0, t1, u, h_max):
    """Classical RK4 with equal steps (<= h_max) over [t0, t1], constant u."""
    n = max(1, math.ceil((t1 - t0) / h_max - 1e-9))
    h = (t1 - t0) / n
    a, b, da, db = y
    for _ in range(n):
        k1a, k1b = _accel(c, a, b, da, db, u)
        hh = 0.5 * h
        a2, b2, da2, db2 = a + hh * da, b + hh * db, da + hh * k1a, db + hh * k1b
        k2a, k2b = _accel(c, a2, b2, da2, db2, u)
        a3, b3, da3, db3 = a + hh * da2, b + hh * db2, da + hh * k2a, db + hh * k2b
        k3a, k3b = _accel(c, a3, b3, da3, db3, u)
        a4, b4, da4, db4 = a + h * da3, b + h * db3, da + h * k3a, db + h * k3b
        k4a, k4b = _accel(c, a4, b4, da4, db4, u)
        a += h / 6.0 * (da + 2.0 * da2 + 2.0 * da3 + da4)
        b += h / 6.0 * (db + 2.0 * db2 + 2.0 * db3 + db4)
        da += h / 6.0 * (k1a + 2.0 * k2a + 2.0 * k3a + k4a)
        db += h / 6.0 * (k1b + 2.0 * k2b + 2.0 * k3b + k4b)
    return (a, b, da, db)


def _dop853_segment(c, y, t0, t1, u, t_out=None):
    """DOP853 (rtol 1e-11, atol 1e-12) over [t0, t1] with constant u."""
    def rhs(_t, x):
        return (x[2], x[3], *_accel(c, x[0], x[1], x[2], x[3], u))

    sol = solve_ivp(rhs, (t0, t1), list(y), method="DOP853", rtol=RTOL, atol=ATOL,
                    t_eval=t_out)
    if not sol.success:  # pragma: no cover - diagnostic only
        raise RuntimeError(sol.message)
    return sol


def simulate_reference(params: dict, theta0, dtheta0, t_eval, voltage=lambda t: 0.0,
                       method: str | None = None, step: float = 1e-4) -> dict:
    """Simulate the Furuta pendulum from ``t_eval[0]`` and sample at ``t_eval``.

    Parameters
    ----------
    params:
        Floats ``l1 lA l2 m_A m_B J_Axx J_Ayy J_Azz J_Bxx J_Byy J_Bzz J_shaft
        K b1 b2`` and ``tilt`` (quaternion ``[w, x, y, z]``); other keys are
        ignored.
    theta0, dtheta0:
        Initial joint angles and rates at ``t_eval[0]``.
    t_eval:
        Increasing sample times; the initial state is at ``t_eval[0]``.
    voltage:
        Either a callable ``u(t)`` or a tuple ``(times, values)`` meaning a
        zero-order hold (see :func:`zoh_voltage`).  A callable should be
        smooth: it is integrated in one DOP853 pass with no special
        handling of discontinuities; pass steps as a hold tuple instead.
    method:
        Integrator.  Callable voltage: always ``"dop853"`` (one solve_ivp
        call, rtol 1e-11, atol 1e-12).  Zero-order hold: ``"rk4"`` (default,
        fixed-step classical RK4 with steps ``<= step`` that divide every
        interval between consecutive hold breakpoints / sample times) or
        ``"dop853"`` (solve_ivp restarted at every breakpoint; slower).
    step:
        Maximum RK4 step in seconds.

    Returns
    -------
    dict with ``time`` (n,), ``theta`` (n, 2) and ``dtheta`` (n, 2).
    """
    t_eval = np.asarray(t_eval, dtype=float)
    c = _constants(params)
    y0 = (float(theta0[0]), float(theta0[1]), float(dtheta0[0]), float(dtheta0[1]))
    t_start, t_end = float(t_eval[0]), float(t_eval[-1])

    if callable(voltage):
        def rhs(t, x):
            return (x[2], x[3], *_accel(c, x[0], x[1], x[2], x[3], float(voltage(t))))

        if t_end > t_start:
            sol = solve_ivp(rhs, (t_start, t_end), list(y0), method="DOP853",
                            rtol=RTOL, atol=ATOL, t_eval=t_eval)
            if not sol.success:  # pragma: no cover - diagnostic only
                raise RuntimeError(sol.message)
            Y = sol.y.T
        else:
            Y = np.tile(np.array(y0), (len(t_eval), 1))
    else:
        times, values = (np.asarray(v, dtype=float) for v in voltage)
        u_of = zoh_voltage(times, values)
        method = method or "rk4"
        inner = times[(times > t_start) & (times < t_end)]
        nodes = np.union1d(t_eval, inner)
        is_out = np.isin(nodes, t_eval)
        Y = np.empty((len(t_eval), 4))
        y = y0
        Y[0] = y
        j = 1
        for k in range(len(nodes) - 1):
            ta, tb = float(nodes[k]), float(nodes[k + 1])
            u = u_of(ta)
            if method == "rk4":
                y = _rk4_segment(c, y, ta, tb, u, step)
            elif method == "dop853":
                y = tuple(_dop853_segment(c, y, ta, tb, u).y[:, -1])
            else:
                raise ValueError(f"unknown method {method!r}")
            if is_out[k + 1]:
                Y[j] = y
                j += 1
        assert j == len(t_eval)
    return {"time": t_eval.copy(), "theta": Y[:, :2].copy(), "dtheta": Y[:, 2:].copy()}
