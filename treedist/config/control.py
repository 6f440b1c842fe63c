"""The `control:` section of a deployment: the control plane on etcd (treedist.control).

```yaml
control:
  etcd: ["http://127.0.0.1:2379"]   # etcd's client URLs (its v3 JSON gateway)
  prefix: /treedist                 # every key of this deployment lives under it
  lease_ttl: 10s                    # a worker that stops renewing loses its units after this
  report_interval: 2s               # load reports
  resync_interval: 30s              # full re-read of etcd by each worker's metadata cache
  strategy: fair                    # fair (unit count) | balanced (records/s, CPU, memory)
  rebalance: {threshold: 0.25, cooldown: 60s, max_moves_per_hour: 12}
  affinity: true                    # prefer workers whose labels match the source cluster's labels
  etcd_tls: {ca: /etc/treedist/etcd-ca.crt, cert: /etc/treedist/etcd-client.crt, key: /etc/treedist/etcd-client.key}
  auth: {user: treedist, password: "${env:ETCD_PASSWORD}"}   # etcd's users and roles
  allow_unsafe_spark_conf: false    # honoured from the local file only, never from etcd
```
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, StrictBool, StrictStr, field_validator, model_validator

from treedist.config.durations import Duration
from treedist.config.frozen import Frozen

_URL = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+:\d{1,5}/?$")


class RebalanceConfig(Frozen):
    threshold: float = Field(default=0.25, gt=0)
    """Units move from the most to the least loaded worker once the coefficient of variation of the workers' loads
    (standard deviation / mean) passes this, while each move lowers it."""

    cooldown: Duration = 60.0
    """No rebalance within this time of the last one."""

    max_moves_per_hour: int = Field(default=12, ge=0)
    """Most rebalancing moves in any hour (each move restarts the unit on another worker); 0: none."""


class EtcdTlsConfig(Frozen):
    """TLS to etcd's client URLs (which are then all `https://`)."""

    ca: StrictStr | None = Field(default=None, min_length=1)
    """PEM file of the CA that signed etcd's server certificate (etcd's `--trusted-ca-file` side); without it, the
    system's CAs."""

    cert: StrictStr | None = Field(default=None, min_length=1)
    """PEM client certificate, for an etcd started with `--client-cert-auth`. With etcd's authentication on, it must
    have no Common Name: etcd's JSON gateway refuses a certificate that has one (CVE-2018-16886); the user comes
    from `auth`."""

    key: StrictStr | None = Field(default=None, min_length=1)
    """PEM file of the client certificate's private key (unencrypted); given with `cert`."""

    @model_validator(mode="after")
    def _pair(self) -> "EtcdTlsConfig":
        if (self.cert is None) != (self.key is None):
            raise ValueError("cert and key are given together (the client certificate and its private key)")
        return self


class EtcdAuthConfig(Frozen):
    """etcd's own authentication (`etcdctl auth enable`): a user whose role may touch the
    deployment's `prefix`; treedist logs in for a token and renews it when etcd drops it."""

    user: StrictStr = Field(min_length=1)
    """etcd user name."""

    password: SecretStr
    """The user's password; give it as `${env:NAME}` or `${file:/path}` so that neither the file nor etcd (the
    stored deployment) holds it (treedist.config.secrets)."""


class ControlConfig(Frozen):
    etcd: tuple[str, ...] = Field(min_length=1)
    """etcd's client URLs, e.g. `http://127.0.0.1:2379` (its v3 JSON gateway)."""

    prefix: str = "/treedist"
    """Every etcd key of this deployment lives under it (starts with '/', does not end with one;
    [A-Za-z0-9/._-])."""

    lease_ttl: Duration = 10.0
    """A worker that stops renewing its lease loses its units and leadership after this (at least 2 s: etcd's leases
    count whole seconds)."""

    report_interval: Duration = 2.0
    """How often each worker reports its load; below half of `lease_ttl`, or its reports look stale to the
    leader."""

    resync_interval: Duration = 30.0
    """How often each worker re-reads every key under `prefix` (repairs missed watch events)."""

    strategy: Literal["fair", "balanced"] = "fair"
    """How units are assigned: `fair` evens out the unit count per worker; `balanced` the measured load (records/s,
    bytes/s, CPU, memory)."""

    rebalance: RebalanceConfig = RebalanceConfig()
    """When units move between running workers."""

    affinity: StrictBool = True
    """Units prefer workers whose labels match their source cluster's `labels`."""

    etcd_tls: EtcdTlsConfig | None = None
    """TLS to etcd: `{ca, cert, key}` PEM files; every URL of `etcd` is then `https://`."""

    auth: EtcdAuthConfig | None = None
    """etcd's authentication: `{user, password}`; the password preferably a secret reference."""

    allow_unsafe_spark_conf: StrictBool = False
    """Let `spark.conf` carry settings outside treedist's allow-list (extraJavaOptions, extraClassPath, plugins,
    jars, Python worker settings...: each can run code on every worker). Honoured only from the deployment file a
    worker or command is given, never from the live config in etcd."""

    allowed_references: tuple[str, ...] = ()
    """Secret references (fnmatch patterns, e.g. `${env:KAFKA_*}`, `${file:/etc/treedist/secrets/*}`) that a live
    config from etcd may resolve on this host, besides those this file uses itself. Honoured only from the
    deployment file a worker is given: whoever writes etcd cannot make a worker read other files or variables."""

    @field_validator("etcd")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            if not _URL.match(url):
                raise ValueError(f"{url!r} is not an etcd client URL like http://127.0.0.1:2379")
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if not value.startswith("/") or value.endswith("/") or "//" in value or not re.fullmatch(r"[A-Za-z0-9/._-]+", value):
            raise ValueError(f"{value!r}: a key prefix starts with '/', does not end with '/', and uses [A-Za-z0-9/._-]")
        return value

    @field_validator("lease_ttl")
    @classmethod
    def _ttl(cls, value: float) -> float:
        if value < 2:
            raise ValueError(f"at least 2 s (etcd's leases count whole seconds), got {value}")
        return value

    @model_validator(mode="after")
    def _tls_urls(self) -> "ControlConfig":
        if self.etcd_tls is not None:
            plain = [url for url in self.etcd if not url.startswith("https://")]
            if plain:
                raise ValueError(f"etcd_tls is given but {plain[0]!r} is not https://")
        return self

    @model_validator(mode="after")
    def _reports_within_the_lease(self) -> "ControlConfig":
        if self.report_interval >= self.lease_ttl / 2:
            raise ValueError(f"report_interval ({self.report_interval:g} s) must be below half the lease_ttl "
                             f"({self.lease_ttl:g} s), or load reports look stale to the leader")
        return self
