"""A Confluent-compatible schema registry whose state lives in a `_schemas` topic.

Pure core (no I/O): `records` (the topic's key/value formats), `avro` (parsing, normalising,
compatibility), `state` (the reducer that replays records) and `rules` (registration and
delete decisions). I/O: `store` (the topic: replay, write, read-your-writes) and `server`
(the REST API on starlette/uvicorn).
"""

from treedist.registry.errors import RegistryError

__all__ = ["RegistryError"]
