"""Which driver and sensor terms a rig's recordings support: the candidates and the choice.

A real rig's motor driver and encoders add what the textbook model lacks: an encoder whose zero
is not where the pendulum hangs, dry friction that does not grow with the hinge's load, a
motor torque that ripples with the arm's angle (cogging). Each is a *term*, a group of model
parameters that are zero when it is off (:data:`TERMS`). Whether a rig needs one is a question
for its data: each candidate set of terms is fitted with recordings held out and scored by how
well it predicts the recordings it was not fitted on (:func:`mb_estimation.api.compare_models`).
Here, without I/O: the candidate sets (:func:`candidate_sets`), the score of a held-out
prediction (:func:`held_out_score`) and the choice (:func:`choose`).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mb_estimation.rigs.parameters import (
    DRY_FRICTION_PARAMETERS,
    ENCODER_OFFSET_PARAMETERS,
    RIPPLE_PARAMETERS,
    parameters_in_use,
)

#: The Furuta rig's optional terms: name → the parameters that make it (free when it is on).
#: The arm encoder's offset is left out: the arm's zero changes nothing the model sees unless
#: the ripple is on, whose phase it then duplicates.
TERMS: dict[str, tuple[str, ...]] = {
    "offsets": ("encoder_offset2",),
    "dry": ("coulomb1", "coulomb2"),
    "ripple": ("ripple_cos1", "ripple_sin1"),
}

#: A set with more terms is chosen only where it predicts some held-out recording more than this
#: fraction better than every set with fewer terms: a term must earn its parameters.
SUPPORT_RELATIVE = 0.05


#: Every parameter of each kind of term, as the Furuta model has them (a user may free any of
#: them; :data:`TERMS` holds those a comparison frees).
TERM_KINDS: dict[str, tuple[str, ...]] = {
    "encoder offsets": ENCODER_OFFSET_PARAMETERS["furuta"],
    "dry friction": tuple(itertools.chain(*DRY_FRICTION_PARAMETERS["furuta"])),
    "torque ripple": RIPPLE_PARAMETERS["furuta"],
}


def terms_note(parameters: Mapping[str, object], free: Collection[str],
               ripple_per_revolution: int) -> str | None:
    """One line naming the driver and sensor terms a config turns on; None where none is.

    A term is on where one of its parameters is free or non-zero (:data:`TERM_KINDS`).
    """
    parts = []
    for kind, names in TERM_KINDS.items():
        used = [f"{name} free" if name in free else f"{name} = {float(parameters[name]):g}"
                for name in parameters_in_use(names, parameters, free)]
        if used:
            period = (f" of {ripple_per_revolution} periods per revolution"
                      if kind == "torque ripple" else "")
            parts.append(f"{kind}{period} ({', '.join(used)})")
    return f"driver and sensor terms on: {'; '.join(parts)}" if parts else None


def term_names(text: str | Sequence[str]) -> tuple[str, ...]:
    """The terms named in ``text`` (``"offsets,dry"`` or a list), in :data:`TERMS`' order.

    Raises ValueError naming an unknown term and the known ones.
    """
    names = [name.strip() for name in (text.split(",") if isinstance(text, str) else text)]
    names = [name for name in names if name]
    unknown = [name for name in names if name not in TERMS]
    if unknown or not names:
        problem = f"unknown term {unknown[0]!r}" if unknown else "no term named"
        raise ValueError(f"{problem}; choose from {', '.join(TERMS)}")
    return tuple(name for name in TERMS if name in names)


def candidate_sets(terms: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    """Every subset of ``terms``, the fewest terms first (the empty set: the model as given)."""
    return tuple(subset for size in range(len(terms) + 1)
                 for subset in itertools.combinations(terms, size))


def term_parameters(terms: Sequence[str]) -> tuple[str, ...]:
    """The parameters the terms free, in term order."""
    return tuple(name for term in terms for name in TERMS[term])


def held_out_score(prediction_rms_rad: np.ndarray) -> float:
    """The score of a held-out prediction: the root mean square over joints [rad].

    ``prediction_rms_rad [n_joints]``: the RMS angle error of the predictions from the
    recording's estimated states at their longest lead time. Lower is better.
    """
    return float(np.sqrt(np.mean(np.square(prediction_rms_rad))))


@dataclass(frozen=True)
class Candidate:
    """A set of terms and its held-out scores.

    ``scores [recordings]``: the score of predicting each recording by the fit on the others
    (:func:`held_out_score`) [rad]; ``prediction_rms_rad [recordings, n_joints]`` the RMS per
    joint behind it; ``fitted``: per held-out recording, the terms' parameters as the fit on
    the others gave them.
    """

    terms: tuple[str, ...]
    scores: np.ndarray
    prediction_rms_rad: np.ndarray
    fitted: tuple[dict[str, float], ...] = ()

    @property
    def label(self) -> str:
        return " + ".join(self.terms) if self.terms else "none"

    @property
    def mean_score(self) -> float:
        return float(np.mean(self.scores))


@dataclass(frozen=True)
class Choice:
    """The set of terms the data support, and why."""

    candidate: Candidate
    reason: str


def unused_terms(candidate: Candidate) -> tuple[str, ...]:
    """The candidate's terms whose parameters every fit left at zero (the term stayed off).

    Such a term is not in the fitted model at all: the candidate is the set without it, and a
    difference between their scores is where the two fits ended, not the term's doing.
    """
    return tuple(term for term in candidate.terms if candidate.fitted and all(
        float(fitted.get(name, 0.0)) == 0.0 for fitted in candidate.fitted
        for name in TERMS[term]))


def choose(candidates: Sequence[Candidate], recordings: Sequence[str]) -> Choice:
    """The fewest terms that predict the held-out recordings as well as any set.

    A candidate is *matched* by another with fewer terms when that one scores within
    :data:`SUPPORT_RELATIVE` of it on every held-out recording, or when the terms it has beyond
    the other's stayed at zero in all its fits (:func:`unused_terms`). Of the candidates no
    fewer-term one matches, the one with the best mean score is chosen: a term is kept only
    where the recordings it was not fitted on say it predicts better.
    """
    def matched(candidate: Candidate) -> Candidate | None:
        unused = set(unused_terms(candidate))
        for other in candidates:
            if len(other.terms) < len(candidate.terms) and (np.all(
                    other.scores <= (1.0 + SUPPORT_RELATIVE) * candidate.scores)
                    or set(candidate.terms) - set(other.terms) <= unused):
                return other
        return None

    standing = [candidate for candidate in candidates if matched(candidate) is None]
    chosen = min(standing, key=lambda candidate: candidate.mean_score)
    best = min(candidates, key=lambda candidate: candidate.mean_score)
    larger = [candidate for candidate in candidates
              if set(chosen.terms) < set(candidate.terms)]
    def passed_over(candidate: Candidate) -> str:
        unused = unused_terms(candidate)
        return (f"its fits left {', '.join(unused)} at zero" if unused else
                f"{matched(candidate).label} predicts every held-out recording within "
                f"{SUPPORT_RELATIVE:.0%} of it with fewer terms")

    reason = f"held-out score {chosen.mean_score:.3g} rad"
    if best is not chosen:
        reason += f"; {best.label} scores {best.mean_score:.3g} rad, but {passed_over(best)}"
    elif larger:
        better = [candidate for candidate in larger
                  if np.any((1.0 + SUPPORT_RELATIVE) * candidate.scores < chosen.scores)]
        if not better:
            reason += (f", no set with more terms predicts a held-out recording more than "
                       f"{SUPPORT_RELATIVE:.0%} better")
        for candidate in better:
            worst = int(np.argmax(chosen.scores / candidate.scores))
            reason += (f"; {candidate.label} predicts {recordings[worst]} "
                       f"{chosen.scores[worst] / candidate.scores[worst]:.2f}× better, but "
                       f"{passed_over(candidate)}")
    by_terms = {candidate.terms: candidate for candidate in candidates}
    for term in chosen.terms:
        without = by_terms.get(tuple(name for name in chosen.terms if name != term))
        if without is not None:
            worst = int(np.argmax(without.scores / chosen.scores))
            reason += (f"; without {term}, {recordings[worst]} is predicted "
                       f"{without.scores[worst] / chosen.scores[worst]:.2f}× worse")
    return Choice(chosen, reason)


def scores_table(candidates: Sequence[Candidate], recordings: Sequence[str]
                 ) -> list[dict[str, object]]:
    """The candidates as plain rows (for YAML and printing): terms, scores per recording."""
    def held_out(index: int) -> dict[str, object]:
        row = {"score_rad": float(candidate.scores[index]),
               "prediction_rms_rad": [float(v) for v in candidate.prediction_rms_rad[index]]}
        if candidate.fitted:
            row["fitted_on_the_others"] = dict(candidate.fitted[index])
        return row

    rows = []
    for candidate in candidates:
        rows.append({"terms": list(candidate.terms), "mean_score_rad": candidate.mean_score,
                     "held_out": {name: held_out(index)
                                  for index, name in enumerate(recordings)}})
    return rows

