"""Self-checks of the independent Furuta-pendulum reference model.

The reference (``reference_furuta.py``) is used as an oracle for the
maximal-coordinate simulator, so it is validated here on its own: its
closed-form mass matrix / velocity terms / gravity against rotation-matrix
kinematics, conservation laws, the small-oscillation frequency, the motor
torque and the gravity tilt.  Parameters are those of Table G.5.
"""

import math
import time

import numpy as np
import pytest

try:  # works whether or not test/ is a package
    from . import reference_furuta as ref
except ImportError:  # pragma: no cover - depends on how pytest imports
    import reference_furuta as ref

G = 9.82

TABLE_G5 = {
    "l1": 0.128, "lA": 0.248, "l2": 0.92,
    "m_A": 0.238, "m_B": 0.428,
    "J_Axx": 1e-4, "J_Ayy": 0.003, "J_Azz": 0.003,
    "J_Bxx": 1e-4, "J_Byy": 0.004, "J_Bzz": 0.004,
    "J_shaft": 1e-4, "b1": 1e-3, "b2": 1e-4, "K": 0.1,
    "tilt": [1.0, 0.0, 0.0, 0.0],
}


def params(**overrides):
    """Table G.5 parameters with overrides."""
    p = dict(TABLE_G5)
    p.update(overrides)
    return p


def quat_x(angle):
    """Quaternion [w, x, y, z] of a rotation about world x."""
    return [math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0]


GENERIC_TILT = list(np.array([0.97, 0.12, -0.2, 0.09]) / np.linalg.norm([0.97, 0.12, -0.2, 0.09]))
STATES = [
    ((0.0, 0.0), (0.0, 0.0)),
    ((0.3, 2.0), (3.0, -1.5)),
    ((-1.2, math.pi - 0.03), (-0.7, 4.0)),
    ((2.5, -0.8), (10.0, 2.0)),
]


def along(fn, p, sol):
    """Evaluate ``fn(p, theta, dtheta)`` at every sample of a trajectory."""
    return np.array([fn(p, q, w) for q, w in zip(sol["theta"], sol["dtheta"], strict=True)])


def kinematic_mass_matrix(p, theta):
    """M(theta) by polarisation of the rotation-matrix kinetic energy."""
    T = ref.kinetic_energy_reference
    e = np.eye(2)
    M = np.empty((2, 2))
    for i in range(2):
        M[i, i] = 2.0 * T(p, theta, e[i])
    M[0, 1] = M[1, 0] = T(p, theta, e[0] + e[1]) - 0.5 * (M[0, 0] + M[1, 1])
    return M


def test_quaternion_gravity():
    """The tilt quaternion rotates nominal gravity as documented."""
    a = 0.2
    g = ref.gravity_vector(params(tilt=quat_x(a)))
    np.testing.assert_allclose(g, [0.0, -G * math.cos(a), -G * math.sin(a)], atol=1e-14)
    np.testing.assert_allclose(ref.gravity_vector(params()), [0.0, -G, 0.0], atol=0)


def test_frames_match_geometry_text():
    """Body frames and centres of mass follow the stated conventions."""
    p = params()
    k = ref.body_kinematics(p, (0.0, 0.0), (0.0, 0.0))
    np.testing.assert_allclose(k["R_A"], [[1, 0, 0], [0, 0, 1], [0, -1, 0]], atol=1e-15)
    np.testing.assert_allclose(k["R_B"], [[0, 1, 0], [-1, 0, 0], [0, 0, 1]], atol=1e-15)
    np.testing.assert_allclose(k["p_B"], [p["lA"], -p["l2"], 0.0], atol=1e-15)
    up = ref.body_kinematics(p, (0.0, math.pi), (0.0, 0.0))
    np.testing.assert_allclose(up["p_B"], [p["lA"], p["l2"], 0.0], atol=1e-15)
    # theta1 rotates the arm about +y: x -> -z for a quarter turn
    q = ref.body_kinematics(p, (math.pi / 2, 0.0), (1.0, 2.0))
    np.testing.assert_allclose(q["p_A"], [0.0, 0.0, -p["l1"]], atol=1e-15)
    np.testing.assert_allclose(q["omega_A"], [0.0, 1.0, 0.0], atol=1e-15)
    # B spins about +y with the arm and about x_A = (0, 0, -1) relative to it
    np.testing.assert_allclose(q["omega_B"], [0.0, 1.0, -2.0], atol=1e-15)


