"""Errors of the control plane (treedist.control), under one root."""

from __future__ import annotations

from treedist.errors import TreedistError


class ControlError(TreedistError):
    """Root of the control plane's errors."""


class EtcdUnavailable(ControlError):
    """No endpoint of etcd answered; the message names every endpoint tried and why."""


class EtcdRefused(ControlError):
    """etcd answered with an error; `code` is its gRPC status code (5: not found)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


NOT_FOUND = 5  # gRPC status code etcd uses for a missing lease
PERMISSION_DENIED = 7  # the user's roles do not cover the key
UNAUTHENTICATED = 16  # the auth token is invalid or expired: log in again


class EtcdAuthError(ControlError):
    """etcd will not deal with us as configured, and asking again will not change it: a wrong
    user or password (control.auth), a key outside the user's roles, a server certificate
    control.etcd_tls.ca does not trust, a client certificate etcd rejects. One line naming
    the endpoint and the setting to look at."""


class LeaseExpired(ControlError):
    """A lease etcd no longer has (it expired, or was revoked)."""


class WatchCompacted(ControlError):
    """A watch asked for a revision etcd has compacted away: read everything again."""

    def __init__(self, message: str, compact_revision: int) -> None:
        super().__init__(message)
        self.compact_revision = compact_revision
