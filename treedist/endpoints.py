"""How treedist's own HTTP endpoints are exposed: the Prometheus metrics, the web view, a
worker's view and the schema registry. Runs in the process that serves them (the driver of
`treedist run`/`status`/`worker`, or the registry process).

One `Exposure` says where an endpoint listens and how it is protected; `from_flags` builds it
from the command line (`--bind`, `--tls-cert`, `--tls-key`, `--auth-user`, `--auth-password`,
`--insecure`) and checks it before anything is started:

1. the password, when it is a `${env:NAME}` / `${file:/path}` reference, is resolved
   (treedist.config.secrets; an error names the reference, never a value);
2. the TLS pair is loaded once into a server context, so that a missing or bad file is exit 2
   naming the flag (uvicorn loads the same files again when it starts);
3. the bind check: a loopback address (127.0.0.0/8, ::1, `localhost`) needs nothing; any
   other address, wildcards (`0.0.0.0`, `::`) and host names included (a name may resolve to
   anything), is refused without basic auth unless `--insecure` says it is meant.

`BasicAuthGuard` is the ASGI middleware that answers 401 to every HTTP request without the
right `Authorization: Basic` header. The comparison is constant-time: user and password are
both hashed and both compared with `hmac.compare_digest`, whatever the first comparison gave.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from treedist.config.errors import ConfigError
from treedist.config.secrets import resolve
from treedist.errors import TreedistError

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
REALM = "treedist"
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
GRACEFUL_STOP_S = 3  # seconds a stopping server waits for open connections (uvicorn_options)


class EndpointError(TreedistError):
    """An endpoint that cannot be served as asked (bind, TLS, auth flags); names the flag."""


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or `localhost`; any other name is not (it may
    resolve to any address), nor is a wildcard."""
    host = host.strip().lower().removeprefix("[").removesuffix("]")
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()  # equal lengths for compare_digest: no length leak


def parse_basic(header: str | bytes | None) -> tuple[bytes, bytes] | None:
    """(user, password) of an `Authorization: Basic <base64(user:password)>` header, or None
    when the header is absent or not that (RFC 7617: the user holds no colon)."""
    if header is None:
        return None
    if isinstance(header, str):
        header = header.encode("latin-1", "replace")
    scheme, _, token = header.strip().partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None


@dataclass(frozen=True)
class BasicAuth:
    """The one user and password an endpoint accepts (the password never printed)."""

    user: str
    password: str = field(repr=False)
    _user_digest: bytes = field(init=False, repr=False, compare=False)
    _password_digest: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_user_digest", _digest(self.user.encode()))
        object.__setattr__(self, "_password_digest", _digest(self.password.encode()))

    def matches(self, header: str | bytes | None) -> bool:
        """Whether an Authorization header carries this user and password; both are compared
        in constant time, and both always (a wrong user costs what a wrong password costs)."""
        given = parse_basic(header)
        user, password = given if given is not None else (b"", b"")
        user_ok = hmac.compare_digest(_digest(user), self._user_digest)
        password_ok = hmac.compare_digest(_digest(password), self._password_digest)
        return given is not None and user_ok & password_ok


