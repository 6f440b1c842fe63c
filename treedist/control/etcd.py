"""A thin etcd v3 client on etcd's JSON gateway (HTTP + JSON over httpx: no gRPC, no
protobuf, so it cannot fight PySpark's or confluent-kafka's dependencies).

Runs in whichever process needs etcd (workers, the CLI). The gateway serves `/v3/...` in etcd
3.4 and later (`/v3beta/` in 3.3). Keys and values are base64 on the wire; numbers come back
as strings, and fields equal to their zero value are left out.

TLS (`control.etcd_tls`): `https://` endpoints are verified against the given CA (else the
system's CAs), and a client certificate is presented when one is given (etcd's
`--client-cert-auth`). Authentication (`control.auth`): the client logs in with
`/v3/auth/authenticate` for a token and sends it as the `Authorization` header of every
request and watch; when etcd answers that the token is invalid (it expired: simple tokens
after `--auth-token-ttl` unused, JWTs at their expiry; or etcd restarted) it logs in again
and repeats the request, at most MAX_RENEWALS times in a row.

Errors: a connection failure or timeout is retried on the next endpoint and again after a
bounded, growing backoff, then raised as EtcdUnavailable naming every endpoint and the
cause; an answer etcd gives with an error (a bad request) raises ControlError at once.
What asking again cannot fix raises EtcdAuthError at once, one line naming the endpoint and
the setting: a wrong user or password, a key outside the user's roles, a server certificate
the CA does not sign, a client certificate etcd rejects.
Thread-safe: one httpx.Client for requests; each watch has its own streaming connection.
"""

from __future__ import annotations

import json
import logging
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import httpx

from treedist.control.errors import (
    NOT_FOUND,
    PERMISSION_DENIED,
    UNAUTHENTICATED,
    ControlError,
    EtcdAuthError,
    EtcdRefused,
    EtcdUnavailable,
    LeaseExpired,
    WatchCompacted,
)
from treedist.control.etcd_wire import (  # noqa: F401  (mapping, Compare, Op: re-exported beside the client)
    Compare,
    KeyValue,
    Lease,
    Op,
    TxnResult,
    WatchEvent,
    _b64,
    mapping,
    prefix_end,
)

log = logging.getLogger(__name__)

# Logins in a row for one request whose fresh token etcd still calls invalid: past this,
# something other than expiry is wrong (a clock far off for JWTs), and it is reported.
MAX_RENEWALS = 2


