"""The `acls:` section of a deployment: ACL sync (treedist.acls, docs/acls.md).

```yaml
acls:
  sync: true                 # default false
  interval: 30s
  downgrade_write: false
  exclude_principals: ["User:admin"]
```

`interval` takes every form `topics.sync.interval` takes (treedist/config/durations.py).
"""

from __future__ import annotations

import re

from pydantic import StrictBool, StrictStr, field_validator

from treedist.config.durations import Duration
from treedist.config.frozen import Frozen

# Kafka's principal form: <type>:<name> (User:alice, Group:ops); a wildcard name is User:*.
_PRINCIPAL = re.compile(r"[A-Za-z][A-Za-z0-9_-]*:.+")


class AclSyncConfig(Frozen):
    """`acls`: keep the ACLs of distributed topics the same on every cluster (off by default)."""

    sync: StrictBool = False
    """Run ACL sync every `interval` (in the topic-sync unit), as MirrorMaker 2's sync.topic.acls.enabled; every
    cluster needs an authorizer."""

    interval: Duration = 30.0
    """Time between two ACL sync passes (e.g. 30s, 1m)."""

    downgrade_write: StrictBool = False
    """An ALLOW of WRITE or ALL on one cluster becomes an ALLOW of READ on the others (MirrorMaker 2 gives remote
    topics read access only)."""

    exclude_principals: tuple[StrictStr, ...] = ()
    """Principals (User:name) whose ACLs are never synced: never created, never changed."""

    @field_validator("exclude_principals")
    @classmethod
    def _principals(cls, principals: tuple[str, ...]) -> tuple[str, ...]:
        for i, principal in enumerate(principals):
            if not _PRINCIPAL.fullmatch(principal):
                raise ValueError(f"[{i}]: {principal!r} is not a principal of the form <type>:<name> (User:alice)")
        return principals
