"""Functions for worker processes in the tests of ``track``'s local pool (light to import)."""

import os


def tenfold_or_die(item: int) -> int:
    """``10 item``; for a negative item the worker process dies on the spot."""
    if item < 0:
        os._exit(3)
    return 10 * item
