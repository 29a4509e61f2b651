"""What node, rig-sim and replay share: --domain-id, the rclpy transport, Ctrl-C."""

from __future__ import annotations

import argparse
import os

from mb_estimation.errors import UserError

# rig-sim and replay wait this long [s] for a subscriber on each of their topics before
# publishing, so that the first messages are not lost to discovery. Discovery can take seconds
# on a busy machine: with 2 s, 3 of 20 rclpy replays of the Humble bag on 2 cores under 3 busy
# processes timed out and lost their first 0.4-0.9 s (measured).
SUBSCRIBER_WAIT_S = 10.0


def add_domain_option(parser: argparse.ArgumentParser) -> None:
    """--domain-id."""
    parser.add_argument("--domain-id", type=int, metavar="N",
                        help="ROS 2 domain, sets ROS_DOMAIN_ID (default: $ROS_DOMAIN_ID, else 0)")


def ros_transport(args: argparse.Namespace):
    """The rclpy transport (:mod:`mb_estimation.ros.ros_node`), on --domain-id if given."""
    try:
        import rclpy  # noqa: F401
    except ImportError:
        raise UserError("this command needs rclpy: source a ROS 2 installation or "
                        "pip install 'mb_estimation[ros]'") from None
    if args.domain_id is not None:
        os.environ["ROS_DOMAIN_ID"] = str(args.domain_id)
    from mb_estimation.ros import ros_node
    return ros_node


def stop_on_signals():
    """An event set by SIGINT/SIGTERM (Ctrl-C ends long-running commands cleanly)."""
    import signal
    import threading

    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    return stop
