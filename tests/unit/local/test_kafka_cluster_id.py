"""Local Kafka cluster IDs: Kafka's format, and never one that StorageTool takes for an option."""

import base64

from treedist.local.kafka_broker import new_cluster_id


def test_cluster_ids_are_22_character_uuids_that_never_start_with_a_dash():
    # 1 random UUID in 64 encodes to a leading "-": 4,000 draws meet ~60 of them.
    ids = [new_cluster_id() for _ in range(4000)]
    assert not [cid for cid in ids if cid.startswith("-")]
    assert all(len(cid) == 22 and len(base64.urlsafe_b64decode(cid + "==")) == 16 for cid in ids)
    assert len(set(ids)) == len(ids)
