"""Typed deployment configuration (one YAML file per deployment)."""

from treedist.config.errors import ConfigError
from treedist.config.loader import load_deployment, load_spec, parse_deployment
from treedist.config.model import (
    ClusterConfig,
    Deployment,
    DistributorConfig,
    SparkConfig,
    TargetOverride,
    TopicSelection,
    TopicSyncConfig,
)

__all__ = [
    "ConfigError", "load_deployment", "load_spec", "parse_deployment", "ClusterConfig", "Deployment",
    "DistributorConfig", "SparkConfig", "TargetOverride", "TopicSelection", "TopicSyncConfig",
]
