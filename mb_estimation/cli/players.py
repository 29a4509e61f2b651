"""``mb-estimation rig-sim`` and ``replay``: real-time joint states and voltage over rclpy."""

from __future__ import annotations

import dataclasses

from mb_estimation.cli.common import (
    SCENARIOS,
    SIMULATED_HINGES,
    UserError,
    add_config_options,
    add_hinges_option,
    check_bags,
    load_config,
    parse_drifts,
    played_input,
)
from mb_estimation.cli.ros_options import (
    SUBSCRIBER_WAIT_S,
    add_domain_option,
    ros_transport,
    stop_on_signals,
)


def add_rig_sim(commands) -> None:
    """The rig-sim command and its options."""
    rig_sim = commands.add_parser(
        "rig-sim", help="publish a simulated rig's joint states and voltage in real time",
        description="Simulate the rig of --config through a scenario or an input file, one "
        "continuous motion until --duration (default forever; the swing-up lets go every 10 s "
        "and swings up again), and publish its joint states and voltage on the "
        "config's topics in real time through rclpy, as the rig's driver would: for trying "
        "the node without the rig. With --driven the rig obeys the input published on the "
        "config's voltage topic instead (trying exciter_node or a controller).")
    add_config_options(rig_sim)
    source = rig_sim.add_mutually_exclusive_group(required=True)
    source.add_argument("--scenario", choices=SCENARIOS, metavar="NAME",
                        help=f"one of: {', '.join(SCENARIOS)}")
    source.add_argument("--input", metavar="FILE",
                        help="play this input from rest instead (a time_s,input CSV such as "
                        "excite's excitation.csv; at its rate, for its length unless --duration)")
    source.add_argument("--driven", action="store_true",
                        help="a rig that obeys its input topic (the config's "
                        "recording.voltage_topic, e.g. from exciter_node): it starts at rest, "
                        "holds the newest input received and publishes only joint states")
    rig_sim.add_argument("--rate", type=float, metavar="HZ",
                         help="sample rate [Hz] (default: config, 1000)")
    rig_sim.add_argument("--duration", type=float, metavar="S",
                         help="simulated time [s] (default: forever)")
    rig_sim.add_argument("--dt", type=float, metavar="H",
                         help="simulation step [s] (default: the config's simulation.dt)")
    rig_sim.add_argument("--drift", metavar="NAME=±P%/Ts,...",
                         help="a wearing rig: each named parameter changes by P %% of its value "
                         "every T seconds, linearly (stepped every 10 s), e.g. b1=+20%%/600s")
    add_hinges_option(rig_sim, SIMULATED_HINGES)
    add_domain_option(rig_sim)
    rig_sim.set_defaults(handler=rig_sim_command)


def add_replay(commands) -> None:
    """The replay command and its options."""
    replay = commands.add_parser(
        "replay", help="play a bag's joint states and voltage like ros2 bag play",
        description="Publish the JointState, Float64 and Float64MultiArray messages of a "
        "rosbag2 bag through rclpy in their recorded timing (header stamps kept), scaled by "
        "--rate; --loop starts over at the end (the stamps jump back, as with ros2 bag play "
        "--loop).")
    replay.add_argument("bag", metavar="BAG", help="rosbag2 folder or .db3/.mcap file")
    replay.add_argument("--rate", type=float, default=1.0, metavar="X",
                        help="speed factor (default 1; 0: as fast as possible)")
    replay.add_argument("--loop", action="store_true", help="replay forever")
    add_domain_option(replay)
    replay.set_defaults(handler=replay_command, uses_jax=False)


def _play(args, messages, speed: float, topics=None) -> int:
    """Publish ``messages`` through rclpy (the topics' publishers first, then a subscriber wait)."""
    stop = stop_on_signals()
    stats = ros_transport(args).run_ros_player(messages, speed, topics=topics, stop=stop,
                                               wait_s=SUBSCRIBER_WAIT_S)
    print(f"published {stats.messages} messages over {stats.wall_s:.1f} s "
          f"(stream {stats.stream_s:.1f} s, at most {stats.max_lateness_s * 1e3:.1f} ms late)")
    return 0


def rig_sim_command(args) -> int:
    """Simulate and publish until --duration or Ctrl-C."""
    from mb_estimation.ros.players import rig_sim_messages, rig_sim_topics

    config = load_config(args)
    if args.dt is not None:
        config = dataclasses.replace(
            config, simulation=dataclasses.replace(config.simulation, dt=args.dt))
    if args.driven:
        return _driven(args, config)
    scenario, rate, duration, name = args.scenario, args.rate, args.duration, args.scenario
    if args.input is not None:
        scenario, rate, duration = played_input(args.input, config, rate_hz=args.rate,
                                                   duration_s=args.duration)
        name = args.input
    # checked at once: SimulationError (--rate, --duration), ConfigError (recording section)
    messages = rig_sim_messages(config, scenario, duration_s=duration, rate_hz=rate,
                                drifts=parse_drifts(args.drift))
    print(f"rig-sim: {name} on {config.recording.joint_states_topic} and "
          f"{config.recording.voltage_topic} "
          f"({'forever' if duration is None else f'{duration:g} s'}); simulating...",
          flush=True)
    return _play(args, messages, speed=1.0, topics=rig_sim_topics(config))


def _driven(args, config) -> int:
    """The rig driven by its input topic until --duration or Ctrl-C."""
    ros_transport(args)  # rclpy is there; --domain-id
    from mb_estimation.ros.ros_player import run_driven_rig

    settings = config.recording
    print(f"rig-sim: driven by {settings.voltage_topic}, joint states on "
          f"{settings.joint_states_topic} "
          f"({'forever' if args.duration is None else f'{args.duration:g} s'}); compiling...",
          flush=True)
    try:
        stats = run_driven_rig(config, rate_hz=args.rate, duration_s=args.duration,
                               stop=stop_on_signals())
    except ValueError as error:
        raise UserError(str(error)) from None
    print(f"published {stats.messages} joint states over {stats.wall_s:.1f} s", flush=True)
    return 0


def replay_command(args) -> int:
    """Publish the bag's messages (forever with --loop) until done or Ctrl-C."""
    from mb_estimation.ros.players import bag_messages, bag_topics

    check_bags([args.bag], "a bag folder or .db3/.mcap file")
    if args.rate < 0:
        raise UserError(f"--rate must be non-negative, got {args.rate}")
    # publishers first, waiting for subscribers: the first messages are not lost to discovery
    return _play(args, bag_messages(args.bag, loop=args.loop), speed=args.rate,
                 topics=bag_topics(args.bag))
