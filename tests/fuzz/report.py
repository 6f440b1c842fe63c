"""The fuzz counts' report, a plugin (tests/conftest.py loads it) rather than part of
tests/fuzz/conftest.py, so that the controller of a parallel run (pytest-xdist: scripts/test),
which collects no test and so never loads that conftest, reports too.

Steps at the session's end: an xdist worker hands its counts to the controller
(`workeroutput`); the controller adds each worker's up as the worker ends; the process that
ran the session (the controller, or pytest alone) writes them to
`<basetemp>/fuzz-counts.json` and prints them."""

from __future__ import annotations

import json

import pytest

from tests.fuzz.budget import COUNTS


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _as_json() -> dict[str, dict[str, int]]:
    return {t: dict(c) for t, c in sorted(COUNTS.items())}


def pytest_sessionfinish(session):
    config = session.config
    if _is_worker(config):
        config.workeroutput["fuzz_counts"] = _as_json()
        return
    if COUNTS:
        path = config._tmp_path_factory.getbasetemp() / "fuzz-counts.json"  # what tmp_path_factory returns
        path.write_text(json.dumps(_as_json(), indent=2) + "\n")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """The controller of an xdist run: add up a worker's counts as it ends."""
    for target, outcomes in getattr(node, "workeroutput", {}).get("fuzz_counts", {}).items():
        COUNTS[target].update(outcomes)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not COUNTS or _is_worker(config):
        return
    terminalreporter.section("fuzz inputs per target")
    for target, outcomes in sorted(COUNTS.items()):
        detail = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        terminalreporter.write_line(f"{target}: {sum(outcomes.values())} inputs ({detail})")