@pytest.mark.parametrize("theta, dtheta", STATES)
def test_closed_form_matches_rotation_kinematics(theta, dtheta):
    """Mass matrix, velocity terms and gravity agree with rotation matrices.

    M from the rotation-matrix kinetic energy; the velocity-product terms
    from Christoffel symbols of that M by central differences; the gravity
    forces from central differences of the potential.
    """
    p = params(tilt=GENERIC_TILT, b1=0.0, b2=0.0)
    M = ref.mass_matrix(p, theta)
    np.testing.assert_allclose(kinematic_mass_matrix(p, theta), M, rtol=1e-13, atol=1e-15)

    h = 1e-6
    dM = []
    grad_V = np.empty(2)
    for k in range(2):
        dq = np.zeros(2)
        dq[k] = h
        th = np.asarray(theta, dtype=float)
        dM.append((kinematic_mass_matrix(p, th + dq) - kinematic_mass_matrix(p, th - dq)) / (2 * h))
        grad_V[k] = (ref.potential_energy_reference(p, th + dq)
                     - ref.potential_energy_reference(p, th - dq)) / (2 * h)
    qd = np.asarray(dtheta, dtype=float)
    h_vel = np.array([
        sum((dM[k][i, j] - 0.5 * dM[i][j, k]) * qd[j] * qd[k] for j in range(2) for k in range(2))
        for i in range(2)
    ])
    expected = np.linalg.solve(M, -grad_V - h_vel)
    got = ref.accelerations(p, theta, dtheta, 0.0)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("theta0, dtheta0", [
    ((0.0, math.pi - 0.03), (0.0, 0.0)),
    ((0.3, 2.0), (3.0, -1.5)),
])
def test_energy_conserved_without_friction(theta0, dtheta0):
    """Energy is conserved to 1e-8 over 5 s with b1 = b2 = 0 and u = 0."""
    p = params(b1=0.0, b2=0.0)
    t = np.linspace(0.0, 5.0, 501)
    sol = ref.simulate_reference(p, theta0, dtheta0, t)
    E = along(ref.energy_reference, p, sol)
    assert abs(E[0]) > 0.1
    assert np.max(np.abs(E - E[0])) / abs(E[0]) < 1e-8
    # the motion is not trivial
    assert np.ptp(sol["theta"][:, 1]) > 0.5


def test_energy_decays_with_friction():
    """With viscous friction dE/dt = -b1 w1^2 - b2 w2^2 (checked by quadrature)."""
    p = params(b1=0.05, b2=0.02)
    t = np.linspace(0.0, 2.0, 4001)
    sol = ref.simulate_reference(p, (0.3, 2.0), (3.0, -1.5), t)
    E = along(ref.energy_reference, p, sol)
    w = sol["dtheta"]
    power = -p["b1"] * w[:, 0] ** 2 - p["b2"] * w[:, 1] ** 2
    # Simpson's rule on the uniform grid
    dissipated = (t[1] - t[0]) / 3 * (power[0] + power[-1] + 4 * power[1:-1:2].sum()
                                      + 2 * power[2:-1:2].sum())
    assert E[-1] < E[0]
    assert abs((E[-1] - E[0]) - dissipated) < 1e-8 * abs(dissipated) + 1e-10


