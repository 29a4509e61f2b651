"""The validation kit: one check per kind of value, one message per kind of mistake.

Every check takes the value, ``source`` (where it came from: a path, ``--set``, ``ROS
parameter``) and ``key`` (the config key, ``method.kappa``), and returns the checked value or raises
:class:`~mb_estimation.config.schema.ConfigError` as ``"<source>: <key>: <message>"``. Checks
that need more (a minimum, a list of choices) are made by :func:`at_least` and :func:`one_of`,
so that every check of a field table (:func:`read_section`) has the same signature.
Pure Python: no rigs, no YAML.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn

from mb_estimation.config.schema import QUATERNION_TOLERANCE, REFINEMENT_MODES, ConfigError

#: ``check(value, source, key) -> checked value``
Check = Callable[[Any, str, str], Any]


def fail(source: str, key: str | None, message: str) -> NoReturn:
    """Raise the :class:`ConfigError` ``"<source>: <key>: <message>"`` (no key: no key part)."""
    raise ConfigError(f"{source}: {key}: {message}" if key else f"{source}: {message}")


def fmt(value: Any) -> str:
    """Format a value for a message: floats shortest-exact, strings quoted."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def describe(value: Any) -> str:
    """Say what a wrongly typed value is, for 'expected X, got Y'."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return fmt(float(value))
    return f"a {type(value).__name__}"


def suggest(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest candidate, or ``""``."""
    def plain(text) -> str:  # "Jazz" is J_Azz, not J_Bzz
        return str(text).lower().replace("_", "")

    by_plain = {plain(candidate): candidate for candidate in candidates}
    close = difflib.get_close_matches(plain(name), list(by_plain), n=1, cutoff=0.6)
    return f"; did you mean {by_plain[close[0]]!r}?" if close else ""


def is_number(value: Any) -> bool:
    """A real number that is not a boolean."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# Checks: check(value, source, key)


def boolean(value: Any, source: str, key: str | None) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        fail(source, key, f"expected true or false, got {describe(value)}")
    return value


def number(value: Any, source: str, key: str | None, *, allow_infinite: bool = False) -> float:
    """A finite number (``allow_infinite``: or ±inf) as a float."""
    if not is_number(value):
        fail(source, key, f"expected a number, got {describe(value)}")
    result = float(value)
    if math.isnan(result) or (math.isinf(result) and not allow_infinite):
        fail(source, key, f"expected a finite number, got {fmt(result)}")
    return result


def positive(value: Any, source: str, key: str | None) -> float:
    """A finite number > 0."""
    result = number(value, source, key)
    if result <= 0.0:
        fail(source, key, f"must be positive, got {fmt(result)}")
    return result


def non_negative(value: Any, source: str, key: str | None) -> float:
    """A finite number >= 0."""
    result = number(value, source, key)
    if result < 0.0:
        fail(source, key, f"must not be negative, got {fmt(result)}")
    return result


def fraction(value: Any, source: str, key: str | None) -> float:
    """A number in (0, 1]."""
    result = positive(value, source, key)
    if result > 1.0:
        fail(source, key, f"expected a number in (0, 1], got {value!r}")
    return result


def integer(value: Any, source: str, key: str | None, *, minimum: int) -> int:
    """An integer (``3`` or ``3.0``) >= ``minimum``."""
    if is_number(value) and float(value).is_integer():
        result = int(value)
        if result < minimum:
            fail(source, key, f"must be an integer >= {minimum}, got {result}")
        return result
    fail(source, key, f"expected an integer >= {minimum}, got {describe(value)}")


def string(value: Any, source: str, key: str | None, *, strip: bool = True) -> str:
    """A non-empty string, stripped of surrounding white space unless ``strip`` is false."""
    if not isinstance(value, str) or not value.strip():
        fail(source, key, f"expected a non-empty string, got {describe(value)}")
    return value.strip() if strip else value


def verbatim_string(value: Any, source: str, key: str | None) -> str:
    """A non-empty string, kept as given (names and paths of the node section)."""
    return string(value, source, key, strip=False)


def choice(value: Any, choices: Sequence[str], source: str, key: str | None, what: str) -> str:
    """One of ``choices`` (``what`` names the kind of thing in the message)."""
    if not isinstance(value, str) or value not in choices:
        shown = repr(value) if isinstance(value, str) else describe(value)
        hint = suggest(value, choices) if isinstance(value, str) else ""
        fail(source, key, f"unknown {what} {shown}{hint} (choose one of {', '.join(choices)})")
    return value


def refinement_mode(value: Any, source: str, key: str | None) -> str:
    """``auto``, ``on`` or ``off``; a YAML boolean (``true``, and ``on`` as YAML reads it) too."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return choice(value, REFINEMENT_MODES, source, key, "refinement mode")


