"""An rclpy listener to the estimator node's diagnostics and filtered joint states (tests)."""

import contextlib
import threading

NODE = "mb_estimator"


class Listener:
    """Subscribes over rclpy to ``/diagnostics`` and ``/<node>/filtered_joint_states``.

    The newest diagnostic values by key (:meth:`count` for counters, :meth:`value` for any),
    and the header stamps [ns] of every filtered joint state (:meth:`filtered`). Spun on its own
    thread until :meth:`close`.
    """

    def __init__(self, context, node: str = NODE):
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        self.node = Node("mb_estimation_test_listener", context=context)
        self.lock = threading.Lock()
        self.diagnostics = {}
        self.stamps = []
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.node.create_subscription(
            JointState, f"/{node}/filtered_joint_states", self._on_filtered,
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT))
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def _on_diagnostics(self, msg):
        with self.lock:
            self.diagnostics = {kv.key: kv.value for kv in msg.status[0].values}

    def _on_filtered(self, msg):
        with self.lock:
            self.stamps.append(msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)

    def count(self, key) -> int:
        """A counter of the newest diagnostics (0 before it appears)."""
        with self.lock:
            return int(self.diagnostics.get(key, 0))

    def value(self, key) -> str:
        with self.lock:
            return self.diagnostics.get(key, "")

    def filtered(self) -> list[int]:
        with self.lock:
            return list(self.stamps)

    def close(self):
        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()


@contextlib.contextmanager
def listening(domain_id: int):
    """A :class:`Listener` in an rclpy context of its own on ``domain_id``."""
    import rclpy

    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=domain_id)
    listener = Listener(context)
    try:
        yield listener
    finally:
        listener.close()
        rclpy.try_shutdown(context=context)
