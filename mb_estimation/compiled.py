"""One bounded cache of compiled programs, shared by every solve in the process.

A program is compiled once per key — the function, its static structure (rig, free set,
formulation, step counts: hashable) and the shapes and dtypes of its arguments — and kept
while it is among the :data:`MAX_PROGRAMS` most recently used. The whole-recording algebra is
compiled per length bucket
(:func:`~mb_estimation.estimation.recording_blocks.bucket_length`) and the model per chunk,
so a session of calibrations, a sweep or the node's windows reuse a few programs; the bound
keeps a long-running process from holding every program it ever built. A program another
process already built is loaded from disk rather than built again
(:mod:`~mb_estimation.program_store`); the simulations and the checks compile
through here too.

Threads may compile ahead (:func:`~mb_estimation.estimation.solver.compile_model` while data
are read or simulated): a program is compiled by the first thread that asks for it, and a
thread asking for it meanwhile waits for that compilation instead of starting its own.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future

from mb_estimation.numerics import jax
from mb_estimation.program_store import compiled_program, shape_and_dtype

MAX_PROGRAMS = 256

_PROGRAMS: OrderedDict = OrderedDict()
_COMPILING: dict[tuple, Future] = {}  # programs being compiled now, by key
_LOCK = threading.Lock()  # guards both


def program_key(function, static, args) -> tuple:
    """The cache key: function, static structure, argument tree, shapes and dtypes."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    return (function, static, tree, tuple(shape_and_dtype(x) for x in leaves))


class Compiler:
    """Runs ``function(static, *args)`` compiled (cached); ``seconds`` counts its compiling.

    One per solve, so that the solve can report its compilation apart from its work (waiting
    for another thread's compilation of a program it needs counts as compiling).
    """

    def __init__(self):
        self.seconds = 0.0

    def __call__(self, function, static, *args):
        return self.executable(function, static, *args)(*args)

    def executable(self, function, static, *args):
        """The compiled program of ``function(static, *args)``, compiled now if need be."""
        key = program_key(function, static, args)
        with _LOCK:
            executable = _PROGRAMS.get(key)
            if executable is not None:
                _PROGRAMS.move_to_end(key)
                return executable
            pending = _COMPILING.get(key)
            compiling = pending is None
            if compiling:
                pending = _COMPILING[key] = Future()
        started = time.perf_counter()
        if not compiling:  # another thread compiles it
            executable = pending.result()
            self.seconds += time.perf_counter() - started
            return executable
        try:
            executable = compiled_program(function, static, args)
        except BaseException as error:
            with _LOCK:
                del _COMPILING[key]
            pending.set_exception(error)
            raise
        self.seconds += time.perf_counter() - started
        with _LOCK:
            del _COMPILING[key]
            _PROGRAMS[key] = executable
            while len(_PROGRAMS) > MAX_PROGRAMS:
                _PROGRAMS.popitem(last=False)
        pending.set_result(executable)
        return executable


def compiled_function(function):
    """``function`` compiled through this cache, for calls from outside compiled code.

    Like ``jax.jit(function)``, compiled once per argument tree, shapes and dtypes; unlike it,
    also kept on disk (:mod:`~mb_estimation.program_store`), so a later process loads it.
    """
    @functools.wraps(function)
    def compiled_call(*args):
        return Compiler()(function, None, *args)

    return compiled_call
