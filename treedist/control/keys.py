"""Where the control plane keeps what, under a deployment's prefix (pure).

    <prefix>/id                         the deployment id, generated once
    <prefix>/config                     the deployment (live config, JSON)
    <prefix>/leader                     the leader's name, bound to its lease
    <prefix>/balance                    the leader's load calculation (ranking, imbalance, moves)
    <prefix>/workers/<worker>           registration (labels, pid, host), bound to its lease
    <prefix>/load/<worker>              load report (per unit: records/s, bytes/s, lag; CPU, RSS), bound to its lease
    <prefix>/assignments/<worker>/<unit> the leader's assignment of a unit to a worker
    <prefix>/running/<unit>             the claim of the worker running the unit, bound to its lease

Unit ids contain at most one `/` (`messages/c1`, `offsets/c1`, `topic-sync`, `schemas/c1`);
worker names never do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from treedist.control.errors import ControlError

WORKER_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Keys:
    prefix: str

    def __post_init__(self) -> None:
        if not self.prefix.startswith("/") or self.prefix.endswith("/") or "//" in self.prefix:
            raise ControlError(f"control.prefix {self.prefix!r}: must start with '/', not end with '/', no '//'")

    @property
    def root(self) -> str:
        return self.prefix + "/"

    @property
    def id(self) -> str:
        return self.prefix + "/id"

    @property
    def config(self) -> str:
        return self.prefix + "/config"

    @property
    def leader(self) -> str:
        return self.prefix + "/leader"

    @property
    def balance(self) -> str:
        return self.prefix + "/balance"

    @property
    def workers_prefix(self) -> str:
        return self.prefix + "/workers/"

    @property
    def load_prefix(self) -> str:
        return self.prefix + "/load/"

    @property
    def assignments_prefix(self) -> str:
        return self.prefix + "/assignments/"

    @property
    def running_prefix(self) -> str:
        return self.prefix + "/running/"

    def worker(self, name: str) -> str:
        return self.workers_prefix + _worker(name)

    def load(self, name: str) -> str:
        return self.load_prefix + _worker(name)

    def assignments(self, worker: str) -> str:
        return self.assignments_prefix + _worker(worker) + "/"

    def assignment(self, worker: str, unit: str) -> str:
        return self.assignments(worker) + unit

    def running(self, unit: str) -> str:
        return self.running_prefix + unit

    def parse_assignment(self, key: str) -> tuple[str, str]:
        """(worker, unit) of an assignment key."""
        if not key.startswith(self.assignments_prefix):
            raise ControlError(f"{key!r} is not an assignment key under {self.assignments_prefix}")
        worker, _, unit = key[len(self.assignments_prefix):].partition("/")
        if not worker or not unit:
            raise ControlError(f"{key!r} is not an assignment key (<worker>/<unit>)")
        return worker, unit


def _worker(name: str) -> str:
    if not WORKER_NAME.match(name):
        raise ControlError(f"worker name {name!r}: use letters, digits, '.', '_' and '-' only")
    return name
