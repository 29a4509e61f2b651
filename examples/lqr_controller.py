"""A controller that re-designs its LQR gain whenever the estimator publishes new parameters.

An rclpy node standing for the rig's balance controller: it subscribes to the estimator's
``/mb_estimator/fused_parameters`` (std_msgs/Float64MultiArray, docs/node.md, "Topics"),
takes the values the data determine (std ≥ 0) into its model, linearises the Furuta pendulum
about the upright and solves the LQR problem again (``upright_lqr_gain``), and publishes the
gain on ``~/gain`` (std_msgs/Float64MultiArray, labels ``k_arm,k_pendulum,k_arm_rate,
k_pendulum_rate`` [V/rad, V s/rad]). Its control loop (not shown) would use the newest gain.

    python examples/lqr_controller.py --ros-args -p config:=furuta_synthetic
        [-p parameters_topic:=/mb_estimator/fused_parameters]

``config``: the mb_estimation config whose values stand until the estimator has sent better
ones (a path or a built-in name).
"""

from __future__ import annotations

import sys

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from mb_estimation.config import ConfigError, load_config
from mb_estimation.online.messages import read_parameter_matrix
from mb_estimation.scenarios import furuta_balance_gain

GAIN_LABELS = "k_arm,k_pendulum,k_arm_rate,k_pendulum_rate"


def upright_lqr_gain(values: dict) -> np.ndarray:
    """LQR gain ``[4]`` [V/rad, V s/rad] of the upright pendulum for the parameter ``values``.

    State ``(θ1, θ2 − π, θ̇1, θ̇2)``, input the motor voltage: the reduced-coordinate
    linearisation of the Furuta pendulum and a continuous Riccati solution
    (``mb_estimation.scenarios.furuta_balance_gain``, weights diag(1, 10, 0.1, 0.1) and 1).
    """
    return furuta_balance_gain(values)


def updated_values(values: dict, labels: str, data) -> dict:
    """``values`` with every scalar the message determines (finite std) replaced by its estimate."""
    updated = dict(values)
    for name, (value, std) in read_parameter_matrix(labels, data).items():
        if name in updated and np.isfinite(std) and np.isfinite(value):
            updated[name] = value
    return updated


class LqrController(Node):
    """Keeps ``gain`` the LQR gain of the newest estimated model (see the module docstring)."""

    def __init__(self, **node_kwargs) -> None:
        super().__init__("lqr_controller", **node_kwargs)
        config = self.declare_parameter("config", "furuta").value
        topic = self.declare_parameter("parameters_topic", "/mb_estimator/fused_parameters").value
        self.values = {name: float(np.ravel(value)[0])
                       for name, value in load_config(config).parameters.items()
                       if np.size(value) == 1}
        self.gain = upright_lqr_gain(self.values)
        self.updates = 0
        self._gain_publisher = self.create_publisher(Float64MultiArray, "~/gain", 10)
        self.create_subscription(Float64MultiArray, topic, self._on_parameters, 10)
        self.get_logger().info(f"gain {np.round(self.gain, 4).tolist()} from {config}; "
                               f"listening on {topic}")

    def _on_parameters(self, msg: Float64MultiArray) -> None:
        values = updated_values(self.values, msg.layout.dim[1].label, msg.data)
        try:
            gain = upright_lqr_gain(values)
        except (ValueError, np.linalg.LinAlgError) as error:  # e.g. a model with no solution
            self.get_logger().warning(f"kept the old gain: {error}")
            return
        if not np.all(np.isfinite(gain)):
            self.get_logger().warning("kept the old gain: the new one is not finite")
            return
        self.values, self.gain, self.updates = values, gain, self.updates + 1
        self._gain_publisher.publish(Float64MultiArray(
            layout=_layout(GAIN_LABELS, gain.size), data=gain.tolist()))
        self.get_logger().info(f"gain {np.round(gain, 4).tolist()} (update {self.updates})")


def _layout(labels: str, size: int):
    layout = Float64MultiArray().layout
    layout.dim = [MultiArrayDimension(label=labels, size=size, stride=size)]
    return layout


def main(args=None) -> int:
    """Spin the controller until Ctrl-C (``args``: the command line with ``--ros-args``)."""
    rclpy.init(args=args)
    node = None
    try:
        node = LqrController()
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ConfigError as error:  # a config that cannot be read: one line, as the CLI says it
        print(f"lqr_controller: {error}", file=sys.stderr)
        return 2
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
