"""Local Apache Kafka clusters whose only client listener is SASL_SSL with SCRAM-SHA-512.

Runs on the machine that starts local clusters (a test's, a benchmark's), never on an
executor. `create_tls` makes a CA and one broker certificate (SAN 127.0.0.1 and localhost: every
local cluster listens on loopback, so one certificate serves all of them) with openssl;
`secured_options` turns them and the SCRAM users into the `options` of `LocalClusters.start`
(kafka_broker.py); `client_settings` are the librdkafka settings a client (treedist's
deployment `client:` section, a test's producer) needs to reach them. `start_secured` does all
three.

The broker reads its certificate and key inline (`ssl.keystore.type=PEM`): a PEM *file*
keystore would need an encrypted key and a key password. Inter-broker traffic uses the same
listener, so the broker logs in as `admin` itself; that user's password is made here at random.

The options (and so the state file `clusters.json` beside the brokers' data) hold the broker's
private key and the admin password: the directory is the test's own, and nothing here prints
them. The SCRAM users' passwords go to `kafka-storage format` only.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from treedist.local.errors import LocalClusterError
from treedist.local.local_clusters import LocalClusters

MECHANISM = "SCRAM-SHA-512"
PROTOCOL = "SASL_SSL"
ADMIN_USER = "admin"
HOSTS = ("127.0.0.1", "localhost")  # what clients connect to: the certificate names both
DAYS = 30
# `--add-scram NAME=[name=U,password=P]` and the JAAS line quote nothing: these would break them.
_FORBIDDEN = set(',[]="\\;') | {" ", "\t", "\n"}


@dataclass(frozen=True)
class TlsFiles:
    """PEM files made by `create_tls`: the CA (clients' `ssl.ca.location`) and the broker's pair."""

    ca_cert: Path
    ca_key: Path
    broker_cert: Path
    broker_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise LocalClusterError(f"openssl {args[0]} in {cwd} failed: {(proc.stdout + proc.stderr)[-1000:]}")


def make_ca(directory: Path, name: str = "treedist local CA") -> tuple[Path, Path]:
    """A self-signed CA in `directory`: (ca.crt, ca.key). A second CA made with it is one a
    client does not trust (the untrusted-certificate case)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", str(DAYS), "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=directory)
    return directory / "ca.crt", directory / "ca.key"


def make_broker_cert(directory: Path, ca_cert: Path, ca_key: Path) -> tuple[Path, Path]:
    """A server certificate signed by the CA, valid for HOSTS: (broker.crt, broker.key); the key
    is unencrypted PKCS#8, as Kafka's inline PEM keystore reads it."""
    ip = [f"IP:{h}" for h in HOSTS if h[0].isdigit()]
    dns = [f"DNS:{h}" for h in HOSTS if not h[0].isdigit()]
    return _signed(directory, "broker", ca_cert, ca_key, "/CN=localhost",
                   f"subjectAltName={','.join(ip + dns)}\nextendedKeyUsage=serverAuth,clientAuth\n")


def make_client_cert(directory: Path, ca_cert: Path, ca_key: Path) -> tuple[Path, Path]:
    """A client certificate signed by the CA, with no Common Name: (client.crt, client.key).
    With authentication on, etcd's JSON gateway refuses a client certificate that has one
    (CVE-2018-16886); the user comes from the login instead."""
    return _signed(directory, "client", ca_cert, ca_key, "/O=treedist", "extendedKeyUsage=clientAuth\n")


def _signed(directory: Path, name: str, ca_cert: Path, ca_key: Path, subject: str, extensions: str) -> tuple[Path, Path]:
    """A new key and a certificate for it signed by the CA: (NAME.crt, NAME.key) in `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n" + extensions)
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=directory)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(Path(ca_cert).resolve()), "-CAkey",
             str(Path(ca_key).resolve()), "-CAcreateserial", "-days", str(DAYS), "-sha256",
             "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=directory)
    return directory / f"{name}.crt", directory / f"{name}.key"


def create_tls(directory: Path) -> TlsFiles:
    """A CA and a broker certificate in `directory` (made once: kept files are re-used, so that
    a restarted broker keeps the certificate its clients trust)."""
    directory = Path(directory).resolve()
    files = TlsFiles(directory / "ca.crt", directory / "ca.key", directory / "broker.crt", directory / "broker.key")
    if not all(p.exists() for p in (files.ca_cert, files.ca_key)):
        make_ca(directory)
    if not all(p.exists() for p in (files.broker_cert, files.broker_key)):
        make_broker_cert(directory, files.ca_cert, files.ca_key)
    return files


def _inline(pem: str) -> str:
    """A PEM block as one properties-file value: Java's Properties turns `\\n` back into newlines."""
    return pem.strip().replace("\n", "\\n")


