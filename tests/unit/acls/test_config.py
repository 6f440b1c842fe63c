"""The `acls:` section of a deployment."""

from __future__ import annotations

import pytest

from treedist.config import parse_deployment
from treedist.config.errors import ConfigError


def _spec(**acls):
    spec = {"clusters": {"c1": {"bootstrap_servers": "h:1"}, "c2": {"bootstrap_servers": "h:2"}},
            "tree": {"level": 1, "children": ["c1", "c2"]}, "topics": {"names": ["orders"]}}
    if acls:
        spec["acls"] = acls
    return spec


def test_acl_sync_is_off_by_default():
    acls = parse_deployment(_spec()).acls
    assert (acls.sync, acls.interval, acls.downgrade_write, acls.exclude_principals) == (False, 30.0, False, ())


def test_every_key_parses_and_the_interval_takes_the_duration_forms():
    acls = parse_deployment(_spec(sync=True, interval="2m", downgrade_write=True, exclude_principals=["User:admin"])).acls
    assert (acls.sync, acls.interval, acls.downgrade_write, acls.exclude_principals) == (True, 120.0, True, ("User:admin",))


@pytest.mark.parametrize("acls, field", [
    ({"interval": "soon"}, "acls.interval"),
    ({"exclude_principals": ["admin"]}, "acls.exclude_principals"),
    ({"sync": "yes"}, "acls.sync"),
    ({"delete": True}, "acls.delete"),
])
def test_a_bad_key_is_named(acls, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        parse_deployment(_spec(**acls))


def test_every_key_has_a_description():
    from treedist.config.acls import AclSyncConfig

    assert all(f.description for f in AclSyncConfig.model_fields.values())
