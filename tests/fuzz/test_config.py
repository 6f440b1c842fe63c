"""Fuzz targets of the deployment loader (treedist.config): `parse_deployment` on structures
near a real deployment and on arbitrary ones, and `load_deployment` on arbitrary file bytes.

Invariant of every target: the result is a Deployment or a ConfigError (a TreedistError, so
the CLI prints one line and exits 2) whose message starts with the source it names and is one
line; nothing else escapes (no pydantic ValidationError, TypeError, RecursionError, ...), and
no input hangs (the profile's per-input deadline). Resolved secret values never appear in the
message. The real CLI (`treedist topology show`, a bounded number of processes) answers
such a file with exit 2 and one line on stderr.
"""

from __future__ import annotations

import copy
import os
import string
import subprocess
import sys
import typing
from pathlib import Path

import pydantic
import pytest
import yaml
from hypothesis import Phase, given
from hypothesis import strategies as st

from tests.fuzz.budget import budget, ran
from treedist.config import ConfigError, Deployment, load_deployment, parse_deployment
from treedist.errors import TreedistError

SOURCE = "fuzz.yaml"
SECRET = "s3cr3t-fuzz-value"  # what ${env:TREEDIST_FUZZ_SECRET} resolves to; never in a message


def _model_keys() -> list[str]:
    """Every field name of the deployment's models, so the fuzzer follows the model as it grows."""
    seen: set[type] = set()
    keys: set[str] = set()

    def walk(tp: object) -> None:
        if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
            if tp not in seen:
                seen.add(tp)
                for name, info in tp.model_fields.items():
                    keys.add(info.alias or name)
                    walk(info.annotation)
            return
        for arg in typing.get_args(tp):
            walk(arg)

    walk(Deployment)
    return sorted(keys)


KEYS = _model_keys() + ["c1", "c2", "c3", "c4", "sasl.password", "security.protocol", "bogus"]

BASE = {
    "clusters": {
        "c1": {"bootstrap_servers": "127.0.0.1:19092", "client": {"sasl.password": "${env:TREEDIST_FUZZ_SECRET}"},
               "topic_format": "{tenant}-{topic}", "vars": {"tenant": "acme"}, "labels": {"zone": "a"}},
        "c2": {"bootstrap_servers": "127.0.0.1:19093"},
        "c3": {"bootstrap_servers": "127.0.0.1:19094"},
        "c4": {"bootstrap_servers": "127.0.0.1:19095"},
    },
    "topics": {"names": ["demo"], "regex": ["app\\..*"], "exclude": ["app\\.tmp"], "sync": {"enabled": True, "interval": "10s"}},
    "tree": {"level": 3, "children": [{"level": 1, "children": ["c1", "c2"]}, {"level": 1, "children": ["c3", "c4"]}]},
    "targets": {"overrides": [{"cluster": "c1", "level": 3, "target": "c4"}], "failover": {"after": "30s"}},
    "distributor": {"max_records_per_trigger": 1000, "trigger_interval": "1s", "malformed_flags": "copy",
                    "restarts": {"max_failures": 3, "window": 600}},
    "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "2"}},
    "offsets": {"enabled": True, "mode": "timestamp", "margin": "1s", "groups": {"include": ["app-.*"]}},
    "schemas": {"primary": "c1", "registries": {"c1": "http://127.0.0.1:18081", "c2": "http://127.0.0.1:18082"}},
    "control": {"etcd": ["http://127.0.0.1:2379"], "prefix": "/treedist", "lease_ttl": "10s",
                "auth": {"user": "treedist", "password": "${env:TREEDIST_FUZZ_SECRET}"}},
    "acls": {"sync": False},
}

def _secret_files(tmp_path_factory) -> dict[str, str]:
    """Files a `${file:...}` reference may name: a secret, an empty file, a directory, a
    missing path, non-UTF-8 bytes, an oversized file, /dev/null, /dev/zero and a FIFO."""
    base = tmp_path_factory.mktemp("fuzz-secrets")
    (base / "secret").write_text(SECRET + "\n")
    (base / "empty").write_text("")
    (base / "latin1").write_bytes(b"caf\xe9")
    (base / "big").write_bytes(b"x" * ((1 << 20) + 2))
    (base / "dir").mkdir()
    os.mkfifo(base / "fifo")  # a FIFO nobody writes to: opening it blocks
    return {name: str(base / name) for name in ("secret", "empty", "latin1", "big", "dir", "fifo", "missing")}


@pytest.fixture(scope="module")
def secret_files(tmp_path_factory):
    return _secret_files(tmp_path_factory)


def _references(files: dict[str, str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["${env:TREEDIST_FUZZ_SECRET}", "${env:TREEDIST_FUZZ_UNSET}", "${env:1bad}", "${env:}",
                         "${file:relative/path}", "${file:}", "${other:x}", "${env:TREEDIST_FUZZ_SECRET", "$", "${"]),
        st.sampled_from(sorted(files.values()) + ["/dev/null", "/dev/zero"]).map(lambda p: "${file:" + p + "}"),
    )


def scalars(files: dict[str, str]) -> st.SearchStrategy[object]:
    refs = _references(files)
    return st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=16), st.text(alphabet=string.printable, max_size=16),
        st.sampled_from(["c1", "c2", "c5", "{topic}", "{tenant}-{topic}", "10s", "0s", "-1s", "1e400s", "1h30m",
                         ".*", "[", "(a+)+$", "copy", "fail", "local[2]", "http://u:pw@h:1", "127.0.0.1:1", "", "\x00"]),
        refs, st.tuples(st.text(max_size=6), refs).map("".join),
    )


