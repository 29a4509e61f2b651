"""The house's rules (docs/development.md, "Layout"): layers, and modules of a readable length.

No module imports from a room above its own, and none is longer than
:data:`LONGEST_MODULE_LINES`. Every ``import mb_estimation…`` / ``from mb_estimation… import``
in the package, at module level or inside a function, is checked against the table below. A
new top-level room must be placed in it (a calibration followed through its calls goes one way
through them: test_calibrate_combinations.py). docs/development.md's layout table is generated
from :data:`LAYERS` and each room's docstring: ``python test/test_layers.py`` writes it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mb_estimation"
DEVELOPMENT_DOC = PACKAGE.parent / "docs" / "development.md"

# Low to high. A room may import its own layer and those below.
LAYERS = (
    ("numerics", "program_store", "compiled", "stamps", "message_types", "errors", "signals",
     "pseudo_inverse", "fade", "multisines"),
    ("lie",),
    ("multibody",),
    ("rigs", "model_terms"),
    ("estimation", "scenarios"),
    ("simulation", "validation", "cramer_rao", "models", "excitation"),
    ("config",),
    ("io",),  # read
    ("setup",),  # set up, once
    ("fitting",),  # plan and fit
    ("assess",),  # assess, once
    ("verdict",),  # judge
    ("calibration",),  # the one object the writers take
    ("results", "report"),  # write
    ("online", "api", "tracking"),
    ("ros",),
    ("cli",),
)
LEVEL = {room: level for level, rooms in enumerate(LAYERS) for room in rooms}
#: Where a calibration goes, room by room, when it is followed through its calls.
STAGES = {"io": "read", "setup": "set up", "fitting": "fit", "assess": "assess",
          "verdict": "judge", "results": "write", "report": "write"}


def _room(module: str) -> str:
    """``mb_estimation.<room>…`` → ``room`` (a top-level module or package)."""
    return module.split(".")[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, imported room)`` of every mb_estimation import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "mb_estimation":
                found += [(node.lineno, alias.name) for alias in node.names]
            elif node.module.startswith("mb_estimation."):
                found.append((node.lineno, _room(node.module)))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, _room(alias.name)) for alias in node.names
                      if alias.name.startswith("mb_estimation.")]
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"
                 or p.parent != PACKAGE)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_from_a_higher_room(path):
    own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    assert own in LEVEL, f"{own}: a new room — place it in LAYERS"
    upward = [f"line {line}: {room} (layer {LEVEL.get(room)}) above {own} (layer {LEVEL[own]})"
              for line, room in _imports(path)
              if room in LEVEL and LEVEL[room] > LEVEL[own]]
    unknown = [f"line {line}: {room}" for line, room in _imports(path)
               if room not in LEVEL and room != "__version__"]
    assert not upward and not unknown, "\n".join(upward + unknown)


def test_the_table_has_every_room():
    rooms = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()
             if p.suffix == ".py" and p.name != "__init__.py"
             or p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == set(LEVEL), f"unplaced: {rooms - set(LEVEL)}; gone: {set(LEVEL) - rooms}"


#: A module longer than this is doing more than one thing: split it where its parts meet.
LONGEST_MODULE_LINES = 500


def test_no_module_is_longer_than_the_house_allows():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > LONGEST_MODULE_LINES}
    assert not long, long


#: The files that may name ``jax.jit`` itself: where the package's ``jit`` is defined, the
#: program store (which passes the options to ``compile``), and its test (which compares the
#: two).
PLAIN_JIT_ALLOWED = ("mb_estimation/numerics.py", "mb_estimation/program_store.py",
                     "test/test_program_store.py")


def test_programs_are_compiled_with_the_package_s_options():
    """No ``jax.jit`` in the package or its tests but ``numerics.jit`` (or a ``Compiler``).

    A plain ``jax.jit`` compiles with XLA's default options, not ``numerics.COMPILER_OPTIONS``:
    a different program from the one the package runs, and up to twice the compile time.
    """
    root = PACKAGE.parent
    found = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(root / "test").glob("*.py")]):
        name = str(path.relative_to(root))
        if name in PLAIN_JIT_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr == "jit"
                    and isinstance(node.value, ast.Name) and node.value.id == "jax"
                    or isinstance(node, ast.ImportFrom) and node.module == "jax"
                    and any(alias.name == "jit" for alias in node.names)):
                found.append(f"{name}:{node.lineno}")
    assert not found, "use mb_estimation.numerics.jit: " + ", ".join(found)


def room_of(filename: str) -> str | None:
    """The room a code object's file belongs to, or None outside the package."""
    path = Path(filename)
    if PACKAGE not in path.parents:
        return None
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _summary(room: str) -> str:
    """The first line of a room's docstring (a module's, or a package's __init__.py)."""
    path = PACKAGE / f"{room}.py"
    if not path.exists():
        path = PACKAGE / room / "__init__.py"
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    return docstring.splitlines()[0] if docstring else ""


BEGIN = "<!-- layout table: written by `python test/test_layers.py` -->"
END = "<!-- end of the layout table -->"


def layout_table() -> str:
    """The layers, their rooms, each room's role in a calibration and its docstring's summary."""
    rows = ["| layer | room | what it holds |", "|---|---|---|"]
    for level, rooms in enumerate(LAYERS):
        for room in rooms:
            role = f"**{STAGES[room]}**: " if room in STAGES else ""
            summary = _summary(room).replace("|", "\\|")
            rows.append(f"| {level} | `{room}` | {role}{summary} |")
    return "\n".join([BEGIN, *rows, END])


def test_the_layout_table_in_the_docs_is_the_layer_tables():
    text = DEVELOPMENT_DOC.read_text()
    assert BEGIN in text and END in text
    shown = text[text.index(BEGIN):text.index(END) + len(END)]
    assert shown == layout_table(), "stale: python test/test_layers.py writes it"


if __name__ == "__main__":
    text = DEVELOPMENT_DOC.read_text()
    DEVELOPMENT_DOC.write_text(text[:text.index(BEGIN)] + layout_table()
                               + text[text.index(END) + len(END):])
    sys.exit(0)
