"""Fusion of the per-window parameter estimates of the online node, and their persistence.

One module on purpose: the estimate (:class:`ParameterEstimate`), its fusion and
its file share one set of checks (finite values, unit quaternions, a covariance in tangent
order) and the conventions stated here (tangent order, ``inf`` for an undetermined direction);
a tenth of it is this statement. Split off, the file would import the estimate back from here.

Every accepted 5 s window yields an estimate of the free parameters: a value per name (shape
``(1,)`` for a scalar, a unit quaternion ``[w, x, y, z]`` of shape ``(4,)`` for ``tilt``) and a
covariance ``[p, p]`` in *tangent order* (one row per scalar, three per quaternion, in the order
of :attr:`ParameterEstimate.names`). The quaternion tangent is the one of the estimator
(:func:`mb_estimation.estimation.parameters.parameters_boxplus`, :mod:`mb_estimation.lie`): the
world-frame rotation vector ψ with ``e ⊞ ψ = exp(ψ) ⋆ e`` and ``a ⊟ b = log(a ⋆ b*)``.

:func:`fuse` combines estimates in information form::

    Λ = Λ_prev + Λ_new
    x = x_prev ⊞ Λ⁺ Λ_new (x_new ⊟ x_prev)

with ``Λ`` the information (inverse covariance). For scalars this is exactly the
information-weighted mean; for a quaternion it is the same update linearised at the previous
estimate (first order in the difference of the two, which is small for windows of one rig; the
new window's covariance, given in the tangent at its own value, is used unchanged at
``x_prev``). Every window counts fully (std ∝ 1/sqrt(n) for i.i.d. windows): the estimate of a
parameter that stays put. The node tracks parameters that drift with :mod:`.drift`, which
builds on these conventions.

Infinite variance (a direction the data does not determine). The estimator
(:func:`mb_estimation.estimation.covariance.parameter_covariance`) marks an undetermined tangent
entry with ``inf`` on its diagonal and zeros elsewhere in its row and column. Conversion to
information (:func:`information_from_covariance`):

- every tangent entry whose covariance row holds a non-finite value, or whose variance is 0,
  gets zero information (its row and column of ``Λ`` are 0);
- the rest of the covariance is inverted as a pseudo-inverse after scaling to unit diagonal:
  eigen-directions of the correlation matrix below
  :data:`mb_estimation.pseudo_inverse.SINGULAR_THRESHOLD` times the largest eigenvalue carry
  zero information. A finite covariance that is singular in some direction is
  therefore read as "no information there" (the pseudo-inverse convention), never as "known
  exactly": an estimator never reports an exactly zero variance for a determined direction.

The way back (:func:`covariance_from_information`) mirrors the estimator: the pseudo-inverse of
the scaled information, and ``inf`` variance (zeros elsewhere in the row and column) for every
tangent entry the information leaves undetermined, wholly or in part (loading above
``LOADING_THRESHOLD`` on its null space). A combination of undetermined entries that *is*
determined (say ``a + b`` while ``a`` and ``b`` are not) is therefore forgotten when stored as a
covariance: conservative, never inventing information. Where neither estimate has information the
step is zero and the previous value is kept; no non-finite number ever enters a fused value.

Persistence: :func:`save_estimate` writes YAML atomically (temporary file in the same folder,
fsync, ``os.replace``); infinite variances appear as ``.inf``. The document ends with the YAML
end marker ``...``, so that :func:`load_estimate` recognises a truncated file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from mb_estimation.config import QUATERNION_TOLERANCE  # |tilt| − 1 allowed, as in configs
from mb_estimation.io.files import write_text_atomically
from mb_estimation.lie import quat_boxminus, quat_boxplus
from mb_estimation.pseudo_inverse import (
    LOADING_THRESHOLD,
    informed,
    mark_undetermined,
    scaled_pseudo_inverse,
)
from mb_estimation.rigs.parameters import tangent_labels, tangent_size, tangent_slices

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "LOADING_THRESHOLD",
    "QUATERNION_TOLERANCE",
    "ParameterEstimate",
    "check_numbers",
    "covariance_from_information",
    "fuse",
    "information_from_covariance",
    "information_pseudo_inverse",
    "load_estimate",
    "read_estimate_document",
    "save_estimate",
    "tangent_difference",
    "with_step",
]

# Negative eigenvalues of a scaled covariance beyond this (relative to the largest) are an error
# rather than round-off.
NEGATIVE_TOLERANCE = 1e-8

FORMAT = "mb_estimation/parameter_estimate"
FORMAT_VERSION = 1


# --- the estimate ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ParameterEstimate:
    """Estimate of the free parameters: values by name and a covariance in tangent order.

    Construction checks the structure (names, value shapes, covariance shape) and stores
    read-only float64 copies; the numbers themselves are checked by :func:`fuse` and
    :func:`save_estimate`. ``eq=False``: arrays have no single truth value, compare fields.
    """

    names: tuple[str, ...]  # free parameter names, in order
    values: dict[str, np.ndarray]  # by name, shape (1,) (scalar) or (4,) (quaternion [w,x,y,z])
    covariance: np.ndarray  # [p, p], tangent order (1 row per scalar, 3 per quaternion)
    windows: int = 1  # how many windows went into it

    def __post_init__(self):
        names = tuple(self.names)
        if not all(isinstance(name, str) for name in names):
            raise ValueError(f"parameter names must be strings, got {names!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in {names!r}")
        if set(self.values) != set(names):
            raise ValueError(f"values are given for {sorted(self.values)}, "
                             f"but the names are {list(names)}")
        values = {}
        for name in names:
            value = np.array(self.values[name], dtype=np.float64).reshape(-1)
            if value.shape not in ((1,), (4,)):
                raise ValueError(f"value of {name!r} must have shape (1,) or (4,) "
                                 f"(quaternion), got {np.shape(self.values[name])}")
            value.flags.writeable = False
            values[name] = value
        size = sum(tangent_size(_kind(value)) for value in values.values())
        covariance = np.array(self.covariance, dtype=np.float64)
        if covariance.shape != (size, size):
            raise ValueError(f"covariance must have shape ({size}, {size}) for {list(names)}, "
                             f"got {covariance.shape}")
        covariance.flags.writeable = False
        if isinstance(self.windows, bool) or int(self.windows) != self.windows \
                or self.windows < 1:
            raise ValueError(f"windows must be a positive integer, got {self.windows!r}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "covariance", covariance)
        object.__setattr__(self, "windows", int(self.windows))

    @property
    def kinds(self) -> tuple[str, ...]:
        """``"scalar"`` or ``"quaternion"`` per name."""
        return tuple(_kind(self.values[name]) for name in self.names)

    @property
    def slices(self) -> dict[str, slice]:
        """Each parameter's rows of the covariance (1 for a scalar, 3 for a quaternion)."""
        return tangent_slices(self.names, self.kinds)

    @property
    def labels(self) -> tuple[str, ...]:
        """One label per covariance row: the name, ``name_rx/ry/rz`` for a quaternion."""
        return tangent_labels(self.names, self.kinds)

    @property
    def std(self) -> dict[str, np.ndarray]:
        """Standard deviations by name (``(1,)``, or ``(3,)`` [rad] for a quaternion's tangent).

        ``inf`` where the estimate has no information.
        """
        diagonal = np.diagonal(self.covariance)
        return {name: np.sqrt(np.clip(diagonal[s], 0.0, None)) for name, s in self.slices.items()}

    @property
    def information(self) -> np.ndarray:
        """Information matrix ``[p, p]`` (:func:`information_from_covariance`)."""
        return information_from_covariance(self.covariance)


