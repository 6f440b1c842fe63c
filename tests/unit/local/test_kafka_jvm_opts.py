"""Local brokers' JVM options: the heap cap, and C1 only where TREEDIST_LOCAL_BROKER_JIT says so."""

import pytest

from treedist.local.errors import LocalClusterError
from treedist.local.kafka_broker import JIT_ENV, jvm_opts


def test_tiered_keeps_the_compiler_thread_cap_and_caps_the_heap(monkeypatch):
    monkeypatch.setenv(JIT_ENV, "tiered")
    opts = jvm_opts("384m")
    assert "-Xmx384m" in opts and "-Xmx512m" not in opts
    assert "-XX:CICompilerCount=2" in opts and "-XX:TieredStopAtLevel=1" not in opts


def test_c1_stops_at_the_client_compiler(monkeypatch):
    monkeypatch.setenv(JIT_ENV, "c1")
    opts = jvm_opts()
    assert opts[-1] == "-XX:TieredStopAtLevel=1" and not [o for o in opts if o.startswith("-XX:CICompilerCount")]
    assert "-Xmx512m" in opts


def test_an_unknown_value_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv(JIT_ENV, "c2")
    with pytest.raises(LocalClusterError, match=f"{JIT_ENV}='c2'"):
        jvm_opts()
