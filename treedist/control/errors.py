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


class LeaseExpired(ControlError):
    """A lease etcd no longer has (it expired, or was revoked)."""


class WatchCompacted(ControlError):
    """A watch asked for a revision etcd has compacted away: read everything again."""

    def __init__(self, message: str, compact_revision: int) -> None:
        super().__init__(message)
        self.compact_revision = compact_revision
