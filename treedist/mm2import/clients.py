"""Java client settings of one MM2 cluster alias -> librdkafka's `client` settings (pure; CLI).

MM2 reads a cluster's client settings from the top level (every cluster), from `<alias>.`
(that cluster) and from `<alias>.consumer.`, `.producer.` and `.admin.` (one role). treedist
has one `client` mapping per cluster, given to every client of it: connection and security
settings are mapped from whichever of these sets them (the cluster's own first; roles only
when they agree), role tuning is left to treedist's own defaults and listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from treedist.config.secrets import is_secret_key
from treedist.mm2import.report import Report

ROLES = ("consumer", "producer", "admin")

# Java name -> librdkafka name, for settings that mean the same to every client.
SAME = {k: k for k in (
    "security.protocol", "sasl.mechanism", "sasl.kerberos.service.name", "client.id", "request.timeout.ms",
    "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms", "metadata.max.age.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms", "retry.backoff.max.ms",
    "connections.max.idle.ms", "client.dns.lookup", "sasl.oauthbearer.token.endpoint.url", "client.rack",
)}
RENAMED = {"receive.buffer.bytes": "socket.receive.buffer.bytes", "send.buffer.bytes": "socket.send.buffer.bytes"}
SPECIAL = {
    "sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.endpoint.identification.algorithm",
}
CLIENT_KEYS = set(SAME) | set(RENAMED) | SPECIAL
PEM_PATH = re.compile(r"\.(pem|crt|cer)$", re.I)
P12_PATH = re.compile(r"\.(p12|pfx)$", re.I)
TUNING_TODO = ("a role's tuning: treedist's producers and consumers have their own (idempotent, acks=all, 1 MiB "
               "batches, 20 ms linger; kafka/clients.py); a `client` setting reaches every client of the cluster, so "
               "add it to clients.<c>.client by hand only if every client should have it")
SSL_TODO = "librdkafka uses OpenSSL's defaults here (ssl.cipher.suites takes OpenSSL names); set it by hand if needed"


@dataclass(frozen=True)
class Given:
    """One Java client setting as the file gives it: where (the key as written) and value."""

    setting: str
    value: str


def cluster_client(alias: str, top: dict[str, Given], own: dict[str, Given], roles: dict[str, dict[str, Given]],
                   report: Report) -> dict[str, object]:
    """The librdkafka settings of cluster `alias`: `own` (`<alias>.k`) over `top` (`k`), then
    what every role that sets a key agrees on; the rest reported. Credentials become
    `${env:...}` references (report.secrets)."""
    java: dict[str, Given] = {**top, **own}
    for key in sorted({k for r in roles.values() for k in r}):
        given = [roles[r][key] for r in ROLES if key in roles.get(r, {})]
        if key not in CLIENT_KEYS:
            for g in given:
                report.skip(g.setting, g.value, _role_todo(key))
            continue
        if key in java:
            for g in given:
                if g.value != java[key].value:
                    report.skip(g.setting, g.value, f"differs from {java[key].setting}, which is imported: treedist "
                                                    f"has one client setting per cluster")
            continue
        java[key] = given[0]
        for g in given[1:]:
            if g.value != given[0].value:
                report.skip(g.setting, g.value, f"differs from {given[0].setting}, which is imported: treedist has "
                                                f"one client setting per cluster")
    return _librdkafka(alias, java, report)


def _credential(name: str) -> bool:
    """A value held as `${env:...}`: treedist's credential keys, less URLs (a token endpoint)."""
    return is_secret_key(name) and not name.endswith(".url")


def _role_todo(key: str) -> str:
    if key == "bootstrap.servers":
        return "treedist uses the cluster's one bootstrap_servers for every client"
    if key in ("acks", "enable.idempotence"):
        return "treedist's producers are always idempotent with acks=all (no loss)"
    if key == "isolation.level":
        return "treedist reads what its delivery mode needs (distributor.delivery)"
    if key.startswith("ssl.") or key.startswith("sasl."):
        return SSL_TODO if key.startswith("ssl.") else "no librdkafka equivalent: set the client by hand"
    return TUNING_TODO


def _librdkafka(alias: str, java: dict[str, Given], report: Report) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, given in java.items():
        if key in SAME or key in RENAMED:
            name = SAME.get(key) or RENAMED[key]
            out[name] = report.secrets.reference(alias, name) if _credential(name) else given.value
        elif key == "ssl.endpoint.identification.algorithm":
            out[key] = given.value if given.value.strip() else "none"
        elif key not in SPECIAL:
            if key.startswith("ssl."):
                report.skip(given.setting, given.value, SSL_TODO)
            else:
                report.skip(given.setting, given.value, "not a client setting treedist knows: set it by hand in "
                                                        f"clusters.{alias}.client under its librdkafka name, if any")
    if "sasl.jaas.config" in java:
        out.update(_jaas(alias, java["sasl.jaas.config"], report))
    out.update(_truststore(alias, java, report))
    out.update(_keystore(alias, java, report))
    return out


# `Module required key="value" key=value ...;` (quoted values may hold `\"`)
_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)\b(?P<opts>.*?);?\s*$",
                   re.S)
_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')


def jaas_options(text: str) -> tuple[str, dict[str, str]] | None:
    """(login module, options) of a `sasl.jaas.config` value, or None if it does not parse."""
    match = _JAAS.match(text)
    if match is None:
        return None
    options = {}
    for key, value in _OPTION.findall(match.group("opts")):
        options[key] = re.sub(r"\\(.)", r"\1", value[1:-1]) if value.startswith('"') else value
    return match.group("module"), options


