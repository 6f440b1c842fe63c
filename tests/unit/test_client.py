"""treedist.client: header helpers for applications (no PySpark, no brokers)."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from treedist.client import DEFAULT_FLAGS_HEADER, DEFAULT_ORIGIN_HEADER, Origin, is_copy, origin_of, strip_headers

names = st.sampled_from(["app", "trace", DEFAULT_FLAGS_HEADER, DEFAULT_ORIGIN_HEADER, "x"])
headers = st.lists(st.tuples(names, st.one_of(st.none(), st.binary(max_size=8))), max_size=8)


@given(headers)
def test_strip_keeps_the_applications_headers_in_order(hs):
    stripped = strip_headers(hs)
    assert [h for h in hs if h[0] not in (DEFAULT_FLAGS_HEADER, DEFAULT_ORIGIN_HEADER)] == stripped


def test_origin_of_a_copy_and_of_an_original():
    origin = Origin("c1", "orders", 3, 42)
    copy = [("app", b"1"), (DEFAULT_FLAGS_HEADER, b"5"), (DEFAULT_ORIGIN_HEADER, origin.encode())]
    assert origin_of(copy) == origin and is_copy(copy)
    assert origin_of([("app", b"1")]) is None and not is_copy(None)
    assert strip_headers(copy) == [("app", b"1")]
    assert origin_of([("o", b"c9/t/0/7")], origin_header="o") == Origin("c9", "t", 0, 7)


def test_usable_without_pyspark():
    code = "import sys, treedist.client; assert 'pyspark' not in sys.modules, 'pyspark imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