def _kind(value: np.ndarray) -> str:
    """``"quaternion"`` for a value of 4 numbers, else ``"scalar"``."""
    return "quaternion" if len(value) == 4 else "scalar"


def check_numbers(estimate: ParameterEstimate, role: str) -> None:
    """Raise ValueError unless the values are finite (unit quaternions) and no variance is NaN."""
    for name, kind in zip(estimate.names, estimate.kinds, strict=True):
        value = estimate.values[name]
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{role} estimate has a non-finite value of {name!r}: {value}")
        if kind == "quaternion" and abs(np.linalg.norm(value) - 1.0) > QUATERNION_TOLERANCE:
            raise ValueError(f"{role} estimate: {name!r} is not a unit quaternion "
                             f"(norm {np.linalg.norm(value):.9g})")
    if np.any(np.isnan(estimate.covariance)):
        raise ValueError(f"{role} estimate has NaN in its covariance")
    if np.any(np.isneginf(estimate.covariance)):
        raise ValueError(f"{role} estimate has -inf in its covariance")


# --- covariance <-> information -----------------------------------------------------------------


def _scaled_pseudo_inverse(matrix: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-inverse of a symmetric PSD matrix with positive diagonal, and its null loading.

    Scaled to unit diagonal first (:func:`mb_estimation.pseudo_inverse.scaled_pseudo_inverse`);
    a clearly negative eigenvalue is an error rather than round-off.
    """
    inverse, eigenvalues, loading = scaled_pseudo_inverse(matrix, np.sqrt(np.diagonal(matrix)))
    largest = max(float(eigenvalues.max()), 0.0)
    if eigenvalues.min() < -NEGATIVE_TOLERANCE * largest:
        raise ValueError(f"{what} is not positive semidefinite "
                         f"(scaled eigenvalue {eigenvalues.min():.3g})")
    return inverse, loading


def information_from_covariance(covariance: np.ndarray) -> np.ndarray:
    """Information ``Λ`` of a covariance; zero information where the variance is infinite.

    A tangent entry with a non-finite value in its covariance row, or a zero variance, gets a
    zero row and column; the remaining block is pseudo-inverted (zero information along its
    singular directions). NaN is an error.
    """
    covariance = np.asarray(covariance, dtype=np.float64)
    if np.any(np.isnan(covariance)):
        raise ValueError("covariance holds NaN")
    covariance = np.where(np.isfinite(covariance), covariance, np.inf)
    size = len(covariance)
    finite_row = np.all(np.isfinite(covariance), axis=1) & np.all(np.isfinite(covariance), axis=0)
    diagonal = np.diagonal(covariance)
    if np.any(finite_row & (diagonal < 0.0)):
        raise ValueError(f"covariance has a negative variance: {diagonal[diagonal < 0.0]}")
    determined = finite_row & (diagonal > 0.0)
    information = np.zeros((size, size))
    if determined.any():
        block = covariance[np.ix_(determined, determined)]
        inverse, _ = _scaled_pseudo_inverse(0.5 * (block + block.T), "covariance")
        information[np.ix_(determined, determined)] = inverse
    return 0.5 * (information + information.T)


def covariance_from_information(information: np.ndarray) -> np.ndarray:
    """Covariance of an information matrix; ``inf`` variance where it leaves an entry undetermined.

    Undetermined: zero information on the diagonal, or a loading above ``LOADING_THRESHOLD`` on
    the null space of the (scaled) information. Such rows and columns hold ``inf`` on the
    diagonal and 0 elsewhere, the estimator's convention.
    """
    covariance, determined = information_pseudo_inverse(information)
    mark_undetermined(covariance, ~determined)
    return 0.5 * (covariance + covariance.T)


def information_pseudo_inverse(information: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Finite pseudo-inverse of an information matrix (0 where it has no information).

    Also returns which tangent entries it determines: information on the diagonal beyond the
    round-off of a zero (:func:`~mb_estimation.pseudo_inverse.informed`) and a loading of at
    most ``LOADING_THRESHOLD`` on the null space.
    """
    information = np.asarray(information, dtype=np.float64)
    size = len(information)
    out = np.zeros((size, size))
    determined = informed(np.diagonal(information))
    if determined.any():
        block = information[np.ix_(determined, determined)]
        inverse, loading = _scaled_pseudo_inverse(0.5 * (block + block.T), "information")
        out[np.ix_(determined, determined)] = inverse
        determined[np.flatnonzero(determined)[loading > LOADING_THRESHOLD]] = False
    return out, determined


def tangent_difference(estimate: ParameterEstimate, new: ParameterEstimate) -> np.ndarray:
    """``new ⊟ estimate`` in tangent order."""
    parts = []
    for name, kind in zip(estimate.names, estimate.kinds, strict=True):
        if kind == "quaternion":
            parts.append(quat_boxminus(new.values[name], estimate.values[name]))
        else:
            parts.append(new.values[name] - estimate.values[name])
    return np.concatenate(parts) if parts else np.zeros(0)


def with_step(estimate: ParameterEstimate, step: np.ndarray) -> dict[str, np.ndarray]:
    """Values of ``estimate ⊞ step``."""
    values = {}
    for (name, s), kind in zip(estimate.slices.items(), estimate.kinds, strict=True):
        if kind == "quaternion":
            values[name] = quat_boxplus(estimate.values[name], step[s])
        else:
            values[name] = estimate.values[name] + step[s]
    return values


def fuse(previous: ParameterEstimate | None, new: ParameterEstimate) -> ParameterEstimate:
    """Information-weighted combination of the fused estimate so far and a new window's.

    ``Λ = Λ_prev + Λ_new`` and ``x = x_prev ⊞ Λ⁺ Λ_new (x_new ⊟ x_prev)`` (module docstring).
    The result's covariance is ``Λ⁻¹`` with ``inf`` where ``Λ`` leaves an entry undetermined;
    where neither estimate has information the previous value is kept. With ``previous=None``
    the result is ``new`` with its covariance normalised to that convention.

    Raises ValueError when the names (or parameter kinds) differ, or when either estimate has a
    non-finite value, a non-unit quaternion or NaN in its covariance.
    """
    check_numbers(new, "new")
    new_information = new.information
    if previous is None:
        return ParameterEstimate(new.names, dict(new.values),
                                 covariance_from_information(new_information), new.windows)
    check_numbers(previous, "previous")
    if previous.names != new.names:
        raise ValueError(f"parameter names differ: fused estimate has {list(previous.names)}, "
                         f"new window has {list(new.names)}")
    if previous.kinds != new.kinds:
        raise ValueError(f"parameter kinds differ: {previous.kinds} vs {new.kinds}")

    information = previous.information + new_information
    information = 0.5 * (information + information.T)
    difference = tangent_difference(previous, new)
    step = information_pseudo_inverse(information)[0] @ (new_information @ difference)
    values = with_step(previous, step)
    if not all(np.all(np.isfinite(v)) for v in values.values()):  # cannot happen; guard anyway
        raise ValueError("fusion produced a non-finite value")
    return ParameterEstimate(previous.names, values, covariance_from_information(information),
                             previous.windows + new.windows)


# --- persistence --------------------------------------------------------------------------------


def _estimate_document(estimate: ParameterEstimate) -> dict:
    """The YAML document of an estimate (:func:`save_estimate` writes it)."""
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "windows": estimate.windows,
        "names": list(estimate.names),
        "values": {name: [float(x) for x in estimate.values[name]] for name in estimate.names},
        "covariance": [[float(x) for x in row] for row in estimate.covariance],
    }