def values(files: dict[str, str]) -> st.SearchStrategy[object]:
    return st.recursive(scalars(files), lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6), st.integers(-3, 3), st.none()), inner, max_size=5),
    ), max_leaves=20)


@st.composite
def mutated_deployments(draw, files: dict[str, str]) -> dict:
    """BASE with 1..4 mutations at random places: a value replaced by fuzz, a key dropped, a
    key added, a list item duplicated or dropped."""
    spec = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 4))):
        containers = []  # (container, key or index) of every place in the current spec

        def collect(node):
            if isinstance(node, dict):
                for k in list(node):
                    containers.append((node, k))
                    collect(node[k])
            elif isinstance(node, list):
                for i in range(len(node)):
                    containers.append((node, i))
                    collect(node[i])

        collect(spec)
        parent, key = draw(st.sampled_from(containers))
        action = draw(st.sampled_from(["replace", "replace", "drop", "add", "dup"]))
        if action == "replace":
            parent[key] = draw(values(files))
        elif action == "drop":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(KEYS))] = draw(values(files))
        elif action == "dup" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return spec


def _check(outcome_target: str, raw: object, resolve: bool) -> None:
    try:
        parse_deployment(raw, source=SOURCE, resolve=resolve)
    except ConfigError as err:
        ran(outcome_target, "config_error")
        message = str(err)
        assert isinstance(err, TreedistError)
        assert message.startswith(f"{SOURCE}: "), message
        assert "\n" not in message, message  # the CLI's error is one line
        assert SECRET not in message
        return
    ran(outcome_target, "deployment")


@pytest.fixture(autouse=True, scope="module")
def _secret_env():
    os.environ["TREEDIST_FUZZ_SECRET"] = SECRET
    os.environ.pop("TREEDIST_FUZZ_UNSET", None)
    yield
    os.environ.pop("TREEDIST_FUZZ_SECRET", None)


def test_the_base_deployment_is_valid(secret_files):
    # the mutations start from a deployment that loads, so they probe one fault at a time
    assert parse_deployment(copy.deepcopy(BASE), source=SOURCE).clusters["c1"].bootstrap_servers


@given(data=st.data())
@budget(600)
def test_a_mutated_deployment_is_a_deployment_or_a_one_line_config_error(secret_files, data):
    raw = data.draw(mutated_deployments(secret_files))
    _check("config.parse_deployment.mutated", raw, resolve=True)
    _check("config.parse_deployment.mutated_unresolved", raw, resolve=False)


@given(data=st.data())
@budget(400)
def test_any_structure_is_a_deployment_or_a_one_line_config_error(secret_files, data):
    raw = data.draw(st.one_of(st.dictionaries(st.sampled_from(KEYS), values(secret_files), max_size=8), values(secret_files)))
    _check("config.parse_deployment.any", raw, resolve=True)


_YAML_PIECES = ["clusters:", "\n", "  ", "c1:", " {bootstrap_servers: x}", "tree:", "level: 3", "children:", "- c1",
                "&a ", "*a", "<<: *a", "!!python/object:os.system", "!!binary", "? ", "---", "...", "'", '"',
                "\t", "{", "}", "[", "]", ": ", "#", "%YAML 1.1", "\xef\xbb\xbf", "${env:TREEDIST_FUZZ_SECRET}"]


_BASE_YAML = yaml.safe_dump(BASE, sort_keys=False).encode()


@given(st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(_YAML_PIECES), max_size=30).map(lambda parts: "".join(parts).encode("utf-8", "surrogateescape")),
    # the base deployment as a file, cut or with bytes spliced in somewhere
    st.tuples(st.integers(0, len(_BASE_YAML)), st.integers(0, 8), st.one_of(st.binary(max_size=8),
              st.sampled_from(_YAML_PIECES).map(lambda p: p.encode("utf-8", "surrogateescape"))))
    .map(lambda t: _BASE_YAML[: t[0]] + t[2] + _BASE_YAML[t[0] + t[1]:]),
))
@budget(600)
def test_any_file_bytes_are_a_deployment_or_a_one_line_config_error_naming_the_file(tmp_path_factory, content):
    path = tmp_path_factory.getbasetemp() / "fuzz-deployment.yaml"
    path.write_bytes(content)
    try:
        load_deployment(path)
    except ConfigError as err:
        ran("config.load_deployment.bytes", "config_error")
        assert str(err).startswith(f"{path}: ") and "\n" not in str(err), str(err)
        return
    ran("config.load_deployment.bytes", "deployment")


CLI_RUNS = 20  # each input is one `treedist` process (0.4 to 1 s)
# No shrinking here: each try is a process, and shrinking a failure ran past the fuzz tests'
# hang guard (300 s), which ends the whole pytest session (a suite run lost, 2026-12-07);
# a failure is reported as drawn, with its @reproduce_failure line.
NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]


@given(data=st.data())
@budget(CLI_RUNS, deadline=None, phases=NO_SHRINK)
def test_the_cli_answers_a_bad_deployment_with_exit_2_and_one_line(secret_files, tmp_path_factory, data):
    # what the loader's invariant is for: the real CLI, which maps a TreedistError to exit 2
    spec = data.draw(st.one_of(mutated_deployments(secret_files), values(secret_files)))
    path = tmp_path_factory.getbasetemp() / "fuzz-cli.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True))
    cli = Path(sys.executable).with_name("treedist")
    done = subprocess.run([str(cli), "topology", "show", "-c", str(path)], capture_output=True, text=True, timeout=60)
    ran("config.cli_topology_show", f"exit_{done.returncode}")
    assert done.returncode in (0, 2), (done.returncode, done.stderr[-2000:])
    if done.returncode == 2:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}: "), done.stderr[-2000:]
        assert SECRET not in done.stderr
