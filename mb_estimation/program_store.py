"""Compiled programs kept on disk, so a later process loads a program instead of building it.

JAX builds a program in three steps: it traces the Python model, lowers the trace to XLA's
input and compiles that, a third of a warm demo's time going to the first two where only the
last was cached. Here each program the :class:`~mb_estimation.compiled.Compiler`
builds is kept whole: its executable, serialised with its argument and result trees
(``jax.experimental.serialize_executable``), in ``compiled/`` in the compiled-code cache
(:func:`~mb_estimation.numerics.configure_jax`), named by a digest of everything that decides
it: the package's source, JAX's versions, the compiler options, this machine's processor, the
function, its static structure, and the tree, shapes and dtypes of its arguments. A process
that meets the same program loads it: nothing is traced, lowered or compiled.

Only what can be described the same way in every process is stored: a static structure made
of numbers, strings, tuples, dataclasses, module-level functions and ``functools.partial``
of them. Anything else (a closure, an object without such a description) is compiled every
time, as is every program when the cache is off. A file that cannot be read is ignored and
written again. Loading runs the machine code the file holds: keep the cache folder as
private as the package itself.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import pickle
import platform
import tempfile
import types
from pathlib import Path

import numpy as np
from jax.experimental import serialize_executable

from mb_estimation.numerics import COMPILER_OPTIONS, compiler_options, configured_cache_dir, jax

FOLDER = "compiled"


def stable_description(value) -> str | None:
    """A description of ``value`` that is the same in every process, or None where none is.

    Numbers, strings, None, tuples, lists, dicts with such keys, dataclasses (every field),
    NumPy arrays (by their bytes), module-level functions and ``functools.partial`` of them.
    """
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, (np.generic, np.ndarray)):
        array = np.asarray(value)
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
        return f"array:{array.dtype}:{array.shape}:{digest}"
    if isinstance(value, (tuple, list)):
        parts = [stable_description(item) for item in value]
        return None if None in parts else f"{type(value).__name__}({','.join(parts)})"
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            return None
        parts = [stable_description(value[key]) for key in sorted(value)]
        return None if None in parts else "dict(" + ",".join(
            f"{key}={part}" for key, part in zip(sorted(value), parts, strict=True)) + ")"
    if isinstance(value, functools.partial):
        parts = [stable_description(part) for part in (value.func, value.args, value.keywords)]
        return None if None in parts else f"partial({','.join(parts)})"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        name = getattr(value, "__qualname__", "")
        if not name or "<" in name:  # a lambda or a closure: its captured values are unknown
            return None
        return f"function:{value.__module__}.{name}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        parts = [stable_description(getattr(value, field.name))
                 for field in dataclasses.fields(value)]
        return None if None in parts else (f"{kind.__module__}.{kind.__qualname__}("
                                           + ",".join(parts) + ")")
    return None


@functools.cache
def code_version() -> str:
    """A digest of the package's source, JAX's versions, float64, XLA's options, the CPU.

    XLA's options: the compiler options and ``$XLA_FLAGS`` (a flag there changes the code XLA
    makes). The processor by its model and instruction-set flags: an executable may use every
    instruction of the machine that compiled it, so a cache folder shared by other machines
    (a network home) keeps each one's programs apart.
    """
    import jaxlib

    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    digest.update(f"{jax.__version__} {jaxlib.__version__} "
                  f"{jax.config.jax_enable_x64} {sorted(COMPILER_OPTIONS.items())} "
                  f"{os.environ.get('XLA_FLAGS', '')} {platform.machine()} {_processor()}"
                  .encode())
    return digest.hexdigest()


def _processor() -> str:
    """This machine's processor model and flags (Linux's ``/proc/cpuinfo``), else its name."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    return "\n".join(sorted({line for line in lines
                             if line.startswith(("model name", "flags", "Features"))}))


def shape_and_dtype(leaf) -> tuple:
    """A leaf's shape and dtype (an array's own; a Python number's as JAX would make it)."""
    dtype = getattr(leaf, "dtype", None)  # asking JAX costs ~10 µs a leaf, per call
    return np.shape(leaf), np.dtype(dtype) if dtype is not None else jax.numpy.result_type(leaf)


def _argument_description(args) -> str:
    """The arguments' tree and each leaf's shape, dtype and weak type (a Python number's is).

    The weak type too: a stored program takes exactly the argument types it was traced with.
    """
    leaves, tree = jax.tree_util.tree_flatten(args)
    signatures = []
    for leaf in leaves:
        shape, dtype = shape_and_dtype(leaf)
        weak = bool(getattr(leaf, "weak_type", False)) or not hasattr(leaf, "dtype")
        signatures.append(f"{shape}:{dtype}:{weak}")
    return f"{tree}|{';'.join(signatures)}"


def store_folder() -> Path | None:
    """Where programs are stored, or None where nothing is.

    ``compiled/`` in the compiled-code cache folder
    (:func:`~mb_estimation.numerics.configure_jax` sets it up); None where that cache is off.
    """
    folder = configured_cache_dir()
    return folder / FOLDER if folder is not None else None


def stored_path(function, static, args, options) -> Path | None:
    """Where the program of ``function(static, *args)`` is stored, or None (not storable).

    ``options``: XLA's options it is compiled with.
    """
    folder = store_folder()
    if folder is None:
        return None
    function_part, static_part = stable_description(function), stable_description(static)
    if function_part is None or static_part is None:
        return None
    key = "\n".join((code_version(), function_part, static_part, _argument_description(args),
                     repr(sorted(options.items()))))
    return folder / f"{hashlib.sha256(key.encode()).hexdigest()}.executable"


def _load(path: Path):
    try:
        executable, arguments, results = pickle.loads(path.read_bytes())
        return serialize_executable.deserialize_and_load(executable, arguments, results)
    except Exception:  # missing, cut short by a crash, or from an incompatible JAX
        return None


def _store(path: Path, compiled) -> None:
    partial = None
    try:
        data = pickle.dumps(serialize_executable.serialize(compiled))
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as handle:
            partial = Path(handle.name)
            handle.write(data)
        os.replace(partial, path)  # whole or not at all, also with two processes
    except Exception:  # a tree without a serialisable node, a full disk: compile next time
        if partial is not None:
            partial.unlink(missing_ok=True)  # no piece of a file left in the folder


def compiled_program(function, static, args):
    """``function(static, *args)`` compiled, or loaded where a process stored it before.

    A program compiled here is stored for the next process.
    """
    options = compiler_options(function)
    path = stored_path(function, static, args, options)
    compiled = None if path is None else _load(path)
    if compiled is None:
        bound = function if static is None else functools.partial(function, static)
        compiled = jax.jit(bound).lower(*args).compile(options)
        if path is not None:
            _store(path, compiled)
    return compiled
