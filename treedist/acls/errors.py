from treedist.errors import TreedistError


class AclSyncError(TreedistError):
    """Root of ACL sync's errors; messages name the cluster and the ACL."""


class AuthorizerMissing(AclSyncError):
    """A cluster that has no authorizer (its broker answers SECURITY_DISABLED): no ACLs to sync."""


class AclsUnreadable(AclSyncError):
    """A cluster whose ACLs could not be described within the bounded retries."""