def save_estimate(path: Path, estimate: ParameterEstimate, sections: dict | None = None
                  ) -> None:
    """Write ``estimate`` to ``path`` as YAML, atomically, with further ``sections`` after it.

    The text goes to a temporary file in the same folder, is flushed to disk, then replaces
    ``path`` with ``os.replace``: a reader sees the old file or the new one, never a partial one,
    and a failure leaves the old file as it was (and no temporary file behind). Infinite
    variances are written as ``.inf``; floats round-trip exactly.
    """
    path = Path(path)
    check_numbers(estimate, "saved")
    document = {**_estimate_document(estimate), **(sections or {})}
    write_text_atomically(path, yaml.safe_dump(document, sort_keys=False, explicit_end=True))


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def load_estimate(path: Path) -> ParameterEstimate | None:
    """Read an estimate written by :func:`save_estimate`; None when ``path`` does not exist.

    Raises ValueError (one line naming the file) when the file is unreadable, truncated (no YAML
    end marker ``...``), not valid YAML, or does not describe a valid estimate.
    """
    read = read_estimate_document(Path(path))
    return None if read is None else read[0]


def read_estimate_document(path: Path) -> tuple[ParameterEstimate, dict] | None:
    """:func:`load_estimate`'s estimate and the whole YAML document it was read from."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot read parameter estimate: {_one_line(error)}") from error
    prefix = f"{path}: corrupt parameter estimate file"
    lines = text.rstrip().splitlines()
    if not lines or lines[-1].strip() != "...":
        raise ValueError(f"{prefix}: truncated (no YAML end marker '...')")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"{prefix}: {_one_line(error)}") from error
    if not isinstance(document, dict):
        raise ValueError(f"{prefix}: expected a mapping, got {type(document).__name__}")
    if document.get("format") != FORMAT or document.get("version") != FORMAT_VERSION:
        raise ValueError(f"{prefix}: expected format {FORMAT!r} version {FORMAT_VERSION}, got "
                         f"{document.get('format')!r} version {document.get('version')!r}")
    missing = [key for key in ("windows", "names", "values", "covariance") if key not in document]
    if missing:
        raise ValueError(f"{prefix}: missing {', '.join(missing)}")
    try:
        names = document["names"]
        values = document["values"]
        if not isinstance(names, list) or not isinstance(values, dict):
            raise ValueError("'names' must be a list and 'values' a mapping")
        estimate = ParameterEstimate(
            names=tuple(names),
            values={name: np.asarray(value, dtype=np.float64) for name, value in values.items()},
            covariance=np.asarray(document["covariance"], dtype=np.float64),
            windows=document["windows"],
        )
        check_numbers(estimate, "stored")
    except (ValueError, TypeError) as error:
        raise ValueError(f"{prefix}: {_one_line(error)}") from error
    return estimate, document
