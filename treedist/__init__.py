"""treedist: keep many Kafka clusters in sync over a tree of copy-flag distributors."""

__version__ = "0.2.0"