def test_small_oscillation_frequency_with_locked_arm():
    """Huge J_shaft locks the arm; theta2 oscillates at sqrt(m g l2 / (J_Byy + m l2^2))."""
    p = params(J_shaft=1e6, b1=0.0, b2=0.0)
    omega = math.sqrt(p["m_B"] * G * p["l2"] / (p["J_Byy"] + p["m_B"] * p["l2"] ** 2))
    amp = 1e-3
    t = np.linspace(0.0, 10.0, 10001)
    sol = ref.simulate_reference(p, (0.0, amp), (0.0, 0.0), t)
    th1, th2 = sol["theta"][:, 0], sol["theta"][:, 1]
    assert np.max(np.abs(th1)) < 1e-8
    # zero crossings by linear interpolation (curvature vanishes there)
    idx = np.nonzero(np.sign(th2[:-1]) != np.sign(th2[1:]))[0]
    tz = t[idx] - th2[idx] * (t[idx + 1] - t[idx]) / (th2[idx + 1] - th2[idx])
    period = 2.0 * (tz[-1] - tz[0]) / (len(tz) - 1)
    assert len(tz) >= 8
    assert abs(2 * math.pi / period - omega) / omega < 1e-6
    np.testing.assert_allclose(th2, amp * np.cos(omega * t), rtol=0, atol=1e-5 * amp)


