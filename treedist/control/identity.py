"""The deployment id: generated once, kept forever (as Kafka's cluster id in the reference:
22 characters, URL-safe base64 without padding, [A-Za-z0-9_-]). Any process of the deployment."""

from __future__ import annotations

import base64
import os

from treedist.control.etcd import Compare, EtcdClient, Op
from treedist.control.keys import Keys


def new_deployment_id() -> str:
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")


def ensure_deployment_id(client: EtcdClient, prefix: str) -> str:
    """The id under `<prefix>/id`, created if absent by one transaction: two processes that
    race both get the winner's id."""
    key, candidate = Keys(prefix).id, new_deployment_id()
    result = client.txn([Compare.absent(key)], [Op.put(key, candidate)], [Op.get(key)])
    return candidate if result.succeeded else result.ranges[0][0].text()
