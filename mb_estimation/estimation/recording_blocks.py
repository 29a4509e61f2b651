"""One recording's blocks: the model chunk by chunk, the whole-recording algebra on buckets.

The model's residual and Jacobian blocks are evaluated in chunks of :data:`CHUNK_TRANSITIONS`
transitions (the last chunk padded), so one compiled program serves every recording length.
The cheap whole-recording algebra (normal equations, block elimination, trial states,
covariance blocks, initial and shadow states) runs on the recording zero-padded to a length
bucket (:func:`bucket_length`; in a solve, the longest recording's for all), assembled and
cut on the host, so it compiles once per bucket and other lengths and numbers of recordings
reuse it.
Programs come from the caller's :class:`~mb_estimation.compiled.Compiler`.
"""

from __future__ import annotations

import numpy as np

from mb_estimation.estimation.linear_algebra import linearized_change, state_step
from mb_estimation.estimation.residuals import (
    Linearization,
    ModelStructure,
    StepData,
    first_jacobians,
    transition_jacobians,
)
from mb_estimation.numerics import jax

jnp = jax.numpy

# The model's residuals and Jacobian blocks are evaluated in chunks of this many transitions
# (the last one padded), so one compiled program serves every recording length; the cheap
# linear algebra over whole recordings is compiled per length bucket (bucket_length).
CHUNK_TRANSITIONS = 256


def bucket_length(num_steps: int) -> int:
    """The length a recording of ``num_steps`` is padded to for the whole-recording algebra.

    ``256 · 2^k`` times 1, 1.25, 1.5 or 1.75 (four sizes per doubling, at most a fifth of it
    padding): the normal equations, block elimination and state maps compile once per bucket,
    and every recording length in it reuses them. Their cost grows with the padding (measured).
    """
    size = CHUNK_TRANSITIONS
    while True:
        for quarters in (4, 5, 6, 7):
            if size * quarters // 4 >= num_steps:
                return size * quarters // 4
        size *= 2


def padded(tree, length: int, mode: str):
    """Every leaf padded along its first axis to ``length``, on the host, then on the device.

    ``mode``: ``edge`` (states: the last one repeated) or ``linear`` (angles extrapolated along
    the last difference, so that a central difference at the last real sample is the one-sided
    difference it would be without padding). Host arrays and one transfer: device-side padding
    would compile a small program for every length. (Residual and Jacobian blocks are padded
    with zeros as they are assembled, :func:`linearization`: padded steps add nothing to any sum,
    and their states decouple.)
    """
    def pad(leaf):
        leaf = np.asarray(leaf)
        extra = length - leaf.shape[0]
        if mode == "edge":
            tail = np.repeat(leaf[-1:], extra, axis=0)
        else:  # linear
            ramp = np.arange(1, extra + 1).reshape((-1,) + (1,) * (leaf.ndim - 1))
            tail = leaf[-1] + ramp * (leaf[-1] - leaf[-2])
        return jax.device_put(np.concatenate([leaf, tail]))

    return jax.tree_util.tree_map(pad, tree)


def cut(tree, length: int):
    """Every leaf's first ``length`` entries, as host arrays."""
    return jax.tree_util.tree_map(lambda leaf: np.asarray(leaf)[:length], tree)


def on_bucket(compiler, function, static, length: int, size: int, *args):
    """``function`` over a recording's ``length`` steps, run padded to ``size``, cut back.

    ``size``: a :func:`bucket_length` at least ``length`` (a solve pads all its recordings to
    the longest one's bucket). ``args`` are ``(value, padding mode or None)``: per-step arrays
    are padded, others (None) passed as they are.
    """
    arguments = [value if mode is None else padded(value, size, mode) for value, mode in args]
    return cut(compiler(function, static, *arguments), length)


def per_state(compiler, function, static, fixed, free_values, states):
    """``function(static, fixed, free_values, chunk)`` over a trajectory's states, in chunks.

    For maps that treat every state alone (the shadow states): chunks of
    :data:`CHUNK_TRANSITIONS` states, the last padded by repeating its final state, so one
    compiled program serves every length and bucket. The leaves of the results are
    concatenated along their first axis and cut to the trajectory's length, on the host.
    """
    host = jax.tree_util.tree_map(np.asarray, states)
    count = int(jax.tree_util.tree_leaves(host)[0].shape[0])
    size = CHUNK_TRANSITIONS
    pieces = []
    for start in range(0, count, size):
        def chunk(leaf, start=start):
            part = leaf[start:start + size]
            return np.concatenate([part, np.repeat(part[-1:], size - len(part), axis=0)])

        pieces.append(compiler(function, static, fixed, free_values,
                               jax.tree_util.tree_map(chunk, host)))
    return jax.tree_util.tree_map(lambda *parts: np.concatenate(parts)[:count], *pieces)


