"""``mb-estimation node``: the online estimator on rclpy (``estimator_node``)."""

from __future__ import annotations

from pathlib import Path

from mb_estimation.cli.common import add_config_options, add_free_option, load_config
from mb_estimation.cli.ros_options import add_domain_option, ros_transport
from mb_estimation.ros.ros_common import input_remappings


def add_node(commands) -> None:
    """The node command and its options."""
    node = commands.add_parser(
        "node", help="run the online estimator node (ROS 2, rclpy)",
        description="Estimate the parameters online: windows of the live joint states and "
        "voltage (config section node: window_s, stride_s, ...) are estimated in the "
        "background, warm-started from the last accepted window, and fused. Publishes "
        "/NAME/parameters, /NAME/fused_parameters, /NAME/shadow_joint_states, "
        "/NAME/filtered_joint_states and /diagnostics (NAME: node.name, default mb_estimator). "
        "Runs estimator_node on rclpy (a sourced ROS 2 install, or pip install "
        "'mb_estimation[ros]') with the command line as its ROS parameters; each window is "
        "fitted as calibrate's joint fit, at method.step_s (else 1 ms; the paper's fit: "
        "0.01 s), with no simulation-error stage. Runs until Ctrl-C.")
    add_config_options(node)
    add_free_option(node)
    node.add_argument("--output-dir", metavar="DIR",
                      help="write the fused estimate there after each accepted window and at "
                      "the stop (parameters.yaml, ros_parameters.yaml, calibrated.urdf)")
    node.add_argument("--compile-only", action="store_true",
                      help="compile the solver for this config's windows into the compile "
                      "cache ($MB_ESTIMATION_CACHE_DIR, else ~/.cache/mb_estimation/xla) and "
                      "exit, without ROS: run it once where the rig's computer is set up, and "
                      "the node starts without compiling")
    add_domain_option(node)
    node.set_defaults(handler=node_command)


def node_command(args) -> int:
    """Run estimator_node, configured and activated at once, until Ctrl-C (its status).

    The command line becomes its ROS parameters; it is named after the config's ``node.name``.
    """
    loaded = load_config(args)  # a bad config or override: one line, exit 2, before rclpy
    if args.compile_only:
        return compile_only(args)
    ros_node = ros_transport(args)
    config = Path(args.config).resolve() if Path(args.config).exists() else args.config
    parameters = [f"config:={config}", "autostart:=true"]
    if args.free:
        parameters.append(f"free:={args.free}")
    if args.set_values:
        parameters.append(f"set:={args.set_values}")
    if args.compliance is not None:
        parameters.append(f"compliance:={args.compliance}")
    if args.output_dir:  # one line before rclpy, not a failed write after the first window
        from mb_estimation.io.files import writable_folder

        parameters.append(f"output_dir:={writable_folder(args.output_dir).resolve()}")
    argv = ["estimator_node", "--ros-args", "-r", f"__node:={loaded.node.name}"]
    recording = loaded.recording  # the inputs on the config's topics
    for name, topic in input_remappings(recording.joint_states_topic, recording.voltage_topic):
        argv += ["-r", f"{name}:={topic}"]
    for parameter in parameters:
        argv += ["-p", parameter]
    return ros_node.main(argv)


def compile_only(args) -> int:
    """Compile the node's solver into the compile cache as its start-up would; no rclpy.

    The config is made as the node makes it from the same parameters
    (:func:`~mb_estimation.ros.ros_common.apply_node_overrides`), so its warm-up finds every
    program in the cache.
    """
    import time

    from mb_estimation.cli.common import UserError
    from mb_estimation.config import load_config as load_config_file
    from mb_estimation.numerics import configure_jax
    from mb_estimation.online.core import EstimatorCore
    from mb_estimation.ros.ros_common import apply_node_overrides

    config = apply_node_overrides(load_config_file(args.config), free=args.free or "",
                                  set_text=args.set_values or "",
                                  compliance=args.compliance or 0.0)
    cache = configure_jax()
    if cache is None:
        raise UserError("--compile-only keeps nothing: the compile cache is off "
                        "(MB_ESTIMATION_CACHE_DIR is empty)")
    started = time.perf_counter()
    EstimatorCore(config).warm_up()
    print(f"compiled the solver for {config.node.window_s:g} s windows of "
          f"{', '.join(config.free)} in {time.perf_counter() - started:.1f} s into {cache}")
    return 0
