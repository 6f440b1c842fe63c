"""One cluster's topic ACLs through confluent-kafka's Admin API (driver).

`describe` lists every ACL on a TOPIC resource with a LITERAL or PREFIXED pattern;
`create` creates bindings in one request and returns what failed. Calls are bounded by
`timeout_s` and retried with `treedist.kafka.retry.with_retries`; errors name the cluster.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from treedist.acls.errors import AclsUnreadable, AuthorizerMissing
from treedist.acls.decisions import Acl
from treedist.kafka.admin import admin_client
from treedist.kafka.retry import with_retries

_PATTERNS = {"LITERAL": ResourcePatternType.LITERAL, "PREFIXED": ResourcePatternType.PREFIXED}
# Every topic ACL, of either stored pattern type.
_ALL_TOPIC_ACLS = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,
                                   AclOperation.ANY, AclPermissionType.ANY)


def _code(exc: BaseException) -> int | None:
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    return error.code() if error is not None else None


class AclAdmin:
    """The topic ACLs of one cluster (driver)."""

    def __init__(self, cluster: str, client_config: Mapping[str, object], attempts: int = 4, timeout_s: float = 10.0) -> None:
        self.cluster = cluster
        self._admin = admin_client(dict(client_config))
        self._attempts, self._timeout_s = attempts, timeout_s

    def describe(self) -> list[Acl]:
        """Every ACL on a topic pattern (LITERAL or PREFIXED), sorted. AuthorizerMissing when
        the cluster has no authorizer; AclsUnreadable when it does not answer."""

        def call() -> list[AclBinding]:
            try:
                return self._admin.describe_acls(_ALL_TOPIC_ACLS, request_timeout=self._timeout_s).result(self._timeout_s + 5)
            except KafkaException as exc:
                if _code(exc) == KafkaError.SECURITY_DISABLED:
                    raise AuthorizerMissing(f"cluster {self.cluster!r} has no authorizer (SECURITY_DISABLED): "
                                            "set authorizer.class.name on its brokers, or leave it out of ACL sync") from exc
                raise

        bindings = with_retries(call, what=f"describing the ACLs of cluster {self.cluster!r} failed", error=AclsUnreadable,
                                attempts=self._attempts)
        out = []
        for b in bindings:
            pattern = b.resource_pattern_type.name
            if b.restype != ResourceType.TOPIC or pattern not in _PATTERNS:
                continue
            out.append(Acl(pattern, b.name, b.principal, b.host, b.operation.name, b.permission_type.name))
        return sorted(out)

    def create(self, acls: Iterable[Acl]) -> dict[Acl, str]:
        """Create `acls` in one request; the ones that failed -> why (one attempt each: the
        next pass tries again, creating an existing ACL changes nothing)."""
        wanted = {
            AclBinding(ResourceType.TOPIC, a.name, _PATTERNS[a.pattern], a.principal, a.host,
                       AclOperation[a.operation], AclPermissionType[a.permission]): a
            for a in acls
        }
        if not wanted:
            return {}
        failures: dict[Acl, str] = {}
        try:
            futures = self._admin.create_acls(list(wanted), request_timeout=self._timeout_s)
        except KafkaException as exc:
            return {a: f"cluster {self.cluster!r}: {exc}" for a in wanted.values()}
        for binding, future in futures.items():
            try:
                future.result(self._timeout_s + 5)
            except Exception as exc:  # KafkaException or a timeout: reported per ACL, the pass goes on
                failures[wanted[binding]] = f"cluster {self.cluster!r}: {exc}"
        return failures