def _checked(user: str, password: str) -> None:
    for what, value in (("user name", user), ("password", password)):
        if not value or set(value) & _FORBIDDEN:
            # the value itself is not shown: it may be a password
            raise LocalClusterError(f"SCRAM user {user!r}: the {what} is empty or has one of , [ ] = \" \\ ; or a blank")


def secured_options(tls: TlsFiles, users: Mapping[str, str], admin_password: str) -> dict:
    """`options` for LocalClusters.start: the EXTERNAL listener SASL_SSL only, SCRAM-SHA-512,
    users `users` (name -> password) plus ADMIN_USER (the broker's own login) created when the
    log dir is formatted."""
    every = {ADMIN_USER: admin_password, **users}
    for user, password in every.items():
        _checked(user, password)
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{ADMIN_USER}" password="{admin_password}";')
    return {
        "listener_protocol": PROTOCOL,
        "scram": [f"{MECHANISM}=[name={u},password={p}]" for u, p in every.items()],
        "extra_props": {
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            f"listener.name.external.{MECHANISM.lower()}.sasl.jaas.config": jaas,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": _inline(tls.broker_cert.read_text()),
            "ssl.keystore.key": _inline(tls.broker_key.read_text()),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": _inline(tls.ca_cert.read_text()),
            "ssl.client.auth": "none",  # clients prove who they are with SCRAM, not certificates
        },
    }


def client_settings(ca_location: Path | str, username: str, password: str) -> dict[str, str]:
    """librdkafka settings that reach a secured local cluster (a deployment's `client:`)."""
    return {
        "security.protocol": PROTOCOL,
        "sasl.mechanism": MECHANISM,
        "sasl.username": username,
        "sasl.password": password,
        "ssl.ca.location": str(ca_location),
    }


@dataclass
class SecuredClusters:
    """Running secured clusters and what a client needs to reach them."""

    clusters: LocalClusters
    tls: TlsFiles
    users: dict[str, str]

    def client(self, user: str) -> dict[str, str]:
        """librdkafka settings logging in as `user` (one of the users given at the start)."""
        if user not in self.users:
            raise LocalClusterError(f"no SCRAM user {user!r} on these clusters: {sorted(self.users)}")
        return client_settings(self.tls.ca_cert, user, self.users[user])

    def stop(self) -> None:
        self.clusters.stop()


def start_secured(names: list[str], base_dir: Path | str, users: Mapping[str, str],
                  timeout: float | None = None) -> SecuredClusters:
    """Start one secured Kafka node per name in `base_dir` (certificates in `base_dir/tls`),
    each waited on through its SASL_SSL listener as ADMIN_USER. Brokers of an earlier start
    with the same state file keep their options (LocalClusters.start)."""
    base = Path(base_dir).resolve()
    tls = create_tls(base / "tls")
    admin_password = secrets.token_hex(16)
    previous = LocalClusters.load(base)
    for broker in (previous.brokers.values() if previous else []):
        if broker.options and broker.options.get("listener_protocol") == PROTOCOL:
            admin_password = _admin_password(broker.options) or admin_password  # formatted with it
            break
    options = secured_options(tls, users, admin_password)
    clusters = LocalClusters.start(names, base, timeout=timeout, engine="kafka", options=options,
                                   client=client_settings(tls.ca_cert, ADMIN_USER, admin_password))
    return SecuredClusters(clusters, tls, {**users, ADMIN_USER: admin_password})


def _admin_password(options: dict) -> str | None:
    prefix = f"{MECHANISM}=[name={ADMIN_USER},password="
    for entry in options.get("scram") or []:
        if entry.startswith(prefix):
            return entry[len(prefix):-1]
    return None
