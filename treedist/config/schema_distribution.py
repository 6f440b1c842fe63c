"""`schemas`: schema distribution from the primary's registry to every other cluster's."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, StrictStr, field_validator

from treedist.config.frozen import Frozen
from treedist.topology.naming import is_valid_topic


class SchemasConfig(Frozen):
    """Schema distribution (docs/schemas.md): schemas are registered on `primary` only and
    copied from its `_schemas` topic to every other cluster's, subjects translated. Cluster
    names are checked by the Deployment."""

    primary: StrictStr
    """The cluster whose registry takes registrations; its `_schemas` topic is copied to every other cluster's."""

    registries: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """Registry URL (http or https) per cluster, for clients and `treedist schemas diff`."""

    subject_format: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    """A cluster's subject naming where it differs from its `topic_format` (same placeholders, values from the
    cluster's `vars`)."""

    topic: StrictStr = "_schemas"
    """The registries' storage topic (Confluent's `kafkastore.topic`)."""

    allowed_hosts: tuple[Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._:\[\]-]+$")], ...] = ()
    """Host names `treedist registry serve` answers besides loopback and the host of its own URL in `registries` (a
    name behind a proxy or load balancer); other hosts get 421."""

    @field_validator("registries")
    @classmethod
    def _urls(cls, registries: dict[str, str]) -> dict[str, str]:
        for cluster, url in registries.items():
            if not re.match(r"^https?://[^\s/]+", url):
                raise ValueError(f"{cluster}: {url!r} is not an http(s) URL")
        return {c: u.rstrip("/") for c, u in registries.items()}

    @field_validator("topic")
    @classmethod
    def _topic(cls, topic: str) -> str:
        if not is_valid_topic(topic):
            raise ValueError(f"{topic!r} is not a valid topic name")
        return topic
