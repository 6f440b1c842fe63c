"""The control plane's key layout (treedist.control.keys), pure."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from treedist.control.errors import ControlError
from treedist.control.identity import new_deployment_id
from treedist.control.keys import Keys

names = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True)
units = st.one_of(st.just("topic-sync"), st.builds(lambda k, c: f"{k}/{c}", st.sampled_from(["messages", "offsets", "schemas"]), names))


@given(st.from_regex(r"(/[A-Za-z0-9._-]{1,8}){1,3}", fullmatch=True), names, units)
def test_invariant_assignment_keys_parse_back_and_stay_under_the_prefix(prefix, worker, unit):
    keys = Keys(prefix)
    key = keys.assignment(worker, unit)
    assert keys.parse_assignment(key) == (worker, unit)
    for k in (key, keys.worker(worker), keys.load(worker), keys.running(unit), keys.id, keys.config, keys.leader, keys.balance):
        assert k.startswith(keys.root)
    assert keys.worker(worker).startswith(keys.workers_prefix) and not keys.worker(worker).startswith(keys.load_prefix)


@pytest.mark.parametrize("prefix", ["treedist", "/treedist/", "/a//b", ""])
def test_bad_prefixes_are_refused(prefix):
    with pytest.raises(ControlError):
        Keys(prefix)


@pytest.mark.parametrize("name", ["a/b", "", "w 1"])
def test_worker_names_with_slashes_or_spaces_are_refused(name):
    with pytest.raises(ControlError, match="worker name"):
        Keys("/t").worker(name)


def test_deployment_ids_are_22_url_safe_characters_and_differ():
    ids = {new_deployment_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and all(c.isalnum() or c in "-_" for c in i) for i in ids)
