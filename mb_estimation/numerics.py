"""JAX set-up shared by the numerical core: float64 everywhere.

Every core module imports ``jax`` through here so that ``jax_enable_x64`` is switched on before
the first array is made.
"""

import jax

jax.config.update("jax_enable_x64", True)

__all__ = ["jax"]