class BasicAuthGuard:
    """ASGI middleware: an HTTP request without this user and password is answered 401 with
    `WWW-Authenticate: Basic` before any route runs (a WebSocket is closed); lifespan
    events pass. `body` and `content_type` let the registry answer in Confluent's format."""

    def __init__(self, app: ASGIApp, auth: BasicAuth, body: bytes = b"401 Unauthorized: basic auth required\n",
                 content_type: bytes = b"text/plain; charset=utf-8") -> None:
        self.app, self.auth, self.body, self.content_type = app, auth, body, content_type

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), None)
            if not self.auth.matches(header):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"www-authenticate", f'Basic realm="{REALM}", charset="UTF-8"'.encode()),
                                        (b"content-type", self.content_type),
                                        (b"content-length", str(len(self.body)).encode())]})
                await send({"type": "http.response.body", "body": self.body})
                return
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class Exposure:
    """Where an endpoint listens and how it is protected. The default is what every endpoint
    did before: plain HTTP on 127.0.0.1 without authentication."""

    bind: str = LOOPBACK
    tls_cert: Path | None = None
    tls_key: Path | None = None
    auth: BasicAuth | None = None
    insecure: bool = False

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def url(self, port: int, path: str = "/") -> str:
        """The URL to print; a wildcard bind prints as the loopback address (this host)."""
        host = LOOPBACK if self.bind in WILDCARDS else self.bind
        if ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{port}{path}"

    def uvicorn_options(self) -> dict[str, Any]:
        """uvicorn.Config's TLS arguments (none for plain HTTP) and the bound on a graceful stop.

        The bound: an idle keep-alive TLS connection holds a stop for asyncio's SSL shutdown
        timeout (30 s, waiting for the peer's close_notify), as long as Kubernetes' default
        grace period; past GRACEFUL_STOP_S uvicorn closes what is left."""
        options: dict[str, Any] = {"timeout_graceful_shutdown": GRACEFUL_STOP_S}
        if self.tls:
            options.update(ssl_certfile=str(self.tls_cert), ssl_keyfile=str(self.tls_key))
        return options

    def wrap(self, app: ASGIApp, **guard: Any) -> ASGIApp:
        """`app` behind the basic-auth guard when auth is set (`guard`: BasicAuthGuard's body
        and content_type)."""
        return BasicAuthGuard(app, self.auth, **guard) if self.auth is not None else app

    def checked(self) -> "Exposure":
        """This exposure once its TLS files load and its bind is allowed (steps 2 and 3 of
        the module's docstring); EndpointError naming the flag otherwise."""
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = ("--tls-cert", "--tls-key") if self.tls_key is None else ("--tls-key", "--tls-cert")
            raise EndpointError(f"{given} needs {missing} too (a PEM certificate and its unencrypted key)")
        if self.tls:
            server_context(self.tls_cert, self.tls_key)
        if not is_loopback(self.bind) and self.auth is None and not self.insecure:
            raise EndpointError(
                f"--bind {self.bind or '(all addresses)'}: not a loopback address, and no --auth-user/--auth-password: "
                "refusing to serve without authentication (add them, or --insecure to serve anyway)")
        if not is_loopback(self.bind) and self.auth is not None and not self.tls:
            log.warning("--bind %s with basic auth over plain HTTP: the password crosses the network in the clear "
                        "(add --tls-cert and --tls-key)", self.bind)
        return self


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A TLS server context with `cert` (PEM, chain allowed) and its unencrypted `key`;
    EndpointError naming both flags and the reason (never the files' content)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(cert), str(key), password=lambda: b"")  # an encrypted key fails, never prompts
    except (OSError, ssl.SSLError) as err:
        reason = getattr(err, "strerror", None) or getattr(err, "reason", None) or type(err).__name__
        raise EndpointError(f"--tls-cert {cert} / --tls-key {key}: cannot load the certificate and key: {reason}") from None
    return context


def from_flags(bind: str = LOOPBACK, tls_cert: Path | str | None = None, tls_key: Path | str | None = None,
               auth_user: str | None = None, auth_password: str | None = None, insecure: bool = False) -> Exposure:
    """The Exposure the command-line flags ask for, checked (`Exposure.checked`). The
    password may be a `${env:NAME}` or `${file:/path}` reference (a literal one shows in `ps`)."""
    if (auth_user is None) != (auth_password is None):
        given, missing = ("--auth-user", "--auth-password") if auth_password is None else ("--auth-password", "--auth-user")
        raise EndpointError(f"{given} needs {missing} too")
    auth = None
    if auth_user is not None:
        if not auth_user or ":" in auth_user:
            raise EndpointError(f"--auth-user {auth_user!r}: must be non-empty and hold no ':' (HTTP basic auth)")
        try:
            password = resolve({"--auth-password": auth_password}, "the command line").spec["--auth-password"]
        except ConfigError as err:
            raise EndpointError(str(err)) from None
        if not password:
            raise EndpointError("--auth-password: empty")
        auth = BasicAuth(auth_user, password)
    return Exposure(bind=bind, tls_cert=Path(tls_cert) if tls_cert else None, tls_key=Path(tls_key) if tls_key else None,
                    auth=auth, insecure=insecure).checked()
