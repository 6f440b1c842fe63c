"""Where a Store on hdfs:// finds WebHDFS, and which spark.conf settings it takes (pure)."""

from __future__ import annotations

import pytest

from treedist.spark.checkpoint_fs import plan_options, store_options
from treedist.spark.webhdfs import http_address, user


def test_the_address_defaults_to_the_namenode_host_on_9870():
    assert http_address("nn.example:8020", {}) == "http://nn.example:9870"
    assert http_address("nn.example", {}) == "http://nn.example:9870"


def test_a_configured_address_wins_and_a_wildcard_host_is_the_namenode_host():
    assert http_address("nn:8020", {"dfs.namenode.http-address": "web.example:50070"}) == "http://web.example:50070"
    assert http_address("nn:8020", {"dfs.namenode.http-address": "0.0.0.0:9871"}) == "http://nn:9871"
    assert http_address("", {"dfs.namenode.http-address": "https://web:9871/"}) == "https://web:9871"


def test_no_host_anywhere_names_the_setting():
    with pytest.raises(ValueError, match="spark.hadoop.dfs.namenode.http-address"):
        http_address("", {})


def test_store_options_take_s3a_and_webhdfs_settings_only():
    conf = {"spark.hadoop.fs.s3a.endpoint": "http://s3:9000", "spark.hadoop.dfs.namenode.http-address": "nn:9870",
            "spark.hadoop.hadoop.user.name": "td", "spark.hadoop.dfs.replication": "2", "spark.ui.enabled": "false"}
    assert store_options(conf) == {"fs.s3a.endpoint": "http://s3:9000", "dfs.namenode.http-address": "nn:9870",
                                   "hadoop.user.name": "td"}


def test_the_user_is_the_setting_then_hadoop_user_name(monkeypatch):
    monkeypatch.setenv("HADOOP_USER_NAME", "from-env")
    assert user({"hadoop.user.name": "td"}) == "td"
    assert user({}) == "from-env"


def test_plans_carry_the_drivers_webhdfs_user(monkeypatch):
    monkeypatch.setenv("HADOOP_USER_NAME", "driver-user")
    assert plan_options("hdfs://nn:8020/ck", {})["hadoop.user.name"] == "driver-user"
    assert plan_options("hdfs://nn:8020/ck", {"spark.hadoop.hadoop.user.name": "td"})["hadoop.user.name"] == "td"
    assert plan_options("s3a://bucket/ck", {}) == {}
