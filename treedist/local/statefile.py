"""The JSON state files of what `treedist local` starts (clusters.json, etcd.json,
netbed.json, registries.json under the state directory): a later command reads them to find,
report and stop the same processes. Runs on the machine that started them (the CLI, tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_state(base_dir: str | Path, name: str) -> Any | None:
    """The state saved as `name` under `base_dir`, None if nothing was saved there."""
    path = Path(base_dir) / name
    if not path.exists():
        return None
    return json.loads(path.read_text())


def write_state(base_dir: str | Path, name: str, state: Any) -> None:
    """Save `state` (JSON values) as `name` under `base_dir`, creating the directory if needed."""
    Path(base_dir).mkdir(parents=True, exist_ok=True)
    (Path(base_dir) / name).write_text(json.dumps(state, indent=2))
