"""`treedist.ops.snapshot.quiet` (pure): the status job backs off only when every link runs
with nothing left to copy and nothing is unreachable or refused."""

from __future__ import annotations

from treedist.ops.snapshot import FAILED, RUNNING, WAITING, quiet


def _link(**changes) -> dict:
    return {"state": RUNNING, "lag_records": 0, "unreachable": [], "refused": [], **changes}


def test_every_link_running_and_copied_up_is_quiet():
    assert quiet({"links": [_link(), _link()]})


def test_anything_to_copy_or_anything_wrong_is_not_quiet():
    for changed in ({"lag_records": 1}, {"lag_records": None}, {"state": WAITING}, {"state": FAILED},
                    {"unreachable": ["c2"]}, {"refused": ["c2 topic t: 1 in-sync replica of 2"]}):
        assert not quiet({"links": [_link(), _link(**changed)]}), changed


def test_a_snapshot_without_links_is_not_quiet():
    assert not quiet({"links": []}) and not quiet({})
