"""JAX set-up shared by the numerical core: float64, XLA's options, compiled-code cache, buffers.

Every core module imports ``jax`` through here so that ``jax_enable_x64`` is switched on before
the first array is made. Every entry point (``mb-estimation``, ``estimator_node``) calls
:func:`configure_jax` before its first compilation; it also has the C allocator reuse freed
large buffers (:func:`reuse_freed_memory`). :func:`compiling_meanwhile` compiles on a core the
caller leaves idle.
"""

import contextlib
import ctypes
import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

CACHE_ENVIRONMENT_VARIABLE = "MB_ESTIMATION_CACHE_DIR"

#: XLA's options for every program the package compiles (:func:`jit`, and
#: ``compiled``). XLA's CPU fusion emitters (its default since jaxlib 0.5) spend
#: 1.7× longer generating code for this model's programs than the classic emitters, for the
#: same run time within a few per cent: the rigid fit's transition Jacobian with dry friction
#: compiles in 5.3 s instead of 9.3 s on one core (measured). Passed
#: per compilation rather than through ``XLA_FLAGS``, which XLA reads once, when its backend
#: starts: an import that makes an array first would silently drop it.
#: XLA's CPU backend also hands small matrix products to its YNNPACK library as custom fusions;
#: a loop holding one cannot be compiled into a single function (:data:`XLA_FLAGS`), and the
#: products here are a few rows wide: they are left to XLA's own code
#: (``xla_cpu_experimental_ynn_fusion_type`` empty).
COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False,
                    "xla_cpu_experimental_ynn_fusion_type": ""}

#: XLA's options for a program that runs once or a few times a calibration (a check, the start
#: states, the covariance, the shadow states): LLVM's optimisation level 0. Such a program
#: compiles in 40-60 % of the time and runs 1.2-3.5 times longer, a few milliseconds where
#: its compiling saves tenths of a second (measured on the 8 s multisine's programs). The
#: programs an iteration runs keep :data:`COMPILER_OPTIONS`.
RUN_ONCE_OPTIONS = {**COMPILER_OPTIONS, "xla_backend_optimization_level": 0}


def run_once(function):
    """Mark ``function`` to be compiled with :data:`RUN_ONCE_OPTIONS` (returns it).

    Read by the compiled-program cache (:mod:`mb_estimation.program_store`).
    """
    function.compiler_options = RUN_ONCE_OPTIONS
    return function


def compiler_options(function) -> dict:
    """The XLA options ``function``'s program is compiled with.

    :func:`run_once`'s, else the default :data:`COMPILER_OPTIONS`.
    """
    return getattr(function, "compiler_options", COMPILER_OPTIONS)


#: XLA flags that only its environment sets, read once, when its CPU backend starts: appended
#: to ``$XLA_FLAGS`` when this module is imported (a flag the environment already gives is left
#: as it is). A program that made an array before importing this package runs without them:
#: the same results, the simulations slower. XLA's CPU runtime runs a program as a sequence
#: of small compiled kernels, dispatching each (about 23 ns apiece, some 250 for a rigid step);
#: a loop whose body reads and writes fewer bytes than its threshold (1 kB by default) is
#: compiled into one function instead. Every loop that can be (no library call inside) is, so
#: a simulation's scan over its steps and their iterations runs as one function: the plain
#: lane of the simulation-error stage about 2× faster, with its Jacobians 2.5-3× (measured on
#: the 8 s multisine's lanes), for about a second more compiling of the two. The CPU fusion
#: emitters are switched off here as well as in :data:`COMPILER_OPTIONS`, for the programs JAX
#: compiles for operations run one by one outside a compiled function: a small one compiles
#: in 12 ms instead of 21 ms (measured).
XLA_FLAGS = {"--xla_backend_extra_options":
             "xla_cpu_small_while_loop_byte_threshold=1000000000000",
             "--xla_cpu_use_fusion_emitters": "false"}


def _set_xla_flags() -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    added = [f"{name}={value}" for name, value in XLA_FLAGS.items()
             if name.lstrip("-") not in flags]
    if added:
        os.environ["XLA_FLAGS"] = " ".join([flags, *added]).strip()


_set_xla_flags()

#: ``jax.jit`` with :data:`COMPILER_OPTIONS`.
jit = functools.partial(jax.jit, compiler_options=COMPILER_OPTIONS)

__all__ = ["CACHE_ENVIRONMENT_VARIABLE", "COMPILER_OPTIONS", "RUN_ONCE_OPTIONS", "XLA_FLAGS",
           "compilation_cache_dir", "compiler_options", "compiling_meanwhile", "configure_jax",
           "configured_cache_dir", "jax", "jit", "pytree_dataclass", "reuse_freed_memory",
           "run_once", "traced_once"]


