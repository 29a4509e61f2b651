"""The estimator node over bare DDS (cyclonedds), speaking the ROS 2 wire format.

The same :class:`~mb_estimation.online.core.EstimatorCore` as the rclpy adapter; topics, types
and QoS as a ROS 2 node named ``config.node.name`` would use them, so ROS 2 tools and nodes on the
same domain see it (``ros2 topic echo /mb_estimator/fused_parameters``):

* in: joint states (``sensor_msgs/JointState``, sensor-data QoS) on
  ``recording.joint_states_topic``, the voltage (``std_msgs/Float64`` or ``Float64MultiArray``
  with ``voltage_index``, or the joint states' effort) on ``recording.voltage_topic``. A voltage
  message carries no header: it takes effect at the stamp of the joint state published last
  before it (by the samples' source timestamps; the rig's clock as the rig saw it).
* out: ``~/parameters``, ``~/fused_parameters`` (:mod:`mb_estimation.online.messages`) and
  ``/diagnostics`` (1 Hz and after each window) with ROS default QoS;
  ``~/filtered_joint_states`` with sensor-data QoS (one per input sample);
  ``~/shadow_joint_states``: one message per estimation step of an accepted window, sent in one
  burst, reliable with a history of 2000 (subscribe with a depth of at least window_s / h).

A publisher of the wrong type on an input topic never matches (DDS never delivers its samples);
Cyclone reports it as an incompatible type-consistency policy on the reader, which the node
checks once a second and reports in the diagnostics.
"""

from __future__ import annotations

import threading

from mb_estimation.config import Config
from mb_estimation.message_types import JOINT_STATE
from mb_estimation.online.adapter import ShadowFanout, input_handlers
from mb_estimation.online.core import STOP_WAIT_S, EstimatorCore, NodeOutputs, estimate_window
from mb_estimation.online.messages import (
    diagnostic_level,
    diagnostic_values,
    multiarray_layout,
    parameter_matrix,
)
from mb_estimation.transport.dds_bus import DdsBus
from mb_estimation.transport.dds_messages import (
    DDS_TYPES,
    DiagnosticArray,
    DiagnosticStatus,
    Float64MultiArray,
    Header,
    JointState,
    KeyValue,
    MultiArrayDimension,
    MultiArrayLayout,
    joint_state,
    ns_to_stamp,
)

DIAGNOSTICS_PERIOD_S = 1.0
# DDS QoS policy id of TYPE_CONSISTENCY_ENFORCEMENT: Cyclone's reason for not matching a writer
# whose type differs from the reader's.
TYPE_CONSISTENCY_POLICY_ID = 24


def _parameter_message(estimate) -> Float64MultiArray:
    labels, matrix = parameter_matrix(estimate)
    dims = [MultiArrayDimension(label=label, size=size, stride=stride)
            for label, size, stride in multiarray_layout(labels)]
    return Float64MultiArray(layout=MultiArrayLayout(dim=dims, data_offset=0),
                             data=[float(v) for v in matrix.ravel()])


class DdsNode:
    """The estimator node on a :class:`DdsBus`; ``start()`` it, ``close()`` it."""

    def __init__(self, config: Config, bus: DdsBus | None = None, *,
                 estimator=estimate_window) -> None:
        self.config = config
        self.bus = bus if bus is not None else DdsBus()
        name = config.node.name
        publish = {key: self.bus.publisher(f"/{name}/{key}", kind, qos) for key, kind, qos in (
            ("parameters", Float64MultiArray, "default"),
            ("fused_parameters", Float64MultiArray, "default"),
            ("shadow_joint_states", JointState, "burst"),
            ("filtered_joint_states", JointState, "sensor_data"))}
        self._publish_diagnostics = self.bus.publisher("/diagnostics", DiagnosticArray)
        self._shadow = ShadowFanout(
            lambda s, n, a, r: publish["shadow_joint_states"](joint_state(s, n, a, r)),
            lambda text: self.core.on_message_error(text))
        self.core = EstimatorCore(config, NodeOutputs(
            parameters=lambda e, s: publish["parameters"](_parameter_message(e)),
            fused_parameters=lambda e, s: publish["fused_parameters"](_parameter_message(e)),
            shadow_joint_states=self._shadow,
            filtered_joint_states=lambda s, n, a, r: publish["filtered_joint_states"](
                joint_state(s, n, a, r)),
            diagnostics=self._diagnostics), estimator=estimator)
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._inputs = self._subscribe()

    def _subscribe(self) -> list[tuple[object, str]]:
        """Subscribe to the inputs; returns (subscription, expected ROS type) per input."""
        recording = self.config.recording
        on_joint_state, on_voltage = input_handlers(self.core)
        inputs = [(self.bus.subscribe(
            recording.joint_states_topic, JointState,
            lambda msg: on_joint_state(msg, msg.sample_info.source_timestamp),
            qos="sensor_data"), JOINT_STATE)]
        if on_voltage is not None:
            inputs.append((self.bus.subscribe(
                recording.voltage_topic, DDS_TYPES[recording.voltage_type],
                lambda msg: on_voltage(msg, msg.sample_info.source_timestamp)),
                recording.voltage_type))
        return inputs

    def _diagnostics(self, snapshot: dict) -> None:
        snapshot = self._shadow.with_dropped(snapshot)
        level, message = diagnostic_level(snapshot)
        status = DiagnosticStatus(
            level=level, name=f"{self.config.node.name}: estimator", message=message,
            hardware_id=self.config.rig,
            values=[KeyValue(key=k, value=v) for k, v in diagnostic_values(snapshot)])
        self._publish_diagnostics(DiagnosticArray(
            header=Header(stamp=ns_to_stamp(self._latest_stamp_ns())), status=[status]))

    def _latest_stamp_ns(self) -> int:
        stamp = self.core.latest_stamp_ns
        return 0 if stamp is None else stamp

    def check_topic_types(self) -> None:
        """Report input topics with a publisher whose type is not the config's."""
        for subscription, expected in self._inputs:
            status = subscription.reader.get_requested_incompatible_qos_status()
            if status.total_count_change and status.last_policy_id == \
                    TYPE_CONSISTENCY_POLICY_ID:
                self.core.on_message_error(
                    f"{subscription.topic}: a publisher's message type is not {expected} "
                    "(the config's type): its messages are not received")

    def start(self) -> None:
        """Start the worker (it compiles first: ``EstimatorCore.start``) and 1 Hz diagnostics."""
        self.core.start()
        self._timer = threading.Thread(target=self._tick, name="mb_estimation-diagnostics",
                                       daemon=True)
        self._timer.start()

    def _tick(self) -> None:
        while not self._stop.wait(DIAGNOSTICS_PERIOD_S):
            self.check_topic_types()
            self._diagnostics(self.core.diagnostics())

    def close(self) -> None:
        """Stop the worker and the timer and close the bus."""
        self._stop.set()
        self.core.stop(timeout=STOP_WAIT_S)
        self._shadow.close()
        if self._timer is not None:
            self._timer.join(5.0)
        self.bus.close()

