"""etcd v3's JSON gateway vocabulary (pure; any process that talks to etcd): keys and values
base64 on the wire, key-values, watch events, transaction compares and operations, leases.
The client that sends them is treedist.control.etcd.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Literal


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
