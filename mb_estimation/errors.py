"""Error helpers shared by every shell (CLI, node core, transports, players)."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
