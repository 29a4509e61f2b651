"""``mb-estimation node``: the online estimator over bare DDS or rclpy."""

from __future__ import annotations

import time
from pathlib import Path

from mb_estimation.cli.common import (
    UserError,
    add_config_options,
    add_free_option,
    add_step_and_weight_options,
    load_config,
)
from mb_estimation.cli.transport import (
    add_transport_options,
    dds_bus,
    ros_transport,
    stop_on_signals,
)


def add_node(commands) -> None:
    """The node command and its options."""
    node = commands.add_parser(
        "node", help="run the online estimator node (ROS 2 or bare DDS)",
        description="Estimate the parameters online: windows of the live joint states and "
        "voltage (config section node: window_s, stride_s, ...) are estimated in the "
        "background, warm-started from the last accepted window, and fused. Publishes "
        "/NAME/parameters, /NAME/fused_parameters, /NAME/shadow_joint_states, "
        "/NAME/filtered_joint_states and /diagnostics (NAME: node.name, default mb_estimator). "
        "--transport dds speaks the ROS 2 wire format over Cyclone DDS without a ROS install "
        "(ROS_DOMAIN_ID and CYCLONEDDS_URI honoured); --transport ros needs rclpy. Runs until "
        "Ctrl-C or --duration.")
    add_config_options(node)
    add_free_option(node)
    add_step_and_weight_options(node)
    add_transport_options(node)
    node.add_argument("--duration", type=float, metavar="S",
                      help="stop S seconds after it starts listening (default: run until Ctrl-C)")
    node.set_defaults(handler=node_command)


def node_command(args) -> int:
    """Run the node until Ctrl-C or --duration (over rclpy: estimator_node's status)."""
    started = time.monotonic()
    config = load_config(args)
    if args.transport == "ros":
        return _ros_node(args)
    bus = dds_bus(args)
    try:
        from mb_estimation.online.core import leave_now
        from mb_estimation.online.messages import warm_up_message
        from mb_estimation.transport.dds_node import DdsNode

        node = DdsNode(config, bus)  # a ConfigError (node.window_s against method.dt): exit 2
    except BaseException:
        bus.close()
        raise
    stop = stop_on_signals()
    name = config.node.name
    print(f"{name}: estimating {', '.join(config.free)} on windows of {config.node.window_s:g} s "
          f"every {config.node.stride_s:g} s (DDS domain {node.bus.domain_id})", flush=True)
    try:
        node.start()
        topics = ", ".join(_input_topics(config))
        if config.node.warm_up:
            print(f"{name}: listening on {topics} after {time.monotonic() - started:.1f} s; "
                  "compiling the solver", flush=True)
        else:
            print(f"{name}: ready after {time.monotonic() - started:.1f} s; listening on "
                  f"{topics}", flush=True)
        listening = time.monotonic()
        reported, ready = 0, not config.node.warm_up
        while not stop.wait(0.2):
            snapshot = node.core.diagnostics()
            if not ready and (line := warm_up_message(snapshot)) is not None:
                ready = True
                print(f"{name}: ready after {time.monotonic() - started:.1f} s: {line}",
                      flush=True)
            if snapshot["windows_done"] != reported:
                reported = snapshot["windows_done"]
                fused = node.core.fused
                values = "" if fused is None else ", fused " + ", ".join(
                    f"{n} {float(v[0]):.5g}" for n, v in fused.values.items() if v.size == 1)
                print(f"{name}: window {snapshot.get('last_window', '')} "
                      f"({snapshot.get('last_window_s', 0.0):.2f} s){values}", flush=True)
            if args.duration is not None and time.monotonic() - listening >= args.duration:
                break
    finally:
        node.close()
    if node.core.busy:  # compiling or estimating still: leave without waiting for it
        leave_now(0)
    return 0


def _ros_node(args) -> int:
    """``node --transport ros``: estimator_node with the command line as ROS parameters."""
    if args.dt is not None or args.kappa is not None or args.duration is not None:
        raise UserError("--dt, --kappa and --duration are not available with --transport ros: "
                        "set method.dt/method.kappa in the config, stop with Ctrl-C")
    ros_node = ros_transport(args)
    config = Path(args.config).resolve() if Path(args.config).exists() else args.config
    parameters = [f"config:={config}"]
    if args.free:
        parameters.append(f"free:={args.free}")
    if args.set_values:
        parameters.append(f"set:={args.set_values}")
    if args.compliance is not None:
        parameters.append(f"compliance:={args.compliance}")
    argv = ["estimator_node", "--ros-args"]
    for parameter in parameters:
        argv += ["-p", parameter]
    return ros_node.main(argv)


def _input_topics(config) -> list[str]:
    """The topics the node subscribes to, for its start-up line."""
    from mb_estimation.message_types import JOINT_STATE

    recording = config.recording
    topics = [recording.joint_states_topic]
    if config.rig_spec.inputs and recording.voltage_type != JOINT_STATE:
        topics.append(recording.voltage_topic)
    return topics
