"""Where a test run's compiling goes: a pytest plugin that records every XLA compilation.

    PYTHONPATH=benchmarks/perf COMPILE_CENSUS=/tmp/census python -m pytest -q -p compile_census \
        [TESTS]
    python benchmarks/perf/compile_census.py /tmp/census

Each process of the run (each worker under ``pytest -n``) appends one JSON line per compilation
to ``$COMPILE_CENSUS.<worker>.jsonl``: the test it ran in, the program's name, a digest of its
module (the same program compiled twice has the same digest) and the seconds XLA took. The
summary prints the compilations, how many were of distinct programs, the seconds spent
compiling a program again, the programs by size, and the longest by name with their tests.
Compilations in processes a test starts (a command, a node) are not seen.
"""

from __future__ import annotations

import collections
import glob
import hashlib
import json
import os
import sys
import time

import pytest

_CURRENT = {"test": None}


def _record(computation, seconds: float) -> None:
    digest = hashlib.sha256(computation.operation.get_asm(binary=True)).hexdigest()[:16]
    name = str(computation.operation.attributes["sym_name"]).strip('"')
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"{os.environ['COMPILE_CENSUS']}.{worker}.jsonl", "a") as file:
        file.write(json.dumps({"test": _CURRENT["test"], "program": name, "digest": digest,
                               "seconds": seconds}) + "\n")


def pytest_configure(config) -> None:
    """Wrap JAX's compile step (JAX's internals: a measuring tool, not product code)."""
    if "COMPILE_CENSUS" not in os.environ:
        return
    from jax._src import compiler

    original = compiler.compile_or_get_cached

    def compile_or_get_cached(backend, computation, *args, **kwargs):
        started = time.perf_counter()
        result = original(backend, computation, *args, **kwargs)
        _record(computation, time.perf_counter() - started)
        return result

    compiler.compile_or_get_cached = compile_or_get_cached  # looked up at each call


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Note the test that runs, for the compilations it makes."""
    _CURRENT["test"] = item.nodeid
    yield
    _CURRENT["test"] = None


def summary(prefix: str) -> None:
    """The census of ``prefix.*.jsonl``, printed."""
    records = [json.loads(line) for path in glob.glob(f"{prefix}.*.jsonl")
               for line in open(path, encoding="utf-8")]
    by_digest = collections.defaultdict(list)
    for record in records:
        by_digest[record["digest"]].append(record)
    again = sum(r["seconds"] for rs in by_digest.values() for r in rs[1:])
    print(f"{len(records)} compilations, {sum(r['seconds'] for r in records):.1f} s, "
          f"{len(by_digest)} distinct programs; compiling a program again: {again:.1f} s")
    for low, high in ((0, 0.1), (0.1, 0.5), (0.5, 2), (2, float("inf"))):
        chosen = [r["seconds"] for r in records if low <= r["seconds"] < high]
        print(f"  programs of {low}-{high} s: {len(chosen)}, {sum(chosen):.1f} s")
    by_name = collections.defaultdict(list)
    for record in records:
        by_name[record["program"]].append(record)
    for name, rs in sorted(by_name.items(), key=lambda kv: -sum(r["seconds"] for r in kv[1]))[:15]:
        tests = sorted({r["test"].split("::")[0] for r in rs if r["test"]})
        print(f"  {sum(r['seconds'] for r in rs):6.1f} s {len(rs):4d}x {name}: {', '.join(tests)}")


if __name__ == "__main__":
    summary(sys.argv[1])
