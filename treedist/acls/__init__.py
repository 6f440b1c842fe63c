"""ACL sync: the ACLs of distributed topics are the same on every cluster (docs/acls.md), as
MirrorMaker 2's `sync.topic.acls.enabled` keeps them for remote topics.

`plan` is the pure decision core (each cluster's ACLs -> what to create where); `admin` does
the Admin API I/O; `sync` runs one pass over a deployment; `job` is the driver-side
background job that repeats it every `acls.interval`.
"""

from treedist.acls.errors import AclSyncError

__all__ = ["AclSyncError"]
