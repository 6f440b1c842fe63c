"""Check every cluster's librdkafka settings by building the clients, before anything starts.

Runs on the driver, before Spark: a setting librdkafka refuses (an unknown key, a bad value, a
SASL mechanism this build lacks) becomes one line that names the cluster and the key, instead
of a traceback from an executor after Spark has started.

librdkafka refuses a bad setting when the client is created, so the check builds a producer,
a consumer and an admin client with exactly the settings the distributors use and destroys
them at once (they never need the cluster to answer). librdkafka's message does not always
name the user's key (it may name an alias: `linger.ms` is reported as
`queue.buffering.max.ms`; or only a value: "No provider for SASL mechanism GSSAPI"), so the
key is found by trying the settings without each user key in turn.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Mapping

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from treedist.kafka.errors import KafkaLayerError

# librdkafka logs from the throw-away clients (e.g. "connection refused" while they are being
# destroyed) are not the user's concern here: an error is reported through the exception.
_quiet = logging.getLogger("treedist.kafka.settings_check.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False

_QUOTED_PROPERTY = re.compile(r'property "([^"]+)"')
# Settings the check itself adds; the user's own keys win over them.
_CHECK_ONLY = {"group.id": "treedist-settings-check", "logger": _quiet, "socket.connection.setup.timeout.ms": 1000}


class ClientSettingError(KafkaLayerError):
    """A cluster's client setting that librdkafka refuses; names the cluster and the key."""


def check_client_settings(cluster: str, settings: Mapping[str, object], user_keys: set[str] | None = None) -> None:
    """Raise ClientSettingError naming `cluster` and the offending key if librdkafka refuses
    `settings` for a producer, a consumer or an admin client. `user_keys` are the keys the user
    wrote (default: all but bootstrap.servers); only those are blamed."""
    keys = set(settings) - {"bootstrap.servers"} if user_keys is None else set(user_keys)
    for kind, build in _BUILDERS.items():
        problem = _refusal(build, settings)
        if problem is None:
            continue
        culprits = _culprits(build, settings, keys, problem)
        named = ", ".join(repr(k) for k in culprits) if culprits else "its client settings"
        raise ClientSettingError(
            f"cluster {cluster!r}: librdkafka refuses {named} in clusters.{cluster}.client "
            f"(building a {kind}): {_reason(problem)}; fix or remove the setting"
        )


def _build_producer(conf: dict) -> None:
    Producer(conf).flush(0)


def _build_consumer(conf: dict) -> None:
    Consumer(conf).close()


def _build_admin(conf: dict) -> None:
    AdminClient(conf)


_BUILDERS: dict[str, Callable[[dict], None]] = {
    "producer": _build_producer,
    "consumer": _build_consumer,
    "admin client": _build_admin,
}


def _refusal(build: Callable[[dict], None], settings: Mapping[str, object]) -> str | None:
    conf = {**_CHECK_ONLY, **settings}
    try:
        build(conf)
    except KafkaException as err:
        return err.args[0].str() if err.args and hasattr(err.args[0], "str") else str(err)
    except (TypeError, ValueError) as err:  # confluent-kafka's own type checks of values
        return str(err)
    return None


def _culprits(build: Callable[[dict], None], settings: Mapping[str, object], keys: set[str], problem: str) -> list[str]:
    quoted = _QUOTED_PROPERTY.search(problem)
    if quoted and quoted.group(1) in keys:
        return [quoted.group(1)]
    # A value named in the message ("No provider for SASL mechanism GSSAPI") points at its key
    # even when removing the key does not help (GSSAPI is also sasl.mechanisms' default).
    by_value = sorted(k for k in keys if k in settings and len(str(settings[k])) > 2 and str(settings[k]) in problem)
    if by_value:
        return by_value
    return sorted(k for k in keys if _refusal(build, {k2: v for k2, v in settings.items() if k2 != k}) is None)


def _reason(problem: str) -> str:
    return re.sub(r"^Failed to create (producer|consumer|admin client): ", "", problem).strip()
