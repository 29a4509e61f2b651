"""What node, rig-sim and replay share: the transport options, the DDS bus or rclpy, Ctrl-C."""

from __future__ import annotations

import argparse
import os

from mb_estimation.errors import UserError

# rig-sim and replay wait this long [s] for a subscriber on each of their topics before
# publishing, so that the first messages are not lost to discovery. Discovery can take seconds
# on a busy machine: with 2 s, 3 of 20 rclpy replays of the Humble bag on 2 cores under 3 busy
# processes timed out and lost their first 0.4-0.9 s (measured).
SUBSCRIBER_WAIT_S = 10.0


def add_transport_options(parser: argparse.ArgumentParser) -> None:
    """--transport and --domain-id."""
    parser.add_argument("--transport", choices=("dds", "ros"), default="dds",
                        help="dds: bare Cyclone DDS in the ROS 2 wire format (default); ros: "
                        "rclpy (a sourced ROS 2 install)")
    parser.add_argument("--domain-id", type=int, metavar="N",
                        help="DDS domain, as ROS_DOMAIN_ID (default: $ROS_DOMAIN_ID, else 0)")


def dds_bus(args: argparse.Namespace):
    """A DDS bus on the domain of --domain-id (else $ROS_DOMAIN_ID, else 0)."""
    try:
        from cyclonedds.core import DDSException

        from mb_estimation.transport.dds_bus import DdsBus
    except ImportError:
        raise UserError("--transport dds needs the cyclonedds package: pip install "
                        "'mb_estimation[dds]'") from None
    try:
        return DdsBus(args.domain_id)
    except (DDSException, RuntimeError) as error:
        raise UserError(f"cannot start DDS (check CYCLONEDDS_URI and --domain-id): "
                        f"{str(error).strip() or type(error).__name__}") from None


def ros_transport(args: argparse.Namespace):
    """The rclpy transport (:mod:`mb_estimation.transport.ros_node`), on --domain-id if given."""
    try:
        import rclpy  # noqa: F401
    except ImportError:
        raise UserError("--transport ros needs rclpy: source a ROS 2 installation or "
                        "pip install 'mb_estimation[ros]', or use --transport dds") from None
    if args.domain_id is not None:
        os.environ["ROS_DOMAIN_ID"] = str(args.domain_id)
    from mb_estimation.transport import ros_node
    return ros_node


def stop_on_signals():
    """An event set by SIGINT/SIGTERM (Ctrl-C ends long-running commands cleanly)."""
    import signal
    import threading

    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    return stop
