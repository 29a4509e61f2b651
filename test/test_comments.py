"""Comments and docstrings in the package say what the code does and why, standing on their own.

History lives in git and the design document is not part of the repository, so no line may cite
an issue number, the benchmark log or the design document.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mb_estimation"

REFERENCE = re.compile(r"RESULTS\.md|\bRESULTS\b|DESIGN|\b[Ii]ssue\s*#?\d+")


def test_no_references_to_history_or_outside_documents():
    offending = [
        f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if REFERENCE.search(line)
    ]
    assert not offending, "lines citing issues, RESULTS or DESIGN:\n" + "\n".join(offending)
