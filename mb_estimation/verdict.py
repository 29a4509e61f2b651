"""The closing verdict of a calibration: can the values be trusted, and if not, what to do.

One finding per reason a value is not an estimate of the rig — at a bound, not determined
(alone or only in combination with others), still moving with the estimation step, a model
that does not predict the recordings, an input acting late, recordings that disagree (their
fits, or their steady drives: no one input gain fits them), a fit that did not converge — each
with the next step that applies to this rig as the config declares it (its hinges, which
parameters are free, which are fixed). Pure logic over the fit's results: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mb_estimation.assess import PREDICTION_NOISE_RATIO, Assessment, predicts_within_the_noise
from mb_estimation.estimation import EstimationResult
from mb_estimation.estimation.identifiability import (
    AT_LOWER_BOUND,
    AT_UPPER_BOUND,
    NOT_DETERMINED,
)
from mb_estimation.estimation.input_delay import DELAY_RANGE_S
from mb_estimation.model_terms import TERMS
from mb_estimation.rigs.parameters import DRY_FRICTION_PARAMETERS
from mb_estimation.setup import Setup

#: Inertias about axes a Furuta arm never turns about: no recording shows them.
_NEVER_EXCITED = ("J_Axx", "J_Ayy")
#: What to record so that a parameter shows, by the first letters of its name (Furuta and
#: pendulum rigs); the generic advice otherwise.
_MOTION_THAT_SHOWS = (
    (("J_B", "b2", "mu2", "r2"), "the pendulum swinging freely with the arm held still"),
    (("J_A", "J_shaft", "K", "b1", "mu1", "r1"), "the arm stepping from rest, the pendulum "
                                                  "swinging as it goes"),
    (("J_P", "b", "r_mu", "zeta"), "the pendulum swinging freely, from a large angle down "
                                   "to rest"),
)
_INERTIAS_OF_THE_ARM = ("J_Azz", "J_shaft")
#: A fit's std this many times the Cramér–Rao bound or more is worth a word.
PRECISION_RATIO = 2.0
#: A fit's std below this fraction of the bound is worth a word too: no fit of the model
#: reaches below the bound, and the kept fits' std lie within a few per cent above it.
BELOW_BOUND_RATIO = 0.8


@dataclass(frozen=True)
class Finding:
    """One reason the values are not to be trusted as they are, and what to do about it."""

    problem: str
    action: str


@dataclass(frozen=True)
class Verdict:
    """Trustworthy when there are no findings; ``summary`` says why either way.

    ``advice``: what would make trustworthy values more precise (not a fault).
    """

    findings: tuple[Finding, ...]
    summary: str
    advice: tuple[str, ...] = ()

    @property
    def trustworthy(self) -> bool:
        return not self.findings

    def lines(self) -> list[str]:
        """The verdict as the command line prints it."""
        head = "TRUSTWORTHY" if self.trustworthy else (
            f"NOT TRUSTWORTHY ({len(self.findings)} finding"
            f"{'s' if len(self.findings) > 1 else ''})")
        lines = [f"verdict: {head}: {self.summary}"]
        for finding in self.findings:
            lines += [f"  - {finding.problem}", f"    → {finding.action}"]
        lines += [f"  note: {text}" for text in self.advice]
        return lines

    def as_dict(self) -> dict:
        """Plain data for parameters.yaml."""
        return {"trustworthy": self.trustworthy, "summary": self.summary,
                "findings": [{"problem": f.problem, "action": f.action}
                             for f in self.findings], "advice": list(self.advice)}


def _motion_that_shows(name: str) -> str:
    for prefixes, motion in _MOTION_THAT_SHOWS:
        if any(name == p or name.startswith(p) for p in prefixes):
            return motion
    return "a motion in which it acts"


def _walked_from(joint: EstimationResult | None, name: str, bound: float
                 ) -> tuple[float, float] | None:
    """The joint fit's value of ``name`` and its distance from ``bound`` [its std].

    Where the bound lay outside the joint fit's 95 % interval (2 of its std, with the model's
    error where the fit has it), else None. The simulation-error fit starts from the joint
    fit: a value it walks from there to a bound is not the data's, but a trade against a
    direction they hold little of (b1 for an arm of enormous inertia and torque scale that
    keeps each segment's start speed).
    """
    std = None if joint is None else (joint.correlated or joint).std
    if std is None or name not in std:
        return None
    value = float(np.ravel(joint.parameters[name])[0])
    distance = abs(value - bound) / float(np.ravel(std[name])[0])
    return (value, distance) if distance > 2.0 else None


def _bound_finding(setup: Setup, name: str, value: float, side: str,
                   joint: EstimationResult | None = None, combinations: bool = False) -> Finding:
    """``name`` ended at a bound; ``combinations``: the data determine combinations (listed)."""
    problem = (f"{name} ended {side} ({value:.4g}): the data ask for a value beyond it, so it "
               "is no estimate")
    config = setup.config
    inputs = bool(config.rig_spec.inputs)
    bound = setup.lower[name] if side == AT_LOWER_BOUND else setup.upper[name]
    started = _walked_from(joint, name, bound)
    if started is not None:
        problem += (f"; the simulation-error fit took it there from the joint fit's "
                    f"{started[0]:.4g} ({started[1]:.1f} std from it), trading it against "
                    "what the data hold little of")
    arms_inertia = side == AT_LOWER_BOUND and name in _INERTIAS_OF_THE_ARM and inputs
    if arms_inertia and "K" not in config.free:
        action = (f"the arm's torque scale comes from K, fixed at "
                  f"{float(config.parameters['K']):.4g}; a driver's gain is rarely its "
                  f"datasheet's: free K as well (--free {','.join(config.free)},K), or fix "
                  f"{name} at a trusted value")
    elif started is not None:
        action = ("fix a parameter the data do not determine (see the other findings) at a "
                  "trusted value and calibrate again, or keep the joint fit "
                  "(--simulation-refinement off)")
    elif arms_inertia:
        action = ("the arm's inertia is set against the fixed masses and lengths (m_A l1², "
                  f"m_B lA²): check them, or fix {name} at a trusted value"
                  + (" (the combinations the data determine are listed)" if combinations
                     else ""))
    elif side == AT_LOWER_BOUND and bound == 0.0:
        action = (f"no {name} shows in these recordings: fix it at 0, or record "
                  f"{_motion_that_shows(name)}")
    else:
        action = ("check the fixed values it acts together with (masses, lengths, the input "
                  f"gain), or fix {name} at a trusted value")
    return Finding(problem, action)


def _std_to_bound(identified, result: EstimationResult, bound) -> list[tuple[str, float]]:
    """Each determined parameter's std over its Cramér–Rao bound, where the bound holds it."""
    return [(standing.name, float(np.ravel(result.std[standing.name])[0])
             / bound.std[standing.name]) for standing in identified.parameters
            if standing.determined and standing.name in bound.std
            and 0 < bound.std[standing.name] < np.inf]


def _rig_in_motion(setup: Setup) -> dict:
    """What the recordings drive and move, for a model's advice when it mispredicts.

    ``forced``: an input recorded; ``dry_friction``: the dry friction parameters of the joints
    they move (not held still); ``zeros``: the encoder offsets a comparison could free
    (:data:`~mb_estimation.model_terms.TERMS`) that are fixed; ``level``: the rig is taken to
    stand level (its ``tilt`` fixed at none).
    """
    hinges = DRY_FRICTION_PARAMETERS.get(setup.config.rig, ())
    moving = [j for j in range(len(hinges))
              if not all(grid.locked and grid.locked[j] for grid in setup.grids)]
    return {"forced": setup.forced,
            "dry_friction": tuple(name for j in moving for name in hinges[j]),
            "zeros": tuple(name for name in TERMS["offsets"]
                           if name in setup.config.parameters and name not in setup.free),
            "level": "tilt" in setup.config.parameters and "tilt" not in setup.free and bool(
                np.allclose(setup.config.parameters["tilt"], (1.0, 0.0, 0.0, 0.0)))}


def verdict(setup: Setup, assessment: Assessment) -> Verdict:
    """The closing verdict on a calibration's assessed fit (module docstring).

    Reads the assessment alone, and the setup for what the config declares: which parameters
    are free or fixed, and the model the hinges declare (what it advises when it misses).
    Where the kept simulation-error stage's own simulations follow the recordings, a
    prediction that misses is not held against the model: it starts from the joint fit's
    states, whose error a sensitive motion (a light pendulum whipped round) amplifies over the
    horizon. A std far above the Cramér–Rao bound is advice, not a finding; so is a std that
    includes the model's error.
    """
    config, model = setup.config, setup.model
    result, identified = assessment.result, assessment.identified
    moves, prediction = assessment.step_dependence, assessment.mismatch
    refined, delay, bound = assessment.refit_kept, assessment.delay, assessment.bound
    following = assessment.following
    findings = []
    if not result.status.converged:
        findings.append(Finding(
            f"the fit stopped without converging ({result.status}: {result.message})",
            "more iterations (--max-iterations), or start nearer (--set NAME=VALUE)"))
    for standing in identified.parameters:
        value = float(np.ravel(result.parameters[standing.name])[0])
        if standing.status in (AT_LOWER_BOUND, AT_UPPER_BOUND):
            findings.append(_bound_finding(setup, standing.name, value, standing.status,
                                           assessment.joint,
                                           bool(identified.determined_ratios)))
    grouped = set()
    for combination in identified.undetermined:
        ratios = [str(r) for r in identified.determined_ratios
                  if r.numerator in combination.names and r.denominator in combination.names]
        grouped.update(combination.names)
        determined = f"; the data determine {', '.join(ratios)}" if ratios else ""
        findings.append(Finding(
            f"not determined: {combination}{determined}",
            f"fix one of {', '.join(combination.names)} at a trusted value (e.g. from the "
            f"datasheet or CAD), or record {_motion_that_shows(combination.names[0])}"))
    for standing in identified.parameters:
        if standing.status == NOT_DETERMINED and standing.name not in grouped:
            spread = ("the data hold nothing of it" if not np.isfinite(standing.relative_std)
                      else f"its std is {100 * standing.relative_std:.0f} % of its value")
            if standing.name in _NEVER_EXCITED and config.rig == "furuta":
                action = "fix it: the arm never turns about that axis"
            elif assessment.model_error_correlation_s is not None:
                spread += ", the model's error included"
                action = ("give the model what the rig does that it lacks, or record "
                          f"{_motion_that_shows(standing.name)} at more than one operating "
                          f"point; or fix {standing.name} at a trusted value")
            else:
                action = (f"record {_motion_that_shows(standing.name)}, or fix it at a "
                          "trusted value")
            findings.append(Finding(f"{standing.name} is not determined ({spread})", action))
    moved = [row for row in moves if row.settled is False]
    if moved:
        names = ", ".join(row.name for row in moved)
        findings.append(Finding(f"{names} still move{'s' if len(moved) == 1 else ''} with the "
                                "estimation step: shadow values of the method",
                                model.still_moves_action))
    followed = following is not None and following.follows
    missed = not predicts_within_the_noise(prediction) and not followed
    if delay is not None and abs(delay.delay_s) > 3 * delay.std_s:  # std ≥ a quarter step
        sign_first = ("; but the model also misses the recordings (below): check each joint's "
                      "sign in recording.joints first, as a flipped one can pass for a delay"
                      if missed else "")
        side = "after" if delay.delay_s > 0 else "before"
        total = setup.config.recording.input_delay_s + delay.delay_s  # the check's is beyond it
        action = f"state it in the config: recording.input_delay_s: {total:.4g}"
        if delay.at_edge:
            low, high = (1e3 * d for d in DELAY_RANGE_S)
            finding = (f"the input acts at least {1e3 * abs(delay.delay_s):.3g} ms {side} its "
                       f"recorded stamps (the edge of the delays tried, {low:g} to {high:g} ms)")
            action += ", and calibrate again: the check then measures what is left"
        else:
            finding = (f"the input acts {1e3 * delay.delay_s:.3g} ms (± "
                       f"{1e3 * delay.std_s:.2g}) {side} its recorded stamps")
        findings.append(Finding(finding, action + sign_first))
    if setup.drives_conflict is not None:
        findings.append(Finding(
            setup.drives_conflict,
            "were these recorded with the input in another unit or the driver in another mode? "
            "Calibrate each group on its own: pooled, the input gain, the friction and the "
            "driven joint's inertia are traded between the groups"))
    for row in assessment.agreement:
        if not row.agree:
            scaled = (f": its std is scaled by {row.scale:.2g} to their spread"
                      if row.name in result.free else "")
            findings.append(Finding(
                f"the recordings disagree on {row}{scaled}",
                "the model lacks something that differs between these recordings (the "
                "operating point: speed, amplitude, load; a driver or friction term): see "
                "the other findings; the pooled value is a compromise between them"))
    if missed:
        findings.append(Finding(
            f"run {prediction.horizon_s:.3g} s ahead from its estimated states, the fitted model "
            f"({model.description}) misses {prediction.name} by {prediction.ratio:.0f}× the "
            "fit's noise", model.mispredicts_action(refined, **_rig_in_motion(setup))))
    correlated_s = assessment.model_error_correlation_s
    advice = []
    below = [] if bound is None or correlated_s is not None else [
        (name, ratio) for name, ratio in _std_to_bound(identified, result, bound)
        if ratio < BELOW_BOUND_RATIO]
    if below:
        advice.append(
            f"the std of {', '.join(name for name, _ in below)} "
            f"{'lies' if len(below) == 1 else 'lie'} below the Cramér–Rao bound "
            f"({', '.join(f'{ratio:.2g}×' for _, ratio in below)}), which no fit of this model "
            "reaches: the fit and the bound do not count the data's information alike here "
            "(seen on a recording of a few tens of samples); read the larger as the "
            "uncertainty")
    if correlated_s is not None:
        advice.append(
            f"the std include the model's error: the fit's residuals stay correlated over "
            f"{correlated_s:.2g} s, so each counts as less than independent data (the sandwich "
            "covariance with their correlation in time, Newey–West); a value the model's "
            "error biases the same way all through a recording is not covered")
    elif bound is not None and not refined:
        loose = [f"{name} {ratio:.0f}×" for name, ratio in
                 _std_to_bound(identified, result, bound) if ratio > PRECISION_RATIO]
        if loose:
            stage = (f"it did not run: {assessment.note}" if assessment.note else
                     "method.simulation_refinement, on unless set off; kept where the rigid "
                     "model follows the recordings")
            advice.append(
                f"the data allow tighter values than this fit gives ({', '.join(loose)} the "
                "Cramér–Rao bound): the simulation-error stage through the rigid model gets "
                f"near it where the model follows the data ({stage})")
    if findings:
        summary = "the values below are the data's, not yet the rig's"
    else:
        summary = "every free parameter determined"
        if moves:
            summary += ", settled in the step"
        if followed:
            summary += (f", its simulations follow the recordings over {following.segment_s:g}"
                        f" s from fitted starts within {following.ratio:.1f}× the noise")
        if prediction is not None and prediction.ratio <= PREDICTION_NOISE_RATIO:
            summary += (f", and the model predicts {prediction.horizon_s:.3g} s ahead within "
                        f"{prediction.ratio:.1f}× the fit's noise")
        elif prediction is not None:
            summary += (f" (its {prediction.horizon_s:.3g} s predictions from the joint fit's "
                        f"states miss by {prediction.ratio:.0f}×: the motion amplifies their "
                        "error)")
    return Verdict(tuple(findings), summary, tuple(advice))
