"""verify with passive clusters: a passive cluster's originals are expected on it only.

Named invariants, over random perfect distributions with one cluster made passive (its
originals' copies removed everywhere):
- PASSIVE_ORIGINALS_STAY_LOCAL_IS_CLEAN: the report is clean, and the passive cluster expects
  every original while the others expect all but its originals, the report's top-level
  `expected` too;
- A_PASSIVE_ORIGINAL_ELSEWHERE_IS_UNEXPECTED: on the unchanged distribution (its copies
  still everywhere), every other cluster reports exactly those copies as unexpected.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.topology.origin import Origin
from treedist.verify import build_report

from tests.unit.verify.worlds import TOPIC, World, summarise, worlds


def _from(rec, cluster: str) -> bool:
    origin = rec.origin()
    return origin is not None and Origin.decode(origin).cluster == cluster


@settings(max_examples=100, deadline=None)
@given(worlds(), st.data())
def test_PASSIVE_ORIGINALS_STAY_LOCAL_IS_CLEAN_and_ELSEWHERE_UNEXPECTED(world: World, data) -> None:
    passive = data.draw(st.sampled_from(world.clusters))
    own = sum(1 for o in world.originals if o.cluster == passive)
    one_way = {c: [r for r in log if not _from(r, passive)] for c, log in world.logs.items()}
    report = build_report(TOPIC, summarise(one_way), passive={passive})
    assert report.ok, report.as_dict()
    # the top level counts what an active cluster holds: every original but the passive one's
    assert report.expected == report.as_dict()["expected"] == len(world.originals) - own
    for c in report.clusters:
        assert c.expected == len(world.originals) - (0 if c.cluster == passive else own)

    both_ways = build_report(TOPIC, summarise(world.logs), passive={passive})
    assert both_ways.cluster(passive).ok
    for c in both_ways.clusters:
        if c.cluster != passive:
            assert (c.unexpected, c.missing, c.duplicated) == (own, 0, 0), c.cluster