@dataclass(frozen=True)
class Tls:
    """PEM files for TLS to etcd (control.etcd_tls): the CA that signed etcd's certificate
    (None: the system's CAs) and the client's certificate and key (None: none presented)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class Credentials:
    """An etcd user (control.auth); the password is never part of a repr or a message."""

    user: str
    password: str = field(repr=False)


class _NoAnswer(Exception):
    """An endpoint that did not answer usefully (5xx while logging in): try the next one."""


class EtcdClient:
    def __init__(self, endpoints: Sequence[str], *, tls: Tls | None = None, auth: Credentials | None = None,
                 timeout_s: float = 5.0, attempts: int = 3, backoff_s: float = 0.2, max_backoff_s: float = 2.0) -> None:
        if not endpoints:
            raise ControlError("no etcd endpoint given (control.etcd)")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.timeout_s, self.attempts = timeout_s, max(1, attempts)
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.tls, self.auth = tls, auth
        self._verify: ssl.SSLContext | bool = _ssl_context(tls) if tls is not None else True
        self._http = httpx.Client(timeout=timeout_s, verify=self._verify)
        self._preferred = 0  # the endpoint that answered last
        self._lock = threading.Lock()
        self._token_lock = threading.Lock()
        self._token: str | None = None  # None: not logged in; "": etcd has authentication off

    # -- authentication ---------------------------------------------------------------------

    def _token_for(self, endpoint: str) -> str | None:
        """The current token, logging in at `endpoint` first when there is none (one login at
        a time: threads that need a token meanwhile wait for it rather than log in too)."""
        if self.auth is None:
            return None
        with self._token_lock:
            if self._token is None:
                self._token = self._login(endpoint)
            return self._token

    def _drop_token(self, token: str | None) -> None:
        """Forget `token` (etcd called it invalid) unless another thread already replaced it."""
        with self._token_lock:
            if self._token == token:
                self._token = None

    def _login(self, endpoint: str) -> str:
        assert self.auth is not None
        answer = self._http.post(endpoint + "/v3/auth/authenticate",
                                 json={"name": self.auth.user, "password": self.auth.password})
        if answer.status_code >= 500 and answer.status_code != 501:
            raise _NoAnswer(f"HTTP {answer.status_code} while logging in: {answer.text[:200]}")
        data = _data(answer)
        if answer.status_code == 200 and data.get("token"):
            return str(data["token"])
        message = str(data.get("message") or data.get("error") or answer.text[:200])
        if "authentication is not enabled" in message:
            log.warning("etcd at %s has authentication off; control.auth is not used", endpoint)
            return ""
        if "CommonName" in message:
            raise EtcdAuthError(_common_name_refusal(endpoint))
        raise EtcdAuthError(f"etcd at {endpoint}: user {self.auth.user!r} could not log in: "
                            f"{message.removeprefix('etcdserver: ')} (control.auth)")

    def _post(self, endpoint: str, path: str, body: dict) -> httpx.Response:
        """One request to `endpoint`, with the token; a token etcd calls invalid is renewed by
        logging in again and the request repeated (at most MAX_RENEWALS times)."""
        for renewal in range(MAX_RENEWALS + 1):
            token = self._token_for(endpoint)
            answer = self._http.post(endpoint + path, json=body, headers=_auth_header(token))
            if answer.status_code == 401 and self.auth is not None and renewal < MAX_RENEWALS:
                log.debug("etcd at %s: auth token refused (%s); logging in again", endpoint, answer.text[:100])
                self._drop_token(token)
                continue
            return answer
        raise AssertionError("unreachable")

    # -- requests --------------------------------------------------------------------------

    def _call(self, path: str, body: dict, about: str = "") -> dict:
        """POST to the first endpoint that answers, with bounded retries and backoff. `about`
        (a key, a prefix) is named in a refusal."""
        errors: dict[str, str] = {}
        delay = self.backoff_s
        for attempt in range(self.attempts):
            for i in range(len(self.endpoints)):
                index = (self._preferred + i) % len(self.endpoints)
                endpoint = self.endpoints[index]
                try:
                    answer = self._post(endpoint, path, body)
                except (httpx.TransportError, OSError) as err:
                    refusal = _tls_refusal(err, endpoint)
                    if refusal is not None:
                        raise EtcdAuthError(refusal) from None
                    errors[endpoint] = _cause(err)
                    continue
                except _NoAnswer as err:
                    errors[endpoint] = str(err)
                    continue
                if answer.status_code >= 500 and answer.status_code != 501:
                    errors[endpoint] = f"HTTP {answer.status_code}: {answer.text[:200]}"
                    continue
                data = _data(answer)
                if answer.status_code >= 400 or "error" in data and "result" not in data and "header" not in data:
                    raise self._refused(endpoint, path, about, answer, data)
                self._preferred = index
                return data
            if attempt + 1 < self.attempts:
                time.sleep(delay)
                delay = min(self.max_backoff_s, delay * 2)
        tried = "; ".join(f"{e}: {why}" for e, why in errors.items())
        raise EtcdUnavailable(f"etcd did not answer ({tried}) after {self.attempts} attempt{'s' if self.attempts > 1 else ''}; "
                              "is it running, and are control.etcd's endpoints right?")

    def _refused(self, endpoint: str, path: str, about: str, answer: httpx.Response, data: dict) -> ControlError:
        message = str(data.get("message") or data.get("error") or answer.text[:200]).strip()
        code = int(data.get("code", 0) or 0)
        what = f"{path} of {about!r}" if about else path
        if code == PERMISSION_DENIED or answer.status_code == 403:
            who = f"user {self.auth.user!r}" if self.auth else "a client without control.auth"
            return EtcdAuthError(f"etcd at {endpoint} refused {what}: permission denied: {who} has no role granting "
                                 "it (control.prefix must lie inside the keys the user's role may read and write)")
        if code == UNAUTHENTICATED or answer.status_code == 401:
            return EtcdAuthError(f"etcd at {endpoint} refused {what}: {message.removeprefix('etcdserver: ')} "
                                 f"(still after logging in again {MAX_RENEWALS} times; control.auth)")
        if "user name is empty" in message:
            return EtcdAuthError(f"etcd at {endpoint} has authentication on: give control.auth {{user, password}}")
        if "CommonName" in message:
            return EtcdAuthError(_common_name_refusal(endpoint))
        return EtcdRefused(f"etcd at {endpoint} refused {what}: {message}", code)

    def get(self, key: str) -> KeyValue | None:
        kvs = self._call("/v3/kv/range", {"key": _b64(key)}, key).get("kvs") or []
        return KeyValue.from_wire(kvs[0]) if kvs else None

    def get_prefix(self, prefix: str) -> tuple[int, list[KeyValue]]:
        data = self._call("/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))}, prefix + "*")
        kvs = sorted((KeyValue.from_wire(kv) for kv in data.get("kvs") or []), key=lambda kv: kv.key)
        return int(data.get("header", {}).get("revision", 0)), kvs

    def put(self, key: str, value: str | bytes, lease: int = 0) -> int:
        body = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        try:
            return int(self._call("/v3/kv/put", body, key).get("header", {}).get("revision", 0))
        except EtcdRefused as err:
            if err.code == NOT_FOUND:
                raise LeaseExpired(f"lease {lease:x} is gone: {err}") from None
            raise

    def delete(self, key: str, prefix: bool = False) -> int:
        body = {"key": _b64(key)}
        if prefix:
            body["range_end"] = _b64(prefix_end(key))
        return int(self._call("/v3/kv/deleterange", body, key + ("*" if prefix else "")).get("deleted", 0))

    def txn(self, compares: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()) -> TxnResult:
        data = self._call("/v3/kv/txn", {"compare": [c.wire() for c in compares],
                                         "success": [o.wire() for o in success],
                                         "failure": [o.wire() for o in failure]},
                          ", ".join(sorted({c.key for c in compares} | {o.key for o in (*success, *failure)})))
        ranges = [[KeyValue.from_wire(kv) for kv in r["response_range"].get("kvs") or []]
                  for r in data.get("responses") or [] if "response_range" in r]
        return TxnResult(bool(data.get("succeeded", False)), int(data.get("header", {}).get("revision", 0)), ranges)

    def grant(self, ttl_s: int) -> Lease:
        data = self._call("/v3/lease/grant", {"TTL": str(int(ttl_s))})
        return Lease(int(data["ID"]), int(data.get("TTL", ttl_s)))

    def keepalive(self, lease_id: int) -> int:
        result = self._call("/v3/lease/keepalive", {"ID": str(lease_id)}).get("result") or {}
        ttl = int(result.get("TTL", 0))
        if ttl <= 0:
            raise LeaseExpired(f"lease {lease_id:x} is gone (expired or revoked)")
        return ttl

    def revoke(self, lease_id: int) -> None:
        try:
            self._call("/v3/lease/revoke", {"ID": str(lease_id)})
        except EtcdRefused as err:
            if err.code != NOT_FOUND:
                raise

    def status(self) -> dict:
        return self._call("/v3/maintenance/status", {})

    def compact(self, revision: int) -> None:
        self._call("/v3/kv/compaction", {"revision": str(revision), "physical": True})

    def watch(self, prefix: str, start_revision: int | None = None, idle_timeout_s: float | None = None) -> "Watch":
        """A prefix watch; with `idle_timeout_s` the iteration ends quietly after that long
        without a message (so a caller can do periodic work on a quiet prefix)."""
        return Watch(self, prefix, start_revision, idle_timeout_s)

    def close(self) -> None:
        self._http.close()


class Watch:
    """A prefix watch with previous values: iterate to get each batch of events as it comes.
    `cancel()` (from any thread) ends the iteration. Raises WatchCompacted when the start
    revision is compacted, EtcdUnavailable when the stream cannot be opened or breaks."""

    def __init__(self, client: EtcdClient, prefix: str, start_revision: int | None,
                 idle_timeout_s: float | None = None) -> None:
        self.client, self.prefix = client, prefix
        self.idle_timeout_s = idle_timeout_s
        self.revision = (start_revision or 1) - 1
        self._start = start_revision
        self._cancelled = threading.Event()
        self._response: httpx.Response | None = None
        self._http: httpx.Client | None = None

    def cancel(self) -> None:
        self._cancelled.set()
        response, http = self._response, self._http
        for closeable in (response, http):
            if closeable is not None:
                try:
                    closeable.close()
                except Exception:  # closing from another thread races the reader; either way it ends
                    pass

    def __iter__(self) -> Iterator[list[WatchEvent]]:
        request: dict[str, Any] = {"key": _b64(self.prefix), "range_end": _b64(prefix_end(self.prefix)), "prev_kv": True}
        if self._start:
            request["start_revision"] = str(self._start)
        endpoint = self.client.endpoints[self.client._preferred]
        self._http = httpx.Client(timeout=httpx.Timeout(self.client.timeout_s, read=self.idle_timeout_s),
                                  verify=self.client._verify)
        try:
            # etcd checks the token when the watch is created, and cancels it at once when the
            # token has expired: log in again and reopen (bounded), before any event was seen
            for renewal in range(MAX_RENEWALS + 1):
                try:
                    token = self.client._token_for(endpoint)
                except _NoAnswer as err:
                    raise EtcdUnavailable(f"etcd watch at {endpoint}: {err}") from None
                try:
                    with self._http.stream("POST", endpoint + "/v3/watch", json={"create_request": request},
                                           headers=_auth_header(token)) as response:
                        self._response = response
                        for line in response.iter_lines():
                            if self._cancelled.is_set():
                                return
                            if not line.strip():
                                continue
                            events = self._events(json.loads(line))
                            if events:
                                yield events
                except _TokenRefused as err:
                    self.client._drop_token(token)
                    if renewal == MAX_RENEWALS:
                        raise EtcdAuthError(f"etcd at {endpoint} cancelled the watch on {self.prefix}: {err} "
                                            f"(still after logging in again {MAX_RENEWALS} times; control.auth)") from None
                    continue
                break
        except httpx.ReadTimeout:
            return  # quiet for idle_timeout_s: the iteration ends, the caller goes on
        except (httpx.TransportError, httpx.StreamError, OSError, RuntimeError) as err:
            if self._cancelled.is_set():
                return
            refusal = _tls_refusal(err, endpoint) if isinstance(err, (httpx.TransportError, OSError)) else None
            if refusal is not None:
                raise EtcdAuthError(refusal) from None
            raise EtcdUnavailable(f"etcd watch at {endpoint} broke: {_cause(err)}") from None
        finally:
            self._http.close()
        if not self._cancelled.is_set():
            raise EtcdUnavailable(f"etcd watch at {endpoint} ended (etcd stopped or restarted)")

    def _events(self, message: dict) -> list[WatchEvent]:
        if "error" in message:
            raise EtcdUnavailable(f"etcd watch error: {message['error'].get('message', message['error'])}")
        result = message.get("result") or {}
        compact = int(result.get("compact_revision", 0))
        if compact:
            raise WatchCompacted(f"revision {self._start} of {self.prefix} is compacted (oldest kept: {compact})", compact)
        if result.get("canceled"):
            reason = str(result.get("cancel_reason", ""))
            if "Unauthenticated" in reason or "invalid auth token" in reason:
                raise _TokenRefused(reason.rpartition("desc = ")[2] or reason)
            if "PermissionDenied" in reason or "permission denied" in reason:
                who = f"user {self.client.auth.user!r}" if self.client.auth else "a client without control.auth"
                raise EtcdAuthError(f"etcd cancelled the watch on {self.prefix}*: permission denied: {who} has no role "
                                    "granting it (control.prefix must lie inside the keys the user's role may read)")
            raise EtcdUnavailable(f"etcd cancelled the watch on {self.prefix}: {reason}")
        self.revision = max(self.revision, int(result.get("header", {}).get("revision", 0)))
        events = []
        for event in result.get("events") or []:
            kind = "delete" if event.get("type") == "DELETE" else "put"
            prev = KeyValue.from_wire(event["prev_kv"]) if event.get("prev_kv") else None
            events.append(WatchEvent(kind, KeyValue.from_wire(event["kv"]), prev))
        return events


class _TokenRefused(Exception):
    """etcd cancelled a watch because its token is invalid (expired): log in again."""


def _data(answer: httpx.Response) -> dict:
    """An answer's JSON object; {} for none, its text as `message` when it is not JSON
    (the gateway answers some refusals in plain text)."""
    if not answer.content:
        return {}
    try:
        data = answer.json()
    except ValueError:
        return {"message": answer.text[:200]}
    return data if isinstance(data, dict) else {"message": str(data)[:200]}


def _auth_header(token: str | None) -> dict[str, str]:
    # etcd's gateway passes `Authorization` on as the gRPC metadata etcd reads the token from
    return {"Authorization": token} if token else {}


def _ssl_context(tls: Tls) -> ssl.SSLContext:
    """The TLS context of control.etcd_tls: the CA to verify etcd with, the client's pair."""
    try:
        context = ssl.create_default_context(cafile=tls.ca) if tls.ca else ssl.create_default_context()
    except (OSError, ssl.SSLError) as err:
        raise ControlError(f"control.etcd_tls.ca: cannot load {tls.ca}: {_ssl_reason(err)}") from None
    if tls.cert:
        try:
            context.load_cert_chain(tls.cert, tls.key)
        except (OSError, ssl.SSLError) as err:
            raise ControlError(f"control.etcd_tls.cert/key: cannot load {tls.cert} with {tls.key}: {_ssl_reason(err)}") from None
    return context


