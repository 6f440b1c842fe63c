"""A thin etcd v3 client on etcd's JSON gateway (HTTP + JSON over httpx: no gRPC, no
protobuf, so it cannot fight PySpark's or confluent-kafka's dependencies).

Runs in whichever process needs etcd (workers, the CLI). The gateway serves `/v3/...` in etcd
3.4 and later (`/v3beta/` in 3.3). Keys and values are base64 on the wire; numbers come back
as strings, and fields equal to their zero value are left out.

Errors: a connection failure or timeout is retried on the next endpoint and again after a
bounded, growing backoff, then raised as EtcdUnavailable naming every endpoint and the
cause; an answer etcd gives with an error (a bad request) raises ControlError at once.
Thread-safe: one httpx.Client for requests; each watch has its own streaming connection.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Sequence

import httpx

from treedist.control.errors import NOT_FOUND, ControlError, EtcdRefused, EtcdUnavailable, LeaseExpired, WatchCompacted

log = logging.getLogger(__name__)


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: str) -> str:
    """The range end that selects every key starting with `prefix` (its last byte + 1)."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return "\0"
    raw[-1] += 1
    return raw.decode("latin-1")


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    def text(self) -> str:
        return self.value.decode()

    def json(self) -> Any:
        """The value parsed as JSON; raises ValueError when it is not JSON."""
        return json.loads(self.value)

    @classmethod
    def from_wire(cls, kv: dict) -> "KeyValue":
        return cls(key=_unb64(kv.get("key")).decode(), value=_unb64(kv.get("value")),
                   create_revision=int(kv.get("create_revision", 0)), mod_revision=int(kv.get("mod_revision", 0)),
                   version=int(kv.get("version", 0)), lease=int(kv.get("lease", 0)))


def mapping(kv: KeyValue | None) -> dict:
    """The JSON object stored in `kv`, or {} when there is no key or its value is not a JSON
    object (status and assignment records written by another version or by hand)."""
    if kv is None:
        return {}
    try:
        value = kv.json()
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class WatchEvent:
    kind: Literal["put", "delete"]
    kv: KeyValue
    prev: KeyValue | None


_TARGETS = {"create": ("CREATE", "create_revision"), "mod": ("MOD", "mod_revision"),
            "version": ("VERSION", "version"), "value": ("VALUE", "value"), "lease": ("LEASE", "lease")}
_OPS = {"==": "EQUAL", "!=": "NOT_EQUAL", "<": "LESS", ">": "GREATER"}


@dataclass(frozen=True)
class Compare:
    key: str
    target: Literal["create", "mod", "version", "value", "lease"]
    op: Literal["==", "!=", "<", ">"]
    operand: int | bytes

    @classmethod
    def absent(cls, key: str) -> "Compare":
        return cls(key, "create", "==", 0)

    @classmethod
    def created_at(cls, key: str, revision: int) -> "Compare":
        return cls(key, "create", "==", revision)

    @classmethod
    def mod_at(cls, key: str, revision: int) -> "Compare":
        return cls(key, "mod", "==", revision)

    @classmethod
    def lease_is(cls, key: str, lease_id: int) -> "Compare":
        return cls(key, "lease", "==", lease_id)

    @classmethod
    def value_is(cls, key: str, value: str | bytes) -> "Compare":
        return cls(key, "value", "==", value.encode() if isinstance(value, str) else value)

    def wire(self) -> dict:
        target, field = _TARGETS[self.target]
        operand = _b64(self.operand) if self.target == "value" else str(int(self.operand))
        return {"key": _b64(self.key), "target": target, "result": _OPS[self.op], field: operand}


@dataclass(frozen=True)
class Op:
    kind: Literal["put", "delete", "get"]
    key: str
    value: bytes = b""
    lease: int = 0
    prefix: bool = False

    @classmethod
    def put(cls, key: str, value: str | bytes, lease: int = 0) -> "Op":
        return cls("put", key, value.encode() if isinstance(value, str) else value, lease)

    @classmethod
    def delete(cls, key: str, prefix: bool = False) -> "Op":
        return cls("delete", key, prefix=prefix)

    @classmethod
    def get(cls, key: str, prefix: bool = False) -> "Op":
        return cls("get", key, prefix=prefix)

    def wire(self) -> dict:
        body: dict[str, Any] = {"key": _b64(self.key)}
        if self.prefix:
            body["range_end"] = _b64(prefix_end(self.key))
        if self.kind == "put":
            body["value"] = _b64(self.value)
            if self.lease:
                body["lease"] = str(self.lease)
            return {"request_put": body}
        if self.kind == "delete":
            return {"request_delete_range": body}
        return {"request_range": body}


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    ranges: list[list[KeyValue]]  # one list per get op of the branch that ran, in order


@dataclass(frozen=True)
class Lease:
    id: int
    ttl: int