def transition_chunks(states, data: StepData, size: int):
    """A recording's transitions as host arrays in chunks of ``size``, and their number.

    Each chunk is ``(previous, current, inputs, measured_angles, observed)``; the last one is
    padded by repeating its final transition (the padding's results are dropped).
    """
    count = int(np.shape(data.observed)[0]) - 1
    total = -(-count // size) * size

    def pad(array):
        array = np.asarray(array)
        return np.concatenate([array, np.repeat(array[-1:], total - count, axis=0)])

    host = jax.tree_util.tree_map(np.asarray, states)
    previous = jax.tree_util.tree_map(lambda a: pad(a[:-1]), host)
    current = jax.tree_util.tree_map(lambda a: pad(a[1:]), host)
    inputs, measured, observed = (pad(data.inputs), pad(np.asarray(data.measured_angles)[1:]),
                                  pad(np.asarray(data.observed)[1:]))
    chunks = []
    for start in range(0, total, size):
        window = slice(start, start + size)
        chunks.append((jax.tree_util.tree_map(lambda a, w=window: a[w], previous),
                       jax.tree_util.tree_map(lambda a, w=window: a[w], current),
                       inputs[window], measured[window], observed[window]))
    return chunks, count


def first_state(states):
    """The first state of a stacked trajectory, as host arrays."""
    return jax.tree_util.tree_map(lambda a: np.asarray(a)[0], states)


def linearization(compiler, structure: ModelStructure, fixed, free_values, states,
                  data: StepData, size: int) -> Linearization:
    """:class:`Linearization` of one recording, chunk by chunk, zero-padded to ``size`` steps.

    ``size``: a :func:`bucket_length` at least the recording's length. Block 0 has no previous
    state: its ``previous`` block is zero. The programs' ``JacobianParts`` (block 0's, then
    each chunk's) are assembled on the host with one copy per block: the state columns go
    straight to their places in the formulation's ⊞ layout. No program per length.
    """
    first = compiler(first_jacobians, structure, fixed, free_values, first_state(states),
                     data.measured_angles[0], data.observed[0], data.dt, data.sqrt_kappa,
                     data.locked)
    chunks, count = transition_chunks(states, data, CHUNK_TRANSITIONS)
    parts = [compiler(transition_jacobians, structure, fixed, free_values, *chunk, data.dt,
                      data.sqrt_kappa, data.locked) for chunk in chunks]

    def pieces(name):
        """``(first row, rows)`` of one block: block 0's, then each chunk's up to ``count``."""
        yield 0, np.asarray(getattr(first, name))[None]
        start = 1
        for part in parts:
            rows = np.asarray(getattr(part, name))[:count + 1 - start]
            yield start, rows
            start += rows.shape[0]

    def block(name):
        out = np.zeros((size, *np.shape(getattr(first, name))))
        for start, rows in pieces(name):
            out[start:start + rows.shape[0]] = rows
        return out

    half = first.current_configuration.shape[-1]
    group = structure.formulation.tangent_group(half)

    def state_columns(configuration, velocity):
        """The two parts written straight into their places of the ⊞ layout (``joined``)."""
        num_rows = np.shape(getattr(first, configuration))[0]
        out = np.zeros((size, num_rows, half // group, 2, group))
        for slot, name in enumerate((configuration, velocity)):
            for start, rows in pieces(name):
                out[start:start + rows.shape[0], :, :, slot] = rows.reshape(
                    *rows.shape[:2], -1, group)
        return out.reshape(size, -1, 2 * half)

    return jax.device_put(Linearization(
        residuals=block("residuals"),
        previous=state_columns("previous_configuration", "previous_velocity"),
        current=state_columns("current_configuration", "current_velocity"),
        parameters=block("parameters")))


def trial_states(structure, states, lin: Linearization, elimination, parameter_step):
    """Trial states of one recording and the sums the gain ratio needs (model cost, ‖δx‖²).

    On the padded length of ``lin`` (``states`` padded likewise; the padded steps do not move).
    """
    step = state_step(elimination, parameter_step)
    moved = structure.formulation.boxplus(states, step)
    model = lin.residuals + linearized_change(lin, step, parameter_step)
    return moved, jnp.sum(model**2), jnp.sum(step**2)
