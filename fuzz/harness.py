"""Coverage-guided fuzzing of treedist's parsers with atheris (libFuzzer), outside CI.

CI fuzzes the same parsers with hypothesis on a fixed budget (tests/fuzz); this harness is for
longer runs by hand: `fuzz/run TARGET [SECONDS]` (atheris is the optional extra `fuzz`:
`.venv/bin/pip install -e '.[fuzz]'`; atheris 3.0.0 has wheels for CPython 3.11 on x86-64 Linux). Each target states its invariant; any other exception, or an
assertion, is a crash libFuzzer reports with the input (turn it into a test in
tests/fuzz/test_regressions.py).

Targets:
  flags     parse_flags: flags in [0, 2**63) that re-encode to themselves, or MalformedFlags
  metadata  parse_commit_metadata: never raises; a treedist commit's metadata re-encodes to itself
  origin    Origin.decode: an Origin that re-encodes to itself, or MalformedOrigin
  naming    TopicFormat.parse(format, vars): NamingError or a format whose names map both ways
  config    the bytes as a deployment file: a Deployment or a one-line ConfigError
  records   a `_schemas` record (key, value): a Record that round-trips, or MalformedRecord
  schema    a registration body: parse/normalise idempotently, or a RegistryError below 500
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["treedist"]):
    from treedist.config import ConfigError, load_deployment
    from treedist.registry import errors as registry_errors
    from treedist.registry.avro import parse as parse_schema
    from treedist.registry.records import decode, encode
    from treedist.registry.server import _references_of, _schema_of
    from treedist.topology.flags import MAX_LEVEL, MalformedFlags, encode_flags, parse_flags
    from treedist.topology.naming import NamingError, TopicFormat
    from treedist.topology.offsets import MetadataKind, parse_commit_metadata
    from treedist.topology.origin import MalformedOrigin, Origin


def flags(data: bytes) -> None:
    try:
        value = parse_flags(data)
    except MalformedFlags:
        return
    assert 0 <= value < 1 << MAX_LEVEL and parse_flags(encode_flags(value)) == value


def metadata(data: bytes) -> None:
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(len(data))
    parsed = parse_commit_metadata(text)
    if parsed.kind is MetadataKind.TREEDIST:
        assert parse_commit_metadata(parsed.metadata.encode()).metadata == parsed.metadata


def origin(data: bytes) -> None:
    try:
        value = Origin.decode(data)
    except MalformedOrigin:
        return
    assert Origin.decode(value.encode()) == value


def naming(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    text = fdp.ConsumeUnicodeNoSurrogates(40)
    variables = {fdp.ConsumeUnicodeNoSurrogates(8): fdp.ConsumeUnicodeNoSurrogates(12) for _ in range(fdp.ConsumeIntInRange(0, 3))}
    probe = fdp.ConsumeUnicodeNoSurrogates(60)
    try:
        fmt = TopicFormat.parse(text, variables)
    except NamingError:
        return
    physical = fmt.physical_or_none(probe)
    if physical is not None:
        assert fmt.logical(physical) == probe
    logical = fmt.logical(probe)
    if logical is not None:
        assert fmt.physical(logical) == probe


_DEPLOYMENT = os.path.join(tempfile.mkdtemp(prefix="treedist-fuzz-"), "deployment.yaml")


def config(data: bytes) -> None:
    with open(_DEPLOYMENT, "wb") as f:
        f.write(data)
    try:
        load_deployment(_DEPLOYMENT)
    except ConfigError as err:
        assert str(err).startswith(f"{_DEPLOYMENT}: ") and "\n" not in str(err), str(err)


def records(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    key = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 200))
    value = None if fdp.ConsumeBool() else fdp.ConsumeBytes(fdp.remaining_bytes())
    try:
        record = decode(key, value)
    except registry_errors.MalformedRecord:
        return
    assert decode(*encode(record)) == record


def schema(data: bytes) -> None:
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return
    if not isinstance(body, dict):
        return
    try:
        text, kind = _schema_of(body)
        _references_of(body)
        parsed = parse_schema(text, kind, bool(body.get("normalize")))
    except registry_errors.RegistryError as err:
        assert err.status < 500, err.message
        return
    assert parse_schema(parsed.text, kind, bool(body.get("normalize"))).text == parsed.text


TARGETS = {f.__name__: f for f in (flags, metadata, origin, naming, config, records, schema)}

SEEDS = {
    "flags": [b"0", b"5", b"9223372036854775807", b" 12 "],
    "metadata": [b"treedist1;flags=5;ts=1795436381469", b"treedist1;flags=1;ts=0;at=c1:5,c2:7;made=1"],
    "origin": [b"c1/orders/0/42"],
    "naming": [b"{tenant}-{topic}\x00tenant\x00acme\x00orders"],
    "config": [b"clusters:\n  c1: {bootstrap_servers: '127.0.0.1:19092'}\n  c2: {bootstrap_servers: '127.0.0.1:19093'}\n"
               b"topics:\n  names: [demo]\ntree:\n  level: 1\n  children: [c1, c2]\n"],
    "records": [b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'],
    "schema": [json.dumps({"schema": json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]})}).encode()],
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: harness.py TARGET [libFuzzer options]; TARGET one of {', '.join(TARGETS)}")
    name = sys.argv.pop(1)
    corpus = tempfile.mkdtemp(prefix=f"treedist-fuzz-{name}-")
    for i, seed in enumerate(SEEDS[name]):
        with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
            f.write(seed)
    atheris.Setup(sys.argv + [corpus], TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
