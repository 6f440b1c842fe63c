"""An etcd client for a deployment's `control:` section: endpoints, TLS and credentials (runs
in whichever process talks to etcd: a worker's driver, the CLI).

The section always comes from the deployment file a process was given, never from the live
config in etcd: what a worker trusts to reach etcd cannot be changed by writing to etcd.
"""

from __future__ import annotations

from typing import Any

from treedist.config import secrets
from treedist.config.control import ControlConfig
from treedist.control.etcd import Credentials, EtcdClient, Tls


def etcd_client(control: ControlConfig, source: str, *, unresolved: bool = False, **options: Any) -> EtcdClient:
    """The client for `control`. With `unresolved` (the section was loaded with its
    references kept, as `treedist config` does), a `${env:..}`/`${file:..}` password is
    resolved here: a ConfigError names `control.auth.password` and the reference, never a
    value. `options` go to EtcdClient (timeout_s, attempts, ...)."""
    tls = None
    if control.etcd_tls is not None:
        tls = Tls(control.etcd_tls.ca, control.etcd_tls.cert, control.etcd_tls.key)
    auth = None
    if control.auth is not None:
        password = control.auth.password.get_secret_value()
        if unresolved:
            spec = {"control": {"auth": {"password": password}}}
            password = secrets.resolve(spec, source).spec["control"]["auth"]["password"]
        auth = Credentials(control.auth.user, password)
    return EtcdClient(list(control.etcd), tls=tls, auth=auth, **options)
