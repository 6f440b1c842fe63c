"""`clusters.<name>`: one Kafka cluster of the deployment (its brokers, client settings, topic
name format, labels, passive).
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from treedist.config.frozen import Frozen
from treedist.config.secrets import is_secret_key
from treedist.topology.naming import DEFAULT_FORMAT, NamingError, TopicFormat, check_var_value, parse_template

CLUSTER_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"

ClientValue = Annotated[
    Union[StrictBool, StrictInt, StrictFloat, StrictStr, SecretStr], Field(union_mode="left_to_right")
]


VarValue = Annotated[StrictStr, AfterValidator(check_var_value)]


class ClusterConfig(Frozen):
    """One Kafka cluster (`clusters.<name>`); the keys are described on their fields.

    `topic_format` and `vars` are parsed by treedist.topology.naming.
    """

    bootstrap_servers: str = Field(min_length=1)
    """The cluster's brokers, `host:port[,host:port...]` (librdkafka's bootstrap.servers)."""

    client: dict[str, ClientValue] = Field(default_factory=dict)
    """librdkafka settings for every client of this cluster (security, timeouts, ...), passed through untouched;
    values are strings, numbers or booleans. Credentials (keys with password, secret, token, ...) are never printed.
    `bootstrap.servers` goes in `bootstrap_servers`, not here."""

    topic_format: StrictStr = DEFAULT_FORMAT
    """How this cluster names the deployment's logical topics: a template with `{topic}` exactly once, other
    placeholders filled from `vars` (e.g. `{tenant}-{env}-{topic}`). The default keeps the logical name. A physical
    topic that does not fit is not distributed."""

    vars: dict[StrictStr, VarValue] = Field(default_factory=dict, validate_default=True)
    """Values of the placeholders of `topic_format` (and of this cluster's `schemas.subject_format`): each
    placeholder besides `{topic}` needs one."""

    labels: dict[Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._-]+$")],
                 Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9._-]+$")]] = Field(default_factory=dict)
    """Control plane: units whose source is this cluster prefer workers with the same labels (e.g. `dc: eu1`; keys
    and values of [A-Za-z0-9._-])."""

    passive: StrictBool = False
    """Records produced on this cluster are not distributed: it only receives the other clusters' records (a one-way
    link, an active-passive standby). It runs no distributor. Allowed only where no copy has to pass through it: it
    may receive only from the distributors of its own parent node (its sibling leaf's, or an override's), since a
    copy arriving at a higher level would be relayed by it (docs/architecture.md, "Passive clusters"). At least one
    cluster must be active."""

    @field_validator("topic_format")
    @classmethod
    def _format_parses(cls, value: str) -> str:
        try:
            parse_template(value)
        except NamingError as err:
            raise ValueError(err.reason) from None
        return value

    @field_validator("vars")
    @classmethod
    def _vars_fill_the_format(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if "topic_format" not in info.data:
            return value  # the format itself failed; that error is reported
        try:
            TopicFormat.parse(info.data["topic_format"], value)
        except NamingError as err:
            raise ValueError(err.reason) from None
        return value

    def parsed_format(self) -> TopicFormat:
        return TopicFormat.parse(self.topic_format, self.vars)

    @field_validator("client", mode="before")
    @classmethod
    def _hide_secrets(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        for key, item in value.items():
            if item is None or isinstance(item, (dict, list)):
                raise ValueError(f"client[{key!r}]: a librdkafka setting is a string, number or boolean, got {item!r}")
        # credentials (treedist.config.secrets.SECRET_KEY) are kept as SecretStr, never printed
        return {k: SecretStr(str(v)) if is_secret_key(k) else v for k, v in value.items()}

    @field_validator("client")
    @classmethod
    def _no_bootstrap_in_client(cls, value: dict) -> dict:
        if "bootstrap.servers" in value:
            raise ValueError("set bootstrap_servers, not client['bootstrap.servers']")
        return value

    def client_config(self, **overrides: object) -> dict[str, object]:
        """librdkafka settings for confluent-kafka, credentials revealed."""
        conf: dict[str, object] = {"bootstrap.servers": self.bootstrap_servers}
        for key, value in self.client.items():
            conf[key] = value.get_secret_value() if isinstance(value, SecretStr) else value
        conf.update(overrides)
        return conf
