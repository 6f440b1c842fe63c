"""What an import could not carry over, and what it needs from the operator (pure; CLI process).

Every MM2 setting without an equivalent is an `Unmapped` (the setting as written, its value
unless it is a credential, and what to do); behaviour that differs without any setting saying
so is a `Note`; every credential is an `${env:NAME}` reference in `Secrets`, its value kept
nowhere but in the caller's memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from treedist.config.secrets import is_secret_key

MASK = "***"


@dataclass(frozen=True)
class Unmapped:
    setting: str  # as written in the file (`A.consumer.max.poll.records`)
    value: str  # masked when the setting is a credential
    todo: str  # why there is no equivalent and what to do

    def line(self) -> str:
        return f"{self.setting} = {self.value}: {self.todo}"


def shown(setting: str, value: str) -> str:
    """A value as a report may print it: a credential (by key, or a JAAS config) is masked."""
    return MASK if is_secret_key(setting) or "password" in value.lower() or "secret" in value.lower() else value


@dataclass
class Secrets:
    """`${env:NAME}` references handed out for credentials: NAME -> what it holds (the
    cluster and librdkafka setting). The values never enter it."""

    names: dict[str, str] = field(default_factory=dict)

    def reference(self, cluster: str, setting: str) -> str:
        """The reference for `setting` of `cluster` (`TREEDIST_DC1_A_SASL_PASSWORD`); a name
        two clusters would share gets a numeric suffix."""
        base = "TREEDIST_" + re.sub(r"[^A-Za-z0-9]+", "_", f"{cluster}_{setting}").strip("_").upper()
        what = f"clusters.{cluster}.client.{setting}"
        name, n = base, 2
        while name in self.names and self.names[name] != what:
            name, n = f"{base}_{n}", n + 1
        self.names[name] = what
        return "${env:" + name + "}"


@dataclass
class Report:
    unmapped: list[Unmapped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    secrets: Secrets = field(default_factory=Secrets)

    def skip(self, setting: str, value: str, todo: str) -> None:
        entry = Unmapped(setting, shown(setting, value), todo)
        if entry not in self.unmapped:  # a top-level setting is met once per cluster
            self.unmapped.append(entry)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def message(self) -> str:
        """The one message: every unmapped setting with what to do, then the notes."""
        lines = []
        if self.unmapped:
            lines.append(f"{len(self.unmapped)} MM2 setting(s) without an equivalent in treedist (not imported):")
            lines += [f"  - {u.line()}" for u in self.unmapped]
        else:
            lines.append("Every MM2 setting has an equivalent in treedist.")
        if self.notes:
            lines.append("Differences to review:")
            lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)
