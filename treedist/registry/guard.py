"""What the registry's HTTP edge accepts before a handler runs (registry process).

- Host: only names on an allow-list (loopback by default, any port): a web page the
  operator's browser loads cannot reach a loopback registry through DNS rebinding, where
  its own host name resolves to 127.0.0.1 and the request carries that name.
- Body: at most `MAX_BODY_BYTES`; a JSON media type (or none) on POST and PUT.
- Nesting: a JSON document (body or schema) at most `MAX_DEPTH` levels deep, measured by a
  scan that never recurses: Python's parsers recurse per level and a ~1,000-deep document
  raised RecursionError (a 500) before.
"""

from __future__ import annotations

from typing import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

MAX_BODY_BYTES = 1 << 20  # 1 MiB: Avro schemas are kilobytes
MAX_DEPTH = 64
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# what Confluent's clients send (confluent-kafka's own: application/vnd.schemaregistry.v1+json)
JSON_MEDIA_TYPES = frozenset({
    "application/json", "application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
    "application/octet-stream",
})


def host_name(header: str) -> str:
    """The name of a Host header without its port, lower case; `[::1]:8081` -> `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def allowed_hosts(extra: Iterable[str] = ()) -> frozenset[str]:
    """Loopback names plus `extra` (names or addresses, a port or brackets allowed)."""
    return LOOPBACK_HOSTS | {host_name(h) for h in extra if h and h.strip()}


def json_media_type(content_type: str | None) -> bool:
    """Whether a POST/PUT body may be read as JSON: one of JSON_MEDIA_TYPES (parameters
    such as charset ignored), or no Content-Type at all (Jersey, behind Confluent's
    registry, takes that as application/octet-stream too)."""
    if content_type is None or not content_type.strip():
        return True
    return content_type.split(";", 1)[0].strip().lower() in JSON_MEDIA_TYPES


def nesting_depth(text: str | bytes, limit: int = MAX_DEPTH) -> int:
    """How deep `text`'s JSON arrays and objects nest (brackets inside strings ignored); stops
    counting past `limit` (any result above `limit` means too deep)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


class HostGuard:
    """ASGI middleware: an HTTP request whose Host header names no allowed host is answered
    421 (Misdirected Request) before any route runs."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app, self.hosts = app, hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), None)
            if header is None or host_name(header) not in self.hosts:
                body = b'{"error_code":421,"message":"Misdirected Request: this registry does not serve that Host"}'
                await send({"type": "http.response.start", "status": 421,
                            "headers": [(b"content-type", b"application/vnd.schemaregistry.v1+json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
