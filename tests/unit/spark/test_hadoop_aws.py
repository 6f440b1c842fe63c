"""The S3A jars go on the driver's class path and into spark.jars for an s3a:// checkpoint
location only, after what the deployment's spark.conf already names (from the cache that
scripts/bootstrap fills; nothing downloaded)."""

from __future__ import annotations

import os
import re

from treedist.spark.hadoop_aws import jars, session_conf


def test_other_locations_leave_the_conf_alone():
    conf = {"spark.jars": "/x.jar"}
    assert session_conf("/var/lib/ck", conf) == conf
    assert session_conf("hdfs://nn/ck", conf) == conf


def test_an_s3a_location_adds_hadoop_aws_after_the_users_class_path():
    found = [str(p) for p in jars()]
    assert any(p.endswith("hadoop-aws-3.5.0.jar") for p in found) and any("/s3-2." in p for p in found)
    names = [p.rsplit("/", 1)[-1] for p in found]
    # Spark's own Netty 4 (not a second copy) and the SDK's modules, not its 686 MB bundle
    assert not any(re.match(r"netty-[a-z-]+-4\.", n) or n.startswith("bundle-") for n in names), names
    conf = session_conf("s3a://b/ck", {"spark.driver.extraClassPath": "/mine/*", "spark.jars": "/x.jar"})
    assert conf["spark.driver.extraClassPath"].split(os.pathsep) == ["/mine/*", *found]
    assert conf["spark.jars"].split(",") == ["/x.jar", *found]
