"""What the fuzz targets found, each as a plain test with the minimal input."""

from __future__ import annotations

import os

import pytest

from treedist.config import ConfigError, parse_deployment
from treedist.errors import TreedistError
from treedist.topology import TopologyError
from treedist.topology.flags import MalformedFlags, parse_flags
from treedist.topology.origin import MalformedOrigin, Origin


def test_an_empty_copy_flag_header_is_a_topology_error():
    # found by test_any_copy_flag_header_...: MalformedFlags was a bare ValueError, outside
    # the package's root error (so the CLI's exit 2 and callers catching TreedistError missed it)
    with pytest.raises(MalformedFlags) as caught:
        parse_flags(b"")
    assert isinstance(caught.value, TopologyError) and isinstance(caught.value, TreedistError)
    assert isinstance(caught.value, ValueError)  # what older callers catch


def test_an_empty_origin_header_is_a_topology_error():
    # the same for the origin header, found alongside
    with pytest.raises(MalformedOrigin) as caught:
        Origin.decode(b"")
    assert isinstance(caught.value, TopologyError) and isinstance(caught.value, ValueError)


@pytest.mark.timeout(30, method="thread")
def test_a_file_reference_to_a_fifo_is_a_config_error_not_a_hang(tmp_path):
    # found by test_a_mutated_deployment_...: `${file:<a FIFO nobody writes to>}` blocked the
    # loader forever in open(); now only a regular file is read
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    raw = {"clusters": {"a": {"bootstrap_servers": "${file:" + str(fifo) + "}"}}, "topics": {"names": ["t"]},
           "tree": {"level": 1, "children": ["a"]}}
    with pytest.raises(ConfigError, match="not a regular file"):
        parse_deployment(raw, source="d.yaml")


def test_a_key_with_a_line_break_gives_a_one_line_config_error():
    # found by test_a_mutated_deployment_...: {'clusters': {'\n': None}} printed a two-line
    # error (the CLI's contract is one line, exit 2); ConfigError now escapes line breaks
    with pytest.raises(ConfigError) as caught:
        parse_deployment({"clusters": {"\n": None}}, source="d.yaml")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("d.yaml: clusters.\\n")


def test_invalid_yaml_is_a_one_line_config_error_with_line_and_column(tmp_path):
    # found by test_any_file_bytes_...: PyYAML's message spans lines (with excerpts)
    from treedist.config import load_deployment

    path = tmp_path / "d.yaml"
    path.write_text("clusters:\n  a: b\n c: [\n")
    with pytest.raises(ConfigError) as caught:
        load_deployment(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: not valid YAML: ") and "line 3, column 2" in message