def pytree_dataclass(cls):
    """``jax.tree_util.register_dataclass`` of ``cls``.

    Its fields that are arrays are the pytree's leaves, the others (booleans, integers: the
    ``field(metadata=dict(static=True))`` ones) part of its structure.
    """
    return jax.tree_util.register_dataclass(cls)


def traced_once(function, *args):
    """``function``, traced once at the shapes of ``args``, as the evaluation of its primitives.

    The same results, computed by the same operations. JAX's NumPy operators are small jitted
    functions: a transformation (``jvp``, ``vmap``, ``jacfwd``) of a function written with
    them transforms each operator as a nested program, every time it is traced. Traced first,
    the function is its primitives alone, which a transformation handles one by one: the
    rigid tree's transition Jacobian traced in 0.42 s instead of 0.81 s (measured). Call it
    where the transformations are applied, with arguments of the shapes it will take there.
    """
    leaves, tree = jax.tree_util.tree_flatten(args)
    closed, result_shape = jax.make_jaxpr(
        lambda *flat: function(*jax.tree_util.tree_unflatten(tree, flat)),
        return_shape=True)(*leaves)
    result_tree = jax.tree_util.tree_structure(result_shape)

    def evaluate(*arguments):
        results = jax.core.eval_jaxpr(closed.jaxpr, closed.consts,
                                      *jax.tree_util.tree_leaves(arguments))
        return jax.tree_util.tree_unflatten(result_tree, results)

    return evaluate


def compilation_cache_dir() -> Path | None:
    """Where compiled XLA code is kept between runs, or None when switched off.

    ``$MB_ESTIMATION_CACHE_DIR`` if set (empty: off), else ``$XDG_CACHE_HOME/mb_estimation/xla``
    (``~/.cache/mb_estimation/xla``). Compiling the estimator for a recording length takes
    tens of seconds; with the cache a second run on recordings of the same lengths skips it.
    """
    configured = os.environ.get(CACHE_ENVIRONMENT_VARIABLE)
    if configured is not None:
        return Path(configured) if configured.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mb_estimation" / "xla"


def configure_jax() -> Path | None:
    """Set JAX up for an entry point; returns the compiled-code cache folder (None: off).

    Float64 is already on (importing this module switches it on); this keeps compiled programs
    in :func:`compilation_cache_dir` (if on; :func:`configured_cache_dir`, read by
    :mod:`mb_estimation.program_store`) and has freed buffers reused
    (:func:`reuse_freed_memory`). Call it once, before the first compilation.

    XLA's own cache is switched off (also where ``$JAX_COMPILATION_CACHE_DIR`` would switch it
    on): the program store keeps every program it compiles, executable and all, and an
    executable XLA's cache gave back cannot be stored again (it serialises without its
    functions, and fails once loaded and run).
    """
    global _CONFIGURED_CACHE_DIR
    jax.config.update("jax_enable_compilation_cache", False)
    _CONFIGURED_CACHE_DIR = compilation_cache_dir()
    reuse_freed_memory()
    return _CONFIGURED_CACHE_DIR


_CONFIGURED_CACHE_DIR: Path | None = None


def configured_cache_dir() -> Path | None:
    """The compiled-code cache folder :func:`configure_jax` set up (None: off, or not set up)."""
    return _CONFIGURED_CACHE_DIR


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_KEPT_BYTES = 1 << 30


def reuse_freed_memory() -> bool:
    """Have the C allocator reuse freed large buffers rather than map fresh pages for each.

    glibc maps every allocation above its threshold (128 KiB at first, at most 32 MiB) afresh
    and unmaps it when freed, so each new buffer of that size costs the kernel a page fault per
    4 KiB page. A solve allocates such buffers every iteration (XLA's outputs, the host's
    assembly of the Jacobian blocks): on the paper's swing-up of 100 s (10 001 steps) they made
    a solve 20–30 % slower (measured). Served from the heap, and with up
    to 1 GiB of freed memory kept there, the next buffer reuses pages already mapped; the
    process keeps its peak memory instead (1–14 % more at its peak there). A no-op,
    returning False, where the C library has no ``mallopt`` (macOS, musl).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEPT_BYTES))


@contextlib.contextmanager
def compiling_meanwhile(compile_function: Callable, *args):
    """Run ``compile_function(*args)`` in a thread while the block runs; wait for it at the end.

    For compilations that do not need the block's results (the fit's model before the data
    are read, the checks' simulators while the fit runs): they take a core the block leaves
    idle, and the block finds them compiled, or waits for the one it needs
    (:class:`~mb_estimation.compiled.Compiler`). An error in the thread is dropped:
    the block compiles what it needs itself and meets any real error there. With one core
    there is no idle one to use: nothing is started (the demo took 0.6 s longer with the
    thread).
    """
    if len(os.sched_getaffinity(0)) < 2:
        yield
        return

    def run():
        with contextlib.suppress(Exception):
            compile_function(*args)

    thread = threading.Thread(target=run, name="compile-ahead", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()  # never leave XLA compiling while the interpreter shuts down
