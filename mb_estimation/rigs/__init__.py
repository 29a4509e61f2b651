"""Rigs: multibody systems built from named parameters (paper §4.2, §4.3).

A :class:`Rig` couples a :class:`~mb_estimation.rigs.parameters.RigSpec` (names, units, joints,
inputs) with a pure function building the :class:`~mb_estimation.multibody.Multibody` from a
mapping of parameter values (floats or traced arrays). The observation function is the rig's
hinge angles, :func:`mb_estimation.multibody.joint_angles`, and its inverse is
:func:`mb_estimation.multibody.states_from_joints`: both rigs observe exactly their hinges.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from mb_estimation.compiled import Compiler
from mb_estimation.multibody import Multibody
from mb_estimation.numerics import jax
from mb_estimation.rigs.parameters import FURUTA, PENDULUM, PENDULUM_FRICTION_MODELS, RigSpec


@dataclass(frozen=True)
class Rig:
    """A rig: its spec, ``build(parameters) -> Multibody`` and ``rest_inertia(parameters)``.

    ``rest_inertia``: the inertia its first joint turns with every body at rest at zero angles
    [kg m²] (the motor axis of a Furuta pendulum), from plain parameter values; the scale the
    consistent path reads its state error weight κ against.
    """

    spec: RigSpec
    build: Callable[[Mapping[str, jax.Array]], Multibody]
    rest_inertia: Callable[[Mapping[str, object]], float]

    @property
    def name(self) -> str:
        return self.spec.name


def parameter_arrays(values: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Parameter values (floats, quaternion lists) as float64 arrays, keyed by name.

    Host values become NumPy arrays: JAX takes them as they are, where a ``jnp.asarray``
    compiled a small program per shape on every cold start. JAX arrays (and tracers, inside a
    compiled function) stay JAX arrays.
    """
    return {name: jax.numpy.asarray(value, dtype=jax.numpy.float64)
            if isinstance(value, jax.Array) else np.asarray(value, dtype=np.float64)
            for name, value in values.items()}


def _built(rig: Rig, values):
    return rig.build(values)


def built_system(rig: Rig, values: Mapping[str, object]) -> Multibody:
    """``rig.build(values)`` as one compiled program, for use outside compiled code.

    ``values`` as :func:`parameter_arrays` gives them. Op by op, building the system compiled
    a small program per operation and shape on every cold start (about 25 for the Furuta
    pendulum).
    """
    return Compiler()(_built, rig, values)


def get_rig(name: str, friction: str | None = None, drift_correction: bool = False,
            dry_friction: tuple[bool, ...] | None = None, ripple_per_revolution: int = 0) -> Rig:
    """The rig called ``name`` (``furuta`` or ``pendulum``; the pendulum takes a friction model).

    ``drift_correction`` builds systems with :attr:`Multibody.drift_correction` set.
    ``dry_friction`` (one flag per hinge) drops the dry friction rows of the hinges flagged
    False (None: every hinge keeps its own). ``ripple_per_revolution``: the Furuta arm's torque
    ripple's periods per revolution (0: no ripple). Cached: the same rig object comes back
    however the defaults are spelled, so compiled estimator functions are shared.
    """
    flags = None if dry_friction is None or all(dry_friction) else tuple(map(bool, dry_friction))
    if ripple_per_revolution and name != FURUTA.name:
        raise ValueError(f"only the furuta rig has a torque ripple, not {name!r}")
    return _cached_rig(name, friction, bool(drift_correction), flags, int(ripple_per_revolution))


@functools.cache
def _cached_rig(name: str, friction: str | None, drift_correction: bool,
                dry_friction: tuple[bool, ...] | None, ripple_per_revolution: int) -> Rig:
    from mb_estimation.rigs import furuta, pendulum

    if name == FURUTA.name:
        build = (functools.partial(furuta.build_system,
                                   ripple_per_revolution=ripple_per_revolution)
                 if ripple_per_revolution else furuta.build_system)
        rig = Rig(FURUTA, build, furuta.rest_inertia)
    elif name == PENDULUM.name:
        model = friction or "dry"
        if model not in PENDULUM_FRICTION_MODELS:
            raise ValueError(f"unknown pendulum friction model {model!r}; "
                             f"choose one of {', '.join(PENDULUM_FRICTION_MODELS)}")
        rig = Rig(PENDULUM, functools.partial(pendulum.build_system, friction=model),
                  pendulum.rest_inertia)
    else:
        raise ValueError(f"unknown rig {name!r}; choose furuta or pendulum")
    if drift_correction:
        rig = dataclasses.replace(rig, build=functools.partial(_with_drift_correction, rig.build))
    if dry_friction is not None:
        rig = dataclasses.replace(rig, build=functools.partial(_with_dry_friction, rig.build,
                                                               dry_friction))
    return rig


def _with_drift_correction(build, params: Mapping[str, jax.Array]) -> Multibody:
    return dataclasses.replace(build(params), drift_correction=True)


def _with_dry_friction(build, flags: tuple[bool, ...],
                       params: Mapping[str, jax.Array]) -> Multibody:
    system = build(params)
    hinges = tuple(dataclasses.replace(hinge, has_dry_friction=hinge.has_dry_friction and flag)
                   for hinge, flag in zip(system.hinges, flags, strict=True))
    return dataclasses.replace(system, hinges=hinges)
