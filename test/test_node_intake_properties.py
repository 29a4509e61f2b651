"""The node's intake and windowing over arbitrary message streams (property-based).

Whatever a driver or a damaged bag sends — names, position counts, values and stamps drawn
freely — no callback raises, every buffer and every window stays within the size its config
gives, the preprocessing of a window allocates for the window's span only, nothing
non-finite is published, and every joint state is used or counted under the name of its fault.

The mechanism this guards against: a window's neighbour samples outside its span were kept
however far away they were stamped, so a lone stamp of zero or 1e6 s ahead made a window
spanning 1e6-1.7e9 s of a few samples, whose low-pass resampled that span at the sample period
(1e9 points and more: the node's memory grew without bound).
"""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mb_estimation.config import load_config
from mb_estimation.errors import RecordingError
from mb_estimation.message_types import FLOAT64_MULTI_ARRAY, JOINT_STATE
from mb_estimation.online.core import EstimatorCore, NodeOutputs, with_node
from mb_estimation.online.intake import (
    FAR_VOLTAGES,
    REJECTED_SAMPLES,
    STAMP_CONFIRMATIONS,
    WINDOW_MARGIN_FRACTION,
)
from mb_estimation.signals.preprocess import prepare_recording

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
NAMES = ("arm", "pendulum")
WINDOW_S = 0.05  # short windows, so that a short stream cuts many
INT32_NS = 2**31 * NS

finite_or_not = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 0.1, -2.0, 1e300, -1e300, 1e308, math.nan, math.inf, -math.inf]))
names = st.one_of(
    st.just(NAMES), st.just(NAMES[::-1]), st.just(()), st.just(("joint0", "joint1")),
    st.lists(st.sampled_from(["arm", "pendulum", "x", ""]), max_size=4).map(tuple))
# The next stamp relative to the newest one sent: on the stream, late, far back or ahead, or any
# stamp a message can hold (zero and negative included).
stamp_steps = st.one_of(
    st.integers(1, 2_000_000), st.integers(1, 2_000_000), st.integers(1, 2_000_000),
    st.integers(-2 * NS, 0), st.sampled_from([-5 * NS, 10**6 * NS, 3 * NS]),
    st.integers(-INT32_NS, INT32_NS))
joint_state = st.tuples(st.just("joint"), stamp_steps, names,
                        st.lists(finite_or_not, max_size=4),
                        st.lists(finite_or_not, max_size=3))
# A rig's sample: on time, the config's names, finite positions (most of a stream is these, so
# that windows are cut between the faults).
rig_sample = st.tuples(st.just("joint"), st.integers(100_000, 2_000_000), st.just(NAMES),
                       st.lists(st.floats(-10.0, 10.0), min_size=2, max_size=2),
                       st.just([0.5, 0.0]))
voltage = st.tuples(st.just("voltage"), stamp_steps, finite_or_not)
voltage_message = st.tuples(st.just("message"), st.lists(finite_or_not, max_size=3))
control = st.sampled_from([("reset",), ("calibrate_now",)])
events = st.lists(st.one_of(*[rig_sample] * 8, joint_state, joint_state, voltage,
                            voltage_message, control), max_size=400)
voltage_types = st.sampled_from(["std_msgs/msg/Float64", FLOAT64_MULTI_ARRAY, JOINT_STATE])


class Published:
    """NodeOutputs that check what the core hands them: finite, the joints' names."""

    def __init__(self):
        self.filtered = 0
        self.outputs = NodeOutputs(filtered_joint_states=self._filtered)

    def _filtered(self, stamp_ns, names, angles, rates):
        assert tuple(names) == NAMES
        assert np.all(np.isfinite(angles)) and np.all(np.isfinite(rates))
        self.filtered += 1


def _core(voltage_type: str) -> tuple[EstimatorCore, Published]:
    config = with_node(load_config("furuta_synthetic"), warm_up=False, window_s=WINDOW_S,
                       stride_s=WINDOW_S, buffer_s=0.2, max_rate_hz=1000.0, pending_windows=3)
    config = dataclasses.replace(config, recording=dataclasses.replace(
        config.recording, voltage_type=voltage_type, voltage_index=1, voltage_joint="arm"),
        method=dataclasses.replace(config.method, step_s=1e-3))
    published = Published()
    return EstimatorCore(config, published.outputs), published


def _check_bounded(core: EstimatorCore) -> None:
    settings = core.settings
    capacity = core.intake.joints.capacity
    assert len(core.intake.joints) <= capacity and len(core.intake.voltage) <= capacity
    assert len(core.worker.pending) <= settings.pending_windows
    assert len(core.intake.far_voltages) <= FAR_VOLTAGES
    assert len(core.intake.unconfirmed) < STAMP_CONFIRMATIONS
    span_s = settings.window_s * (1 + 2 * WINDOW_MARGIN_FRACTION) + 1e-9
    for window in core.worker.pending:
        recording = window.recording
        assert len(recording.time_s) <= capacity
        if len(recording.time_s):
            assert np.ptp(recording.time_s) <= span_s, (
                f"window {window.index} holds {np.ptp(recording.time_s):.6g} s of stamps, "
                f"its span is {settings.window_s:g} s")
        assert np.all(np.isfinite(recording.joint_angles))
        assert np.all(np.isfinite(recording.inputs))
        assert np.all(np.abs(recording.input_time_s) <= span_s)