class EtcdClient:
    def __init__(self, endpoints: Sequence[str], *, timeout_s: float = 5.0, attempts: int = 3,
                 backoff_s: float = 0.2, max_backoff_s: float = 2.0) -> None:
        if not endpoints:
            raise ControlError("no etcd endpoint given (control.etcd)")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.timeout_s, self.attempts = timeout_s, max(1, attempts)
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self._http = httpx.Client(timeout=timeout_s)
        self._preferred = 0  # the endpoint that answered last
        self._lock = threading.Lock()

    # -- requests --------------------------------------------------------------------------

    def _call(self, path: str, body: dict) -> dict:
        """POST to the first endpoint that answers, with bounded retries and backoff."""
        errors: dict[str, str] = {}
        delay = self.backoff_s
        for attempt in range(self.attempts):
            for i in range(len(self.endpoints)):
                index = (self._preferred + i) % len(self.endpoints)
                endpoint = self.endpoints[index]
                try:
                    answer = self._http.post(endpoint + path, json=body)
                except (httpx.TransportError, OSError) as err:
                    errors[endpoint] = _cause(err)
                    continue
                if answer.status_code >= 500 and answer.status_code != 501:
                    errors[endpoint] = f"HTTP {answer.status_code}: {answer.text[:200]}"
                    continue
                data = answer.json() if answer.content else {}
                if answer.status_code >= 400 or "error" in data and "result" not in data and "header" not in data:
                    raise EtcdRefused(f"etcd at {endpoint} refused {path}: "
                                      f"{data.get('message') or data.get('error') or answer.text[:200]}", int(data.get("code", 0)))
                self._preferred = index
                return data
            if attempt + 1 < self.attempts:
                time.sleep(delay)
                delay = min(self.max_backoff_s, delay * 2)
        tried = "; ".join(f"{e}: {why}" for e, why in errors.items())
        raise EtcdUnavailable(f"etcd did not answer ({tried}) after {self.attempts} attempt{'s' if self.attempts > 1 else ''}; "
                              "is it running, and are control.etcd's endpoints right?")

    def get(self, key: str) -> KeyValue | None:
        kvs = self._call("/v3/kv/range", {"key": _b64(key)}).get("kvs") or []
        return KeyValue.from_wire(kvs[0]) if kvs else None

    def get_prefix(self, prefix: str) -> tuple[int, list[KeyValue]]:
        data = self._call("/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))})
        kvs = sorted((KeyValue.from_wire(kv) for kv in data.get("kvs") or []), key=lambda kv: kv.key)
        return int(data.get("header", {}).get("revision", 0)), kvs

    def put(self, key: str, value: str | bytes, lease: int = 0) -> int:
        body = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        try:
            return int(self._call("/v3/kv/put", body).get("header", {}).get("revision", 0))
        except EtcdRefused as err:
            if err.code == NOT_FOUND:
                raise LeaseExpired(f"lease {lease:x} is gone: {err}") from None
            raise

    def delete(self, key: str, prefix: bool = False) -> int:
        body = {"key": _b64(key)}
        if prefix:
            body["range_end"] = _b64(prefix_end(key))
        return int(self._call("/v3/kv/deleterange", body).get("deleted", 0))

    def txn(self, compares: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()) -> TxnResult:
        data = self._call("/v3/kv/txn", {"compare": [c.wire() for c in compares],
                                         "success": [o.wire() for o in success],
                                         "failure": [o.wire() for o in failure]})
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
        self._http = httpx.Client(timeout=httpx.Timeout(self.client.timeout_s, read=self.idle_timeout_s))
        try:
            with self._http.stream("POST", endpoint + "/v3/watch", json={"create_request": request}) as response:
                self._response = response
                for line in response.iter_lines():
                    if self._cancelled.is_set():
                        return
                    if not line.strip():
                        continue
                    events = self._events(json.loads(line))
                    if events:
                        yield events
        except httpx.ReadTimeout:
            return  # quiet for idle_timeout_s: the iteration ends, the caller goes on
        except (httpx.TransportError, httpx.StreamError, OSError, RuntimeError) as err:
            if self._cancelled.is_set():
                return
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
            raise EtcdUnavailable(f"etcd cancelled the watch on {self.prefix}: {result.get('cancel_reason', '')}")
        self.revision = max(self.revision, int(result.get("header", {}).get("revision", 0)))
        events = []
        for event in result.get("events") or []:
            kind = "delete" if event.get("type") == "DELETE" else "put"
            prev = KeyValue.from_wire(event["prev_kv"]) if event.get("prev_kv") else None
            events.append(WatchEvent(kind, KeyValue.from_wire(event["kv"]), prev))
        return events


def _cause(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    if "Connection refused" in text or isinstance(err, httpx.ConnectError):
        return f"connection refused ({type(err).__name__})" if "refused" in text.lower() else text.splitlines()[0]
    return text.splitlines()[0]
