"""What the fuzz targets found, each as a plain test with the minimal input."""

from __future__ import annotations

import pytest

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