def _check_preprocessing_is_sized_by_the_window(core: EstimatorCore) -> None:
    """What the worker does first with a window allocates for its span, never for a stamp."""
    for window in core.worker.pending:
        recording = window.recording
        if len(recording.time_s) < 3 or len(recording.input_time_s) == 0:
            continue
        try:
            grid = prepare_recording(recording, 1e-3, 10.0, start_s=-recording.time_s[0],
                                     end_s=WINDOW_S - recording.time_s[0])
        except (RecordingError, ValueError):
            continue
        assert grid.num_steps <= WINDOW_S / 1e-3 + 1


def _run(core: EstimatorCore, stream) -> None:
    stamp = T0
    for event in stream:
        kind = event[0]
        if kind in ("joint", "voltage"):
            stamp = stamp + event[1] if abs(stamp + event[1]) < INT32_NS else T0
        if kind == "joint":
            _, _, joint_names, positions, efforts = event
            core.on_joint_state(stamp, joint_names, positions, None, efforts)
        elif kind == "voltage":
            core.on_voltage(stamp, event[2])
        elif kind == "message":
            data = event[1]
            core.on_voltage_message(data if core.config.recording.voltage_type ==
                                    FLOAT64_MULTI_ARRAY else (data[0] if data else 1.0))
        elif kind == "reset":
            core.reset()
        else:
            core.calibrate_now()
        _check_bounded(core)
    _check_preprocessing_is_sized_by_the_window(core)


def _check_every_sample_accounted_for(core: EstimatorCore) -> None:
    counters = core.diagnostics()
    rejected = sum(counters.get(kind, 0) for kind in REJECTED_SAMPLES
                   if kind.startswith("samples_"))
    assert counters.get("joint_samples", 0) == (
        counters.get("samples_used", 0) + rejected + len(core.intake.unconfirmed)), counters


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=events, voltage_type=voltage_types)
def test_any_stream_keeps_the_intake_bounded_finite_and_counted(stream, voltage_type):
    core, _ = _core(voltage_type)
    _run(core, stream)
    _check_every_sample_accounted_for(core)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=events, voltage_type=voltage_types)
def test_any_stream_keeps_the_intake_bounded_finite_and_counted_many(stream, voltage_type):
    core, _ = _core(voltage_type)
    _run(core, stream)
    _check_every_sample_accounted_for(core)


def hostile_stream(seed: int, count: int, rate_hz: float = 1000.0):
    """``count`` joint states of a swinging rig, about half malformed, and a voltage every tenth.

    Yields ``(stamp_ns, names, positions, voltage or None)``: NaN and ±inf positions, 1e300
    positions, unknown names, positions shorter than the names, empty messages, stamps 5 s in
    the past, zero and 1e6 s ahead; voltages of 0.5, NaN, 1e308 and -2.
    """
    rng = np.random.default_rng(seed)
    for k in range(count):
        t = k / rate_hz
        stamp = T0 + int(round(t * NS))
        joint_names = list(NAMES)
        positions = [0.5 * math.sin(1.3 * t) + 0.2 * t, 0.4 * math.cos(2.0 * t)]
        if rng.random() < 0.5:
            fault = int(rng.integers(9))
            if fault == 0:
                positions[int(rng.integers(2))] = float(rng.choice([math.nan, math.inf,
                                                                    -math.inf]))
            elif fault == 1:
                positions[int(rng.integers(2))] = 1e300
            elif fault == 2:
                joint_names = ["joint0", "joint1"]
            elif fault == 3:
                positions = positions[:1]
            elif fault == 4:
                joint_names, positions = [], []
            elif fault == 5:
                stamp -= 5 * NS
            elif fault == 6:
                stamp = 0
            elif fault == 7:
                stamp += 10**6 * NS
        value = float(rng.choice([0.5, math.nan, 1e308, -2.0])) if k % 10 == 0 else None
        yield stamp, joint_names, positions, value


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_hostile_stream_is_counted_by_kind_and_cuts_only_bounded_windows(seed):
    """The issue's mixture through the callbacks: every fault under its own name."""
    config = with_node(load_config("furuta_synthetic"), warm_up=False)
    published = Published()
    core = EstimatorCore(config, published.outputs)
    spans = []
    for stamp, joint_names, positions, value in hostile_stream(seed, 20_000):
        core.on_joint_state(stamp, joint_names, positions)
        if value is not None:
            core.on_voltage_message(value)
        while core.worker.pending:
            spans.append(np.ptp(core.worker.pending.popleft().recording.time_s))
    counters = core.diagnostics()
    for kind in ("samples_empty", "samples_unknown_joints", "samples_short",
                 "samples_non_finite", "samples_out_of_range", "samples_stamp_zero",
                 "samples_stamp_behind", "samples_stamp_ahead", "voltage_non_finite",
                 "voltage_out_of_range"):
        assert counters.get(kind, 0) > 0, (kind, counters)
    assert spans and max(spans) <= config.node.window_s * (1 + 2 * WINDOW_MARGIN_FRACTION)
    assert published.filtered > 0
    _check_every_sample_accounted_for(core)