@pytest.mark.parametrize("tilt", [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
def test_angular_momentum_y_conserved(tilt):
    """L_y from the body velocities is constant when gravity is along y.

    Identity tilt or upside-down gravity, b1 = 0 and u = 0 (b2 is internal).
    """
    p = params(b1=0.0, b2=0.05, tilt=tilt)
    t = np.linspace(0.0, 3.0, 301)
    sol = ref.simulate_reference(p, (0.3, 2.0), (3.0, -1.5), t)
    L = along(ref.angular_momentum_y, p, sol)
    assert abs(L[0]) > 0.05
    assert np.max(np.abs(L - L[0])) < 1e-9 * abs(L[0])
    # but theta1-rate itself changes (the coupling is exercised)
    assert np.ptp(sol["dtheta"][:, 0]) > 0.5


@pytest.mark.parametrize("zoh", [False, True])
def test_constant_voltage_gives_motor_torque(zoh):
    """dL_y/dt = K u for constant u with b1 = 0 and J_shaft = 0."""
    p = params(b1=0.0, J_shaft=0.0)
    u = 2.5
    t = np.linspace(0.0, 2.0, 201)
    voltage = ((0.0,), (u,)) if zoh else (lambda _t: u)
    sol = ref.simulate_reference(p, (0.1, 0.4), (0.5, 0.0), t, voltage=voltage)
    L = along(ref.angular_momentum_y, p, sol)
    np.testing.assert_allclose(L - L[0], p["K"] * u * t, rtol=0, atol=1e-10)


def test_tilt_shifts_hanging_equilibrium():
    """Gravity tilted by alpha about x moves the hanging equilibrium to theta2 = alpha.

    Quasi-statically, with the arm at theta1 = 0 the swing plane is the world
    y-z plane and gravity is (0, -g cos a, -g sin a); the rod
    x_B = (0, -cos th2, -sin th2) aligns with it at th2 = +alpha.  The arm
    itself feels the torque g sin(a) (m_A l1 + m_B lA) about +y, which turns
    it towards -z (where gravity now points): theta1 accelerates positively.
    """
    alpha = 0.02
    # 1) locked arm, strongly damped pendulum settles at theta2 = alpha
    p = params(tilt=quat_x(alpha), J_shaft=1e6, b2=1.0)
    t = np.linspace(0.0, 20.0, 21)
    sol = ref.simulate_reference(p, (0.0, 0.0), (0.0, 0.0), t)
    assert abs(sol["theta"][-1, 1] - alpha) < 1e-7
    assert abs(sol["theta"][-1, 0]) < 1e-5
    # opposite tilt, opposite shift
    p_neg = params(tilt=quat_x(-alpha), J_shaft=1e6, b2=1.0)
    sol = ref.simulate_reference(p_neg, (0.0, 0.0), (0.0, 0.0), t)
    assert abs(sol["theta"][-1, 1] + alpha) < 1e-7

    # 2) free arm at (0, alpha) at rest: only the arm torque acts
    p = params(tilt=quat_x(alpha))
    tau = G * math.sin(alpha) * (p["m_A"] * p["l1"] + p["m_B"] * p["lA"])
    acc = ref.accelerations(p, (0.0, alpha), (0.0, 0.0), 0.0)
    M = ref.mass_matrix(p, (0.0, alpha))
    np.testing.assert_allclose(M @ acc, [tau, 0.0], rtol=1e-12, atol=1e-15)
    assert acc[0] > 0


def test_zoh_rk4_matches_dop853():
    """Fixed-step RK4 (h = 1e-4) is fast and agrees with restarted DOP853.

    1 kHz random hold over 3 s; DOP853 (rtol 1e-11) restarts at every breakpoint.
    """
    rng = np.random.default_rng(0)
    p = params()
    hold_t = np.arange(0.0, 3.0, 1e-3)
    hold_u = rng.uniform(-5.0, 5.0, size=hold_t.size)
    t = np.linspace(0.0, 3.0, 301)
    x0 = ((0.3, math.pi - 0.2), (2.0, -1.0))
    start = time.perf_counter()
    a = ref.simulate_reference(p, *x0, t, (hold_t, hold_u))
    assert time.perf_counter() - start < 3.0
    b = ref.simulate_reference(p, *x0, t, (hold_t, hold_u), method="dop853")
    np.testing.assert_allclose(a["theta"], b["theta"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(a["dtheta"], b["dtheta"], rtol=0, atol=1e-8)
    assert np.ptp(a["dtheta"][:, 0]) > 1.0
    # halving the step barely changes the result (RK4 has converged)
    c = ref.simulate_reference(p, *x0, t, (hold_t, hold_u), step=5e-5)
    np.testing.assert_allclose(a["theta"], c["theta"], rtol=0, atol=1e-9)


def test_zoh_convention_matches_stitched_callable():
    """values[k] holds on [times[k], times[k+1]); zero before times[0].

    Breakpoints off the sample grid are honoured: the result equals DOP853
    runs with constant callable voltages stitched at the switching times.
    """
    p = params()
    hold = ((0.1, 0.4537), (2.0, -3.0))
    t = np.linspace(0.0, 1.0, 11)
    x0 = ((0.0, 0.1), (0.0, 0.0))
    a = ref.simulate_reference(p, *x0, t, hold)
    theta, dtheta = x0
    for ta, tb, u in ((0.0, 0.1, 0.0), (0.1, 0.4537, 2.0), (0.4537, 1.0, -3.0)):
        seg = ref.simulate_reference(p, theta, dtheta, [ta, tb], voltage=lambda _t, u=u: u)
        theta, dtheta = seg["theta"][-1], seg["dtheta"][-1]
    np.testing.assert_allclose(a["theta"][-1], theta, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a["dtheta"][-1], dtheta, rtol=0, atol=1e-9)
    assert ref.zoh_voltage(*hold)(0.05) == 0.0
    assert ref.zoh_voltage(*hold)(0.1) == 2.0
    assert ref.zoh_voltage(*hold)(5.0) == -3.0


def test_compliant_reference_follows_the_rigid_one_before_the_spin():
    """``reference_compliant_furuta`` with Table G.5's stiff hinges matches the rigid oracle.

    Released from upright, over the first 0.5 s (before the first spin transient) the hinges'
    compliance and damping change the angles by far less than the motion itself.
    """
    try:
        from . import reference_compliant_furuta as compliant
    except ImportError:  # pragma: no cover - depends on how pytest imports
        import reference_compliant_furuta as compliant
    p = params(eps_lin1=1e-6, eps_rot1=1e-6, eps_lin2=1e-6, eps_rot2=1e-6, tau1=0.02,
               tau2=0.02)
    time_s = np.linspace(0.0, 0.5, 51)
    theta0 = (0.0, math.pi - 0.03)
    soft = compliant.simulate_compliant(p, theta0, time_s, rtol=1e-8, atol=1e-10)["theta"]
    rigid = ref.simulate_reference(p, theta0, (0.0, 0.0), time_s)["theta"]
    assert np.ptp(rigid[:, 1]) > 0.05  # it moved
    assert np.max(np.abs(soft - rigid)) < 1e-4