def _ssl_reason(err: BaseException) -> str:
    text = (getattr(err, "strerror", None) or str(err) or type(err).__name__).splitlines()[0]
    return re.sub(r"\s*\(_ssl\.c:\d+\)", "", text).strip()


def _tls_refusal(err: BaseException, endpoint: str) -> str | None:
    """The one-line reason when `err` is a TLS handshake etcd or we refused for good (asking
    again gets the same), else None (a connection that failed for another reason)."""
    text = " ".join(str(e) for e in (err, err.__cause__, err.__context__) if e is not None)
    reason = _ssl_reason(err)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (f"etcd at {endpoint}: its TLS certificate is not trusted ({reason}): control.etcd_tls.ca must be "
                "the CA that signed it")
    if re.search(r"alert (bad certificate|certificate required|unknown ca|certificate unknown|"
                 r"certificate expired|access denied)", text, re.I):
        return (f"etcd at {endpoint} rejected treedist's client certificate ({reason}): control.etcd_tls.cert and "
                "key must be a pair signed by a CA etcd trusts (its --trusted-ca-file)")
    if "WRONG_VERSION_NUMBER" in text or "wrong version number" in text:
        return f"etcd at {endpoint} does not speak TLS there ({reason}): use http://, or etcd's TLS port"
    return None


def _common_name_refusal(endpoint: str) -> str:
    return (f"etcd at {endpoint} refuses a client certificate with a Common Name on its JSON gateway while its "
            "authentication is on (CVE-2018-16886): make control.etcd_tls.cert without a CN (the user comes "
            "from control.auth)")


def _cause(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    if "Connection refused" in text or isinstance(err, httpx.ConnectError):
        return f"connection refused ({type(err).__name__})" if "refused" in text.lower() else text.splitlines()[0]
    return text.splitlines()[0]
