"""Move this process into a private network namespace that holds only the loopback interface.

ROS 2's default middleware (Fast DDS) discovers peers by multicast on every interface; no packet
of a test or benchmark may leave the machine. ``enter()`` is the in-process equivalent of
``unshare -rn sh -c 'ip link set lo up && exec CMD'``: a new user namespace (the same user id,
mapped onto itself) owning a new network namespace, whose ``lo`` it brings up. Every thread and
child process started afterwards (rclpy, the node and player subprocesses) sees only
127.0.0.1. ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` is set as a second guard.

Linux only, and only while the process has a single thread (``unshare(2)`` refuses a new user
namespace otherwise): call it before anything starts threads (the test suite's conftest does,
first thing). Where it cannot be done, ``enter()`` says why and the ROS tests skip with that
reason.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as file:
        file.write(text)


def interfaces() -> list[str]:
    """Names of the network interfaces this process sees."""
    return [name for _, name in socket.if_nameindex()]


def enter() -> str | None:
    """Enter a loopback-only network namespace; ``None`` on success, else the reason it failed.

    Idempotent: a process already alone with ``lo`` (``MB_LOOPBACK_NAMESPACE=1`` set by an
    earlier call, inherited by children) does nothing.
    """
    if os.environ.get("MB_LOOPBACK_NAMESPACE") == "1" and interfaces() == ["lo"]:
        return None
    if not hasattr(os, "getuid") or not os.path.exists("/proc/self/uid_map"):
        return "not Linux: no network namespaces"
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        return f"unshare(CLONE_NEWUSER | CLONE_NEWNET) failed: {os.strerror(error)}"
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            request = struct.pack("16sH14x", b"lo", 0)
            flags = struct.unpack("16sH14x", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))
    except OSError as error:
        return f"the new network namespace could not be set up: {error}"
    if interfaces() != ["lo"]:
        return f"the new namespace has interfaces {interfaces()}, expected only lo"
    os.environ["MB_LOOPBACK_NAMESPACE"] = "1"
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    return None
