"""What the data determine: each free parameter, and the combinations of them (paper §3.7).

From a fit's linearised covariance (3.31): a scalar parameter is *determined* when its
standard deviation is at most half its value, *not determined* otherwise, and *at its bound*
when the fit ended on the box (the covariance then says nothing about it: the data asked for a
value beyond the bound). Beyond single parameters, the covariance of the parameters' logarithms
shows the directions the data leave open: when K, J_Azz and b1 can grow together at little
cost (a rig whose only torque scale is the input gain), that direction has a large relative
standard deviation while the ratios J_Azz/K and b1/K stay sharp. :func:`identifiability` names
both: the undetermined combinations and the ratios that are determined.

Pure NumPy: no I/O, no JAX.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: A scalar whose standard deviation exceeds this fraction of its value is not determined.
NOT_DETERMINED_RELATIVE_STD = 0.5
#: A parameter takes part in an undetermined combination when its weight in the direction
#: (a unit vector in the logarithms) is at least this.
COMBINATION_WEIGHT = 0.25
#: A determined combination whose power is this close to ±1 is a ratio (a product).
WHOLE_POWER = 0.05

DETERMINED = "determined"
NOT_DETERMINED = "not determined"
AT_LOWER_BOUND = "at its lower bound"
AT_UPPER_BOUND = "at its upper bound"


@dataclass(frozen=True)
class ParameterStanding:
    """How well the data determine one free parameter.

    ``status``: :data:`DETERMINED`, :data:`NOT_DETERMINED`, :data:`AT_LOWER_BOUND` or
    :data:`AT_UPPER_BOUND`; ``relative_std``: std / |value| (``inf`` for a value of 0; for a
    quaternion the largest of its observable directions' std [rad]).
    """

    name: str
    status: str
    relative_std: float

    @property
    def determined(self) -> bool:
        return self.status == DETERMINED


@dataclass(frozen=True)
class Combination:
    """A direction in the parameters' logarithms that the data leave open.

    Moving every ``names[i]`` by the factor ``exp(s * weights[i])`` changes the fit by one
    standard deviation at ``s = relative_std``: e.g. weights (1, 1) on (J_Azz, K) with
    ``relative_std`` 0.8 means J_Azz and K grow and shrink together within ±80 %.
    """

    names: tuple[str, ...]
    weights: tuple[float, ...]
    relative_std: float
    shown: tuple[str, ...] = ()  # each name as the data see it (:func:`identifiability`)

    def __str__(self) -> str:
        shown = self.shown or self.names
        together = [name for name, w in zip(shown, self.weights, strict=True) if w > 0]
        against = [name for name, w in zip(shown, self.weights, strict=True) if w < 0]
        text = _joined(together) + (" scaled together" if len(together) > 1 else "")
        if against:
            text += f" against {_joined(against)}"
        spread = (f"±{100 * self.relative_std:.0f} %" if np.isfinite(self.relative_std)
                  else "without limit")
        return f"{text} ({spread})"


@dataclass(frozen=True)
class Ratio:
    """A combination the data determine: ``numerator / denominator**power`` (power 1: a ratio)."""

    numerator: str
    denominator: str
    power: float
    value: float
    relative_std: float
    shown: tuple[str, str] = ()  # numerator and denominator as the data see them

    @property
    def expression(self) -> str:
        """The combination in symbols, e.g. ``b1/K``."""
        numerator, denominator = self.shown or (self.numerator, self.denominator)
        if self.power == 1.0:
            return f"{numerator}/{denominator}"
        if self.power == -1.0:
            return f"{numerator}·{denominator}"
        return f"{numerator}/{denominator}^{self.power:.2g}"

    def __str__(self) -> str:
        return f"{self.expression} = {self.value:.4g} (±{100 * self.relative_std:.2g} %)"


@dataclass(frozen=True)
class Identifiability:
    """Each free parameter's standing, the undetermined combinations, the determined ratios."""

    parameters: tuple[ParameterStanding, ...]
    undetermined: tuple[Combination, ...] = ()
    determined_ratios: tuple[Ratio, ...] = ()

    def standing(self, name: str) -> ParameterStanding:
        return next(p for p in self.parameters if p.name == name)

    def with_status(self, *statuses: str) -> tuple[str, ...]:
        """The names of the parameters with one of ``statuses``."""
        return tuple(p.name for p in self.parameters if p.status in statuses)


def _joined(names: Sequence[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def at_bound(value: float, bound: float) -> bool:
    """Whether ``value`` sits on ``bound`` (to round-off: the box step lands exactly on it)."""
    if not np.isfinite(bound):
        return False
    return abs(value - bound) <= 1e-9 * max(abs(value), abs(bound)) + 1e-300


def identifiability(names: Sequence[str], values: Mapping[str, np.ndarray],
                    std: Mapping[str, np.ndarray], covariance: np.ndarray,
                    lower: Mapping[str, float], upper: Mapping[str, float],
                    bound: tuple[Sequence[str], np.ndarray, np.ndarray] | None = None,
                    offsets: Mapping[str, float] | None = None) -> Identifiability:
    """What the data determine of the free parameters ``names`` (module docstring).

    ``values``/``std``: per name (a quaternion: 4 values, 3 tangent std); ``covariance``:
    ``[p, p]`` in the tangent order of ``names`` (1 row per scalar, 3 per quaternion), ``inf``
    or ``nan`` where undetermined; ``lower``/``upper``: the box of the scalar parameters.
    ``bound``: ``(scalar names, covariance, information)`` of the Cramér–Rao bound where it
    was computed: what any estimator could reach on these data. A parameter it leaves open is
    not determined whatever the fit's own std says (a joint fit's force-noise weight can pin a
    scale the data leave open), and the combinations are read from its information (which
    still has directions where the data hold nothing at all). ``offsets``: fixed
    values a parameter only acts in sum with (J_Azz in the arm's inertia about the motor
    axis, ``J_shaft + J_Azz + m_A l1² + …``): its combinations are read in the logarithm of
    that sum, shown as ``(J_Azz + offset)``, so that a torque scale the data leave open is
    named as the arm's whole inertia, K and b1 scaled together.
    """
    offsets = {name: float(v) for name, v in (offsets or {}).items() if v}
    bound_std = {}
    if bound is not None:
        bound_names, bound_covariance, _ = bound
        bound_std = {name: float(np.sqrt(bound_covariance[i, i]))
                     for i, name in enumerate(bound_names)}
    standings, rows, index = [], [], 0
    for name in names:
        value = np.ravel(np.asarray(values[name], dtype=np.float64))
        spread = np.ravel(np.asarray(std[name], dtype=np.float64))
        if value.size == 4:  # a quaternion: its observable directions
            observable = spread[np.isfinite(spread)]
            worst = float(np.max(observable)) if observable.size else np.inf
            status = DETERMINED if observable.size >= 2 and worst <= 0.1 else NOT_DETERMINED
            standings.append(ParameterStanding(name, status, worst))
            index += 3
            continue
        x, s = float(value[0]), max(float(spread[0]), bound_std.get(name, 0.0))
        relative = abs(s / x) if x != 0 and np.isfinite(s) else np.inf
        if at_bound(x, lower.get(name, -np.inf)):
            status = AT_LOWER_BOUND
        elif at_bound(x, upper.get(name, np.inf)):
            status = AT_UPPER_BOUND
        else:
            status = DETERMINED if relative <= NOT_DETERMINED_RELATIVE_STD else NOT_DETERMINED
            if x != 0:
                rows.append((name, index, x + offsets.get(name, 0.0)))
        standings.append(ParameterStanding(name, status, relative))
        index += 1
    if bound is not None:
        at = {name: i for i, name in enumerate(bound[0])}
        rows = [(name, at[name], x) for name, _, x in rows if name in at]
        spectrum = _log_spectrum_of_information(rows, np.asarray(bound[2], dtype=np.float64))
    else:
        covariance = np.asarray(covariance, dtype=np.float64)
        rows = [row for row in rows if np.isfinite(covariance[row[1], row[1]])]
        spectrum = _log_spectrum_of_covariance(rows, covariance)
    shown = {name: f"({name} + {offset:.3g})" for name, offset in offsets.items()}
    undetermined, ratios = _log_directions(rows, spectrum, shown)
    return Identifiability(tuple(standings), undetermined, ratios)


def _log_spectrum_of_covariance(rows, covariance):
    """Variances and directions ``(v [k], V [k, k])`` of the rows' logarithms; None if unknown."""
    if len(rows) < 2:
        return None
    at = [i for _, i, _ in rows]
    scale = np.array([abs(x) for _, _, x in rows])
    block = covariance[np.ix_(at, at)]
    if not np.all(np.isfinite(block)):
        return None
    relative = block / np.outer(scale, scale)  # the covariance of log|x|
    variances, vectors = np.linalg.eigh(0.5 * (relative + relative.T))
    return np.maximum(variances, 0.0), vectors


def _log_spectrum_of_information(rows, information):
    """:func:`_log_spectrum_of_covariance` from an information matrix.

    Its sub-block on the rows (the other parameters held where they are): a direction it holds
    nothing of has an infinite variance, and still a direction, where the covariance is ``inf``
    throughout.
    """
    if len(rows) < 2:
        return None
    at = [i for _, i, _ in rows]
    scale = np.array([abs(x) for _, _, x in rows])
    block = information[np.ix_(at, at)] * np.outer(scale, scale)  # information on log|x|
    if not np.all(np.isfinite(block)):
        return None
    precisions, vectors = np.linalg.eigh(0.5 * (block + block.T))
    with np.errstate(divide="ignore"):
        variances = np.where(precisions > 0.0, 1.0 / np.maximum(precisions, 1e-300), np.inf)
    return variances, vectors


def _log_variance(weights, spectrum) -> float:
    """The variance of ``Σ wᵢ log|xᵢ|`` (``inf`` where it leans on an open direction)."""
    variances, vectors = spectrum
    loads = vectors.T @ weights
    finite = np.isfinite(variances)
    if np.any(np.abs(loads[~finite]) > 1e-8 * np.linalg.norm(weights)):
        return np.inf
    return float(np.sum(loads[finite] ** 2 * variances[finite]))


def _log_directions(rows, spectrum, shown):
    """The undetermined combinations and determined ratios among the scalar ``rows``.

    ``rows``: (name, index, value); ``spectrum``: the variances and directions of their
    logarithms (None: nothing to read); ``shown``: how a name is written, where not as itself.
    """
    if spectrum is None:
        return (), ()
    variances, vectors = spectrum
    names = [name for name, _, _ in rows]
    combinations, ratios = [], []
    for k in np.argsort(variances)[::-1]:
        spread = float(np.sqrt(variances[k]))
        if spread <= NOT_DETERMINED_RELATIVE_STD:
            break
        direction = vectors[:, k]
        members = [i for i in range(len(names)) if abs(direction[i]) >= COMBINATION_WEIGHT]
        if len(members) < 2:
            continue
        reference = max(members, key=lambda i: abs(direction[i]))
        sign = np.sign(direction[reference])
        weights = direction[members] * sign / abs(direction[reference])
        combinations.append(Combination(tuple(names[i] for i in members),
                                        tuple(float(w) for w in weights), spread,
                                        tuple(shown.get(names[i], names[i]) for i in members)))
        for i in members:
            if i == reference:
                continue
            power = float(direction[i] / direction[reference])
            for whole in (1.0, -1.0):  # shown as a ratio or a product: computed as one
                if abs(power - whole) < WHOLE_POWER:
                    power = whole
            ratio = np.zeros(len(names))
            ratio[i], ratio[reference] = 1.0, -power
            ratio_std = float(np.sqrt(_log_variance(ratio, spectrum)))
            if ratio_std <= NOT_DETERMINED_RELATIVE_STD:
                value = rows[i][2] / abs(rows[reference][2]) ** power
                ratios.append(Ratio(names[i], names[reference], power, value, ratio_std,
                                    (shown.get(names[i], names[i]),
                                     shown.get(names[reference], names[reference]))))
    return tuple(combinations), tuple(ratios)