def mapping(value: Any, source: str, key: str | None, what: str = "a mapping") -> Mapping:
    """A mapping (null: an empty one)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        fail(source, key, f"expected {what}, got {describe(value)}")
    return value


def check_keys(raw: Mapping, allowed: Sequence[str], source: str, prefix: str | None) -> None:
    """Every key of ``raw`` is one of ``allowed`` (``prefix``: the section, None: top level)."""
    for name in raw:
        if name not in allowed:
            key = f"{prefix}.{name}" if prefix else None
            what = "top-level key" if prefix is None else "key"
            fail(source, key, f"unknown {what} {str(name)!r}{suggest(name, allowed)} "
                              f"(allowed: {', '.join(allowed)})")


def quaternion(value: Any, source: str, key: str) -> tuple[float, float, float, float]:
    """A unit quaternion ``[w, x, y, z]`` (norm 1 within the tolerance), renormalised exactly."""
    expected = "expected a unit quaternion [w, x, y, z] (4 numbers)"
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        if hasattr(value, "tolist"):  # numpy array
            return quaternion(value.tolist(), source, key)
        fail(source, key, f"{expected}, got {describe(value)}")
    if len(value) != 4:
        fail(source, key, f"{expected}, got {describe(value)}")
    q = [number(x, source, f"{key}[{i}]") for i, x in enumerate(value)]
    norm = math.sqrt(sum(x * x for x in q))
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        hint = ""
        if norm > 0.0:
            hint = "; normalised it reads [" + ", ".join(f"{x / norm:.9g}" for x in q) + "]"
        fail(source, key, f"not a unit quaternion: its norm is {norm:.9g} (must be 1 within "
                          f"{QUATERNION_TOLERANCE:g}){hint}")
    w, x, y, z = (c / norm for c in q)
    return (w, x, y, z)


# --------------------------------------------------------------------------------------------
# Checks made to measure, and the field-table reader


def at_least(minimum: int) -> Check:
    """The check of an integer >= ``minimum``."""
    def check(value: Any, source: str, key: str) -> int:
        return integer(value, source, key, minimum=minimum)
    return check


def one_of(choices: Sequence[str], what: str, normalise: Callable[[str], str] | None = None
           ) -> Check:
    """The check of one of ``choices``; ``normalise`` rewrites a (non-empty) string first."""
    def check(value: Any, source: str, key: str) -> str:
        if normalise is not None:
            value = normalise(string(value, source, key))
        return choice(value, choices, source, key, what)
    return check


def read_section(raw: Any, source: str, section: str, fields: Mapping[str, Check],
                 defaults: Any) -> dict[str, Any]:
    """The values of a settings section, by its field table ``{key: check}``.

    ``raw`` must be a mapping (null: empty) of keys of ``fields``; a key that is missing or null
    takes its value on ``defaults``, the others are checked as ``section.key``.
    """
    raw = mapping(raw, source, section)
    check_keys(raw, tuple(fields), source, section)
    return {name: getattr(defaults, name) if raw.get(name) is None
            else check(raw[name], source, f"{section}.{name}")
            for name, check in fields.items()}