def jaas_secrets(text: str) -> list[str]:
    """The credentials inside a JAAS config value (for tests that no copy of them leaks)."""
    parsed = jaas_options(text)
    if parsed is None:
        return []
    return [v for k, v in parsed[1].items() if re.search(r"password|secret", k, re.I)]


def _jaas(alias: str, given: Given, report: Report) -> dict[str, object]:
    parsed = jaas_options(given.value)
    if parsed is None:
        report.skip(given.setting, given.value, "a JAAS config that does not parse: set sasl.username and "
                                                "sasl.password (or the OAUTHBEARER settings) by hand")
        return {}
    module, options = parsed
    short = module.rsplit(".", 1)[-1]
    out: dict[str, object] = {}
    if short in ("PlainLoginModule", "ScramLoginModule"):
        known = {"username": "sasl.username", "password": "sasl.password"}
    elif short == "OAuthBearerLoginModule":
        known = {"clientId": "sasl.oauthbearer.client.id", "clientSecret": "sasl.oauthbearer.client.secret",
                 "scope": "sasl.oauthbearer.scope"}
        if "clientId" in options:
            out["sasl.oauthbearer.method"] = "oidc"
    elif short == "Krb5LoginModule":
        known = {"keyTab": "sasl.kerberos.keytab", "principal": "sasl.kerberos.principal"}
    else:
        report.skip(given.setting, given.value, f"login module {module} has no librdkafka equivalent: configure the "
                                                f"SASL settings of clusters.{alias}.client by hand")
        return {}
    for option, value in options.items():
        if option in known:
            name = known[option]
            out[name] = report.secrets.reference(alias, name) if _credential(name) else value
        elif not (short == "Krb5LoginModule" and option in ("useKeyTab", "storeKey", "serviceName", "useTicketCache")):
            report.skip(f"{given.setting} ({option})", "***" if re.search("password|secret", option, re.I) else value,
                        f"a {short} option without a librdkafka equivalent")
    return out


def _truststore(alias: str, java: dict[str, Given], report: Report) -> dict[str, object]:
    out: dict[str, object] = {}
    location, kind = java.get("ssl.truststore.location"), java.get("ssl.truststore.type")
    password = java.get("ssl.truststore.password")
    if "ssl.truststore.certificates" in java:
        out["ssl.ca.pem"] = java["ssl.truststore.certificates"].value
    pem = location is not None and (kind.value.upper() == "PEM" if kind else bool(PEM_PATH.search(location.value)))
    if location is not None and pem:
        out["ssl.ca.location"] = location.value
        if password is not None:
            report.skip(password.setting, password.value, "a PEM truststore has no password in librdkafka: not needed")
    elif location is not None:
        report.skip(location.setting, location.value,
                    f"librdkafka reads CA certificates as PEM: export them (`keytool -exportcert -rfc -keystore "
                    f"{location.value} > ca.pem`, or `openssl pkcs12 -in {location.value} -nokeys -out ca.pem`) and "
                    f"set clients.{alias}.client.ssl.ca.location")
        if password is not None:
            report.skip(password.setting, password.value, "needed only to export the truststore above")
    elif password is not None:
        report.skip(password.setting, password.value, "no truststore given: not needed")
    if kind is not None and location is None and "ssl.truststore.certificates" not in java:
        report.skip(kind.setting, kind.value, "no truststore given: not needed")
    return out


def _keystore(alias: str, java: dict[str, Given], report: Report) -> dict[str, object]:
    out: dict[str, object] = {}
    location, kind = java.get("ssl.keystore.location"), java.get("ssl.keystore.type")
    store_pw, key_pw = java.get("ssl.keystore.password"), java.get("ssl.key.password")
    if "ssl.keystore.key" in java:
        out["ssl.key.pem"] = report.secrets.reference(alias, "ssl.key.pem")
    if "ssl.keystore.certificate.chain" in java:
        out["ssl.certificate.pem"] = java["ssl.keystore.certificate.chain"].value
    kind_name = kind.value.upper() if kind else ""
    if location is not None:
        path = location.value
        if kind_name == "PEM" or (not kind and PEM_PATH.search(path)):
            # a PEM keystore holds the key and its certificate chain: OpenSSL reads each from the same file
            out["ssl.key.location"] = path
            out["ssl.certificate.location"] = path
            if store_pw is not None:
                report.skip(store_pw.setting, store_pw.value, "a PEM keystore has no store password: not needed")
        elif kind_name == "PKCS12" or (not kind and P12_PATH.search(path)):
            out["ssl.keystore.location"] = path
            if store_pw is not None:
                out["ssl.keystore.password"] = report.secrets.reference(alias, "ssl.keystore.password")
        else:
            report.skip(location.setting, path,
                        f"librdkafka reads PKCS#12 or PEM keystores, not JKS: convert it (`keytool -importkeystore "
                        f"-srckeystore {path} -destkeystore client.p12 -deststoretype PKCS12`) and set "
                        f"clients.{alias}.client.ssl.keystore.location and ssl.keystore.password")
            if store_pw is not None:
                report.skip(store_pw.setting, store_pw.value, "needed only to convert the keystore above")
    elif store_pw is not None:
        report.skip(store_pw.setting, store_pw.value, "no keystore given: not needed")
    if key_pw is not None and ("ssl.key.location" in out or "ssl.key.pem" in out or "ssl.keystore.location" in out):
        out["ssl.key.password"] = report.secrets.reference(alias, "ssl.key.password")
    elif key_pw is not None:
        report.skip(key_pw.setting, key_pw.value, "no keystore imported: set it with the converted keystore")
    if kind is not None and location is None and "ssl.keystore.key" not in java:
        report.skip(kind.setting, kind.value, "no keystore given: not needed")
    return out
