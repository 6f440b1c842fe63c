"""The registry's REST API: the subset of Confluent Schema Registry that confluent-kafka's
SchemaRegistryClient, AvroSerializer and AvroDeserializer use. Starlette routes, run by uvicorn.

Runs in the registry process. Handlers are thin: parse the request, call `rules` on the
store's state (reads) or through `store.decide_and_write` (writes), and map a RegistryError
to Confluent's `{"error_code", "message"}` body and status at this edge only. A registry that
is not its deployment's primary refuses client writes (42205) naming the primary, and so
does one whose deployment names no primary at all (read-only unless told otherwise);
records the schema distributor puts into its topic still arrive (they do not come through
here). Before any handler: the Host allow-list (421), the body's size (413), media type
(415) and nesting depth (422) (treedist.registry.guard), then, when the registry has a user
and password (`registry serve --auth-user`), basic auth (401, treedist.endpoints). Error
messages never quote the request body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Iterable

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from treedist.endpoints import BasicAuth, BasicAuthGuard
from treedist.registry import errors, guard, rules
from treedist.registry.avro import incompatibilities, parse
from treedist.registry.records import AVRO
from treedist.registry.store import KafkaStore

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class Role:
    """Whether this registry takes client writes: only the primary's does (`primary` None:
    the deployment names none, so none does). `refused` is the 42205 message when not."""

    cluster: str
    primary: str | None = None
    primary_url: str | None = None

    @property
    def refused(self) -> str | None:
        if self.primary == self.cluster:
            return None
        if self.primary is None:
            return (f"The registry of cluster '{self.cluster}' is read-only (mode READONLY): the deployment names "
                    "no primary registry; set schemas.primary to the cluster whose registry takes registrations")
        at = f" at {self.primary_url}" if self.primary_url else ""
        return (
            f"The registry of cluster '{self.cluster}' is read-only (mode READONLY): schemas are "
            f"registered on the primary cluster '{self.primary}'{at} and distributed from there"
        )


def reply(body: object, status: int = 200) -> Response:
    return Response(json.dumps(body), status_code=status, media_type=CONTENT_TYPE)


UNAUTHORIZED = b'{"error_code":401,"message":"Unauthorized"}'  # Confluent's body for a 401


def build_app(store: KafkaStore, role: Role, hosts: Iterable[str] = (), auth: BasicAuth | None = None) -> Starlette:
    """The API; requests whose Host is not loopback or one of `hosts` are refused (421), then,
    with `auth`, requests without its user and password (401)."""
    refused = role.refused

    def endpoint(handler: Callable[[Request], object]) -> Callable:
        async def run(request: Request) -> Response:
            body = None
            if request.method in ("POST", "PUT"):
                raw = await _read_body(request)
                if isinstance(raw, Response):
                    return raw
                if guard.nesting_depth(raw) > guard.MAX_DEPTH:
                    return reply({"error_code": 42201, "message": f"the request body nests deeper than {guard.MAX_DEPTH} levels"}, 422)
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    return reply({"error_code": 400, "message": "Unrecognized request body: not JSON"}, 400)
                if not isinstance(body, dict):
                    return reply({"error_code": 422, "message": "the request body must be a JSON object"}, 422)
            request.state.body = body
            try:
                return reply(await run_in_threadpool(handler, request))  # writes block on read-back
            except errors.RegistryError as err:
                return reply(err.body(), err.status)
            except RecursionError:  # the depth checks should make this unreachable; a 422, never a 500
                return reply({"error_code": 42201, "message": "the schema nests too deeply"}, 422)

        return run

    def q(request: Request, name: str, default: str = "false") -> bool:
        return request.query_params.get(name, default).lower() == "true"

    def subject(request: Request) -> str:
        return request.path_params["subject"]

    def schema_id(request: Request) -> int:
        return int(request.path_params["id"])

    # -- schemas ---------------------------------------------------------------------------

    def get_schema(request: Request) -> object:
        return store.read(lambda s: rules.schema_by_id(s, schema_id(request)))

    def schema_subjects(request: Request) -> object:
        return sorted({s for s, _ in store.read(lambda st: rules.usages(st, schema_id(request), q(request, "deleted")))})

    def schema_versions(request: Request) -> object:
        used = store.read(lambda st: rules.usages(st, schema_id(request), q(request, "deleted")))
        return [{"subject": s, "version": v} for s, v in used]

    # -- subjects --------------------------------------------------------------------------

    def list_subjects(request: Request) -> object:
        prefix = request.query_params.get("subjectPrefix", "")
        if q(request, "deletedOnly"):
            names = store.read(lambda s: sorted(set(s.subject_names(True)) - set(s.subject_names(False))))
        else:
            names = store.read(lambda s: s.subject_names(q(request, "deleted")))
        return [n for n in names if n.startswith(prefix)]

    def list_versions(request: Request) -> object:
        def query(state):
            found = state.versions(subject(request), q(request, "deleted"))
            if not found:
                raise errors.SubjectNotFound(f"Subject '{subject(request)}' not found.")
            return [v.version for v in found]

        return store.read(query)

    def register(request: Request) -> object:
        body = request.state.body
        text, kind = _schema_of(body)
        return store.decide_and_write(
            lambda s: rules.register(s, subject(request), text, kind, _references_of(body), q(request, "normalize"), refused)
        )

    def lookup(request: Request) -> object:
        body = request.state.body
        text, kind = _schema_of(body)
        return store.read(lambda s: rules.lookup(s, subject(request), text, kind, q(request, "normalize"), q(request, "deleted")))

    def get_version(request: Request) -> object:
        def query(state):
            v = rules.get_version(state, subject(request), request.path_params["version"], q(request, "deleted"))
            return rules.version_body(state, subject(request), v)

        return store.read(query)

    def get_version_schema(request: Request) -> object:
        return json.loads(get_version(request)["schema"])

    def referenced_by(request: Request) -> object:
        store.read(lambda s: rules.get_version(s, subject(request), request.path_params["version"]))
        return []  # references are not supported, so nothing refers to anything

    def delete_subject(request: Request) -> object:
        return store.decide_and_write(lambda s: rules.delete_subject(s, subject(request), q(request, "permanent"), refused))

    def delete_version(request: Request) -> object:
        return store.decide_and_write(
            lambda s: rules.delete_version(s, subject(request), request.path_params["version"], q(request, "permanent"), refused)
        )

    def check_compatibility(request: Request) -> object:
        text, kind = _schema_of(request.state.body)

        def query(state):
            name, version = subject(request), request.path_params.get("version")
            existing = state.versions(name)
            if version is not None and version != "latest":
                existing = [rules.get_version(state, name, version)]
            olds = [parse(state.schemas[v.id].text, state.schemas[v.id].schema_type) for v in existing]
            problems = incompatibilities(rules.compatibility(state, name), parse(text, kind), olds)
            answer: dict = {"is_compatible": not problems}
            if q(request, "verbose"):
                answer["messages"] = problems
            return answer

        return store.read(query)

    # -- config and mode -------------------------------------------------------------------

    def get_config(request: Request) -> object:
        name = request.path_params.get("subject")

        def query(state):
            if name is not None and name not in state.configs and not q(request, "defaultToGlobal"):
                raise errors.SubjectConfigNotFound(f"Subject '{name}' does not have subject-level compatibility configured")
            return {"compatibilityLevel": rules.compatibility(state, name)}

        return store.read(query)

    def put_config(request: Request) -> object:
        level = request.state.body.get("compatibility", request.state.body.get("compatibilityLevel"))
        return store.decide_and_write(lambda s: rules.set_config(s, request.path_params.get("subject"), level, refused))

    def delete_config(request: Request) -> object:
        return store.decide_and_write(lambda s: rules.delete_config(s, request.path_params.get("subject"), refused))

    def get_mode(request: Request) -> object:
        if refused:
            return {"mode": "READONLY"}
        name = request.path_params.get("subject")

        def query(state):
            if name is not None and name not in state.modes and not q(request, "defaultToGlobal"):
                raise errors.SubjectModeNotFound(f"Subject '{name}' does not have subject-level mode configured")
            return {"mode": rules.mode(state, name)}

        return store.read(query)

    def put_mode(request: Request) -> object:
        return store.decide_and_write(lambda s: rules.set_mode(s, request.path_params.get("subject"), request.state.body.get("mode"), refused))

    def delete_mode(request: Request) -> object:
        return store.decide_and_write(lambda s: rules.delete_mode(s, request.path_params.get("subject"), refused))

    def root(request: Request) -> object:
        return {}

    def health(request: Request) -> object:
        return {**store.health(), "primary": role.primary, "read_only": bool(refused)}

    def types(request: Request) -> object:
        return [AVRO]

    S = "/subjects/{subject}"
    V = S + "/versions/{version}"
    routes = [
        Route("/", endpoint(root)),
        Route("/health", endpoint(health)),
        Route("/schemas/types", endpoint(types)),
        Route("/schemas/ids/{id:int}", endpoint(get_schema)),
        Route("/schemas/ids/{id:int}/subjects", endpoint(schema_subjects)),
        Route("/schemas/ids/{id:int}/versions", endpoint(schema_versions)),
        Route("/subjects", endpoint(list_subjects)),
        Route(V + "/schema", endpoint(get_version_schema)),
        Route(V + "/referencedby", endpoint(referenced_by)),
        Route(V, endpoint(get_version), methods=["GET"]),
        Route(V, endpoint(delete_version), methods=["DELETE"]),
        Route(S + "/versions", endpoint(list_versions), methods=["GET"]),
        Route(S + "/versions", endpoint(register), methods=["POST"]),
        Route(S, endpoint(lookup), methods=["POST"]),
        Route(S, endpoint(delete_subject), methods=["DELETE"]),
        Route("/compatibility/subjects/{subject}/versions/{version}", endpoint(check_compatibility), methods=["POST"]),
        Route("/compatibility/subjects/{subject}/versions", endpoint(check_compatibility), methods=["POST"]),
        Route("/config", endpoint(get_config), methods=["GET"]),
        Route("/config", endpoint(put_config), methods=["PUT"]),
        Route("/config", endpoint(delete_config), methods=["DELETE"]),
        Route("/config/{subject}", endpoint(get_config), methods=["GET"]),
        Route("/config/{subject}", endpoint(put_config), methods=["PUT"]),
        Route("/config/{subject}", endpoint(delete_config), methods=["DELETE"]),
        Route("/mode", endpoint(get_mode), methods=["GET"]),
        Route("/mode", endpoint(put_mode), methods=["PUT"]),
        Route("/mode", endpoint(delete_mode), methods=["DELETE"]),
        Route("/mode/{subject}", endpoint(get_mode), methods=["GET"]),
        Route("/mode/{subject}", endpoint(put_mode), methods=["PUT"]),
        Route("/mode/{subject}", endpoint(delete_mode), methods=["DELETE"]),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        return reply({"error_code": status, "message": f"HTTP {status} {getattr(exc, 'detail', 'Not Found')}"}, status)

    # the first is the outermost: a request for another Host is refused before credentials are asked for
    middleware = [Middleware(guard.HostGuard, hosts=guard.allowed_hosts(hosts))]
    if auth is not None:
        middleware.append(Middleware(BasicAuthGuard, auth=auth, body=UNAUTHORIZED, content_type=CONTENT_TYPE.encode()))
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found}, middleware=middleware)


async def _read_body(request: Request) -> bytes | Response:
    """The POST/PUT body, or the 415/413 answer: a media type that is not JSON, or more than
    guard.MAX_BODY_BYTES (by Content-Length, else counted as it streams in, never buffered past it)."""
    if not guard.json_media_type(request.headers.get("content-type")):
        return reply({"error_code": 415, "message": "Unsupported Media Type: send application/vnd.schemaregistry.v1+json "
                                                    "or application/json"}, 415)
    too_large = reply({"error_code": 413, "message": f"the request body is larger than {guard.MAX_BODY_BYTES} bytes"}, 413)
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > guard.MAX_BODY_BYTES):
        return too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > guard.MAX_BODY_BYTES:
            return too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _schema_of(body: dict) -> tuple[str, str]:
    text = body.get("schema")
    if not isinstance(text, str):
        raise errors.InvalidSchema("the request body needs a \"schema\" string")
    if guard.nesting_depth(text) > guard.MAX_DEPTH:
        raise errors.InvalidSchema(f"the schema nests deeper than {guard.MAX_DEPTH} levels")
    kind = body.get("schemaType") or AVRO
    if not isinstance(kind, str):  # a list here was a TypeError and a 500 (found by tests/fuzz)
        raise errors.InvalidSchema("\"schemaType\" must be a string")
    return text, kind


def _references_of(body: dict) -> tuple[dict, ...]:
    """The body's `references`: a list of objects (a number here was a TypeError and a 500)."""
    refs = body.get("references") or []
    if not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs):
        raise errors.InvalidSchema("\"references\" must be a list of objects")
    return tuple(refs)
