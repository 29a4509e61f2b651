"""The built-in configurations (``config/*.yaml``) and where they are installed.

One resolver for a configuration given as "a path or a built-in name": :func:`resolve_config`.
``load_config`` (the command line, the nodes) and the launch files'
:func:`~mb_estimation.ros.ros_common.config_topics` find files through it, so a name
means the same file everywhere. Pure Python (no rigs, no YAML): the launch files import it.
"""

from __future__ import annotations

import site
import sys
from pathlib import Path

from mb_estimation.config.checks import fail

PACKAGE = "mb_estimation"


def _config_dirs() -> list[Path]:
    """Directories that may hold the built-in configurations, most specific first."""
    here = Path(__file__).resolve()
    candidates = []
    checkout = here.parents[2]  # repository root of a source checkout / editable install
    if (checkout / "resource" / PACKAGE).is_file():
        candidates.append(checkout / "config")
    try:  # a ROS 2 (colcon) install
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory(PACKAGE)) / "config")
    except Exception:  # no ament index, or the package is not in it
        pass
    share = Path("share") / PACKAGE / "config"
    if len(here.parents) > 5:  # <prefix>/lib/pythonX.Y/site-packages/mb_estimation/config/*.py
        candidates.append(here.parents[5] / share)
    for prefix in (sys.prefix, sys.exec_prefix, sys.base_prefix, site.USER_BASE):
        if prefix:
            candidates.append(Path(prefix) / share)
    unique: list[Path] = []
    for candidate in candidates:
        if candidate.is_dir() and candidate not in unique:
            unique.append(candidate)
    return unique


def builtin_config_names() -> tuple[str, ...]:
    """Names of the built-in configurations (``furuta``, ``examples/...``), sorted."""
    names: set[str] = set()
    for directory in _config_dirs():
        names.update(p.stem for p in directory.glob("*.yaml"))
        names.update(f"examples/{p.stem}" for p in directory.glob("examples/*.yaml"))
    return tuple(sorted(names))


def builtin_config_path(name: str) -> Path:
    """Path of a built-in configuration, e.g. ``builtin_config_path("furuta")``.

    ``name`` may carry the ``.yaml`` suffix and an ``examples/`` prefix. Looks in the source
    checkout's ``config/`` (editable installs) first, then in ``share/mb_estimation/config`` of
    the ament index and the install prefixes. Raises :class:`ConfigError` when not found.
    """
    found = _first_holding(name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if found is not None:
        return found
    available = ", ".join(builtin_config_names()) or "none"
    fail(name, None, f"no such built-in configuration (available: {available}; "
                     f"searched: {_searched()})")


def builtin_file(relative: str) -> Path:
    """A file shipped beside the built-in configurations, e.g. ``excitations/.../excitation.csv``.

    Looked up in the same directories as :func:`builtin_config_path`; raises
    :class:`ConfigError` when no installation holds it.
    """
    found = _first_holding(relative)
    if found is None:
        fail(relative, None, f"not found beside the built-in configurations (searched: "
                             f"{_searched()})")
    return found


def _first_holding(relative: str) -> Path | None:
    """``relative`` in the first of :func:`_config_dirs` that holds it, or None."""
    return next((d / relative for d in _config_dirs() if (d / relative).is_file()), None)


def _searched() -> str:
    return ", ".join(str(d) for d in _config_dirs()) or "no config directory found"


def resolve_config(config: str | Path) -> Path:
    """The file of a configuration given as a path or as the bare name of a built-in one.

    An existing path is taken as it is; otherwise a name as :func:`builtin_config_names` lists
    it, without ``.yaml`` (``furuta``, ``examples/odrive_furuta``), names a built-in
    configuration (:func:`builtin_config_path`). Raises
    :class:`ConfigError` (``<config>: file not found``, listing the built-in names) otherwise.
    """
    path = Path(config)
    if path.exists():
        return path
    if path.suffix == "" and path.as_posix() in builtin_config_names():
        return builtin_config_path(path.as_posix())
    fail(str(path), None, f"file not found (built-in configurations, usable by name: "
                          f"{', '.join(builtin_config_names()) or 'none found'})")
