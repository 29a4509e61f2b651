"""Writing files so that a reader never sees part of one (the result files, the node's state).

Pure Python (no numpy, no YAML): the calibrate outputs (:mod:`mb_estimation.io.parameter_files`),
the node's persisted estimate (:mod:`mb_estimation.online.fusion`) and the node's fused result
files (:mod:`mb_estimation.ros.ros_common`) all write through :func:`write_text_atomically`.
:func:`writable_folder` makes an output folder and tries it before any long work.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from mb_estimation.errors import UserError

__all__ = ["PLAIN_FILE", "OutputFolderError", "writable_folder", "write_text_atomically"]

#: Permissions a plain ``open(path, "w")`` asks for (the umask then takes its bits away).
PLAIN_FILE = 0o666


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort; not every platform can open folders)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _create_temporary(path: Path, mode: int) -> tuple[int, Path]:
    """A new file ``.<name>.<random>.tmp`` beside ``path``, open for writing, with ``mode``."""
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
    for _ in range(100):
        temporary = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(temporary, flags, mode), temporary
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name beside {path}")


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never part.

    A temporary file in the same folder, flushed to disk, replaces ``path`` (``os.replace``); a
    failure leaves the old file as it was and no temporary file behind. The new file has the
    permissions ``Path.write_text`` would give it (:data:`PLAIN_FILE` less the umask). UTF-8.
    """
    path = Path(path)
    descriptor, temporary = _create_temporary(path, PLAIN_FILE)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_folder(path.parent)


class OutputFolderError(UserError):
    """An output folder that cannot be made or written."""


def writable_folder(path: str | Path) -> Path:
    """``path`` as an output folder: made if missing, and a file written in it and removed.

    For a command to fail in one line before its work rather than lose it to a folder it
    cannot write (:class:`OutputFolderError`).
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputFolderError(f"{path}: exists and is not a folder: choose another output")
    try:
        path.mkdir(parents=True, exist_ok=True)
        descriptor, probe = _create_temporary(path / "write-test", PLAIN_FILE)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise OutputFolderError(f"{path}: cannot write there ({error.strerror or error})"
                                ) from None
    return path
