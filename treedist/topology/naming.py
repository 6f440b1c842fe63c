"""Per-cluster topic name formats: physical <-> logical topic names. Pure, no I/O.

The deployment speaks *logical* topic names; each cluster stores a topic under a *physical*
name given by its `topic_format`, e.g. `"{tenant}-{environment}-{topic}"` with
`vars: {tenant: acme, environment: eu}`; the default `"{topic}"` is the identity. Like
MirrorMaker 2's ReplicationPolicy, one small protocol is used everywhere a topic name crosses
a cluster boundary: physical -> logical on the source cluster, logical -> physical on the
target.

With fixed per-cluster var values a format is `prefix + {topic} + suffix`: the physical name
of logical `t` is `prefix + t + suffix`, and a physical name *fits* the format iff it is a
valid Kafka topic name that starts with the exact prefix, ends with the exact suffix, and
leaves a non-empty valid topic name between them (the logical name). That inversion is
unambiguous by construction; a format is still rejected when it could not be inverted if the
var values varied (`{topic}` twice, two placeholders with nothing between them), so a format
means the same whatever values it is given.

Validation errors are `NamingError`s whose message names the field (`topic_format`, `vars`,
`vars.<name>`) and, when known, the cluster (`clusters.<cluster>.<field>: <reason>`).
Translating a name never raises for a name that does not fit: it returns None (topics) or the
name unchanged (schema-registry subjects).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Mapping

from treedist.topology.errors import TopologyError

DEFAULT_FORMAT = "{topic}"
TOPIC = "topic"
# Kafka's own rule (org.apache.kafka.common.internals.Topic): 1..249 of [A-Za-z0-9._-],
# and neither "." nor "..".
MAX_TOPIC_LENGTH = 249
_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SUBJECT_SUFFIXES = ("-key", "-value")


class NamingError(TopologyError):
    """A topic format or its vars that cannot give one unambiguous name mapping.

    `field` is the offending field relative to the cluster (`topic_format`, `vars`,
    `vars.<name>`), `reason` the explanation, `cluster` the cluster when known.
    """

    def __init__(self, field: str, reason: str, cluster: str | None = None) -> None:
        self.field, self.reason, self.cluster = field, reason, cluster
        where = f"clusters.{cluster}.{field}" if cluster is not None else field
        super().__init__(f"{where}: {reason}")

    def for_cluster(self, cluster: str) -> "NamingError":
        return NamingError(self.field, self.reason, cluster)

    def __reduce__(self):  # picklable despite the custom __init__ (errors cross Spark's boundary)
        return (NamingError, (self.field, self.reason, self.cluster))


def is_valid_topic(name: object) -> bool:
    """A legal Kafka topic name: 1..249 characters of [A-Za-z0-9._-], not "." or ".."."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= MAX_TOPIC_LENGTH
        and name not in (".", "..")
        and _TOPIC_CHARS.fullmatch(name) is not None
    )


def check_var_value(value: object) -> str:
    """A var value: a non-empty string of topic-name characters; raises ValueError otherwise."""
    if not isinstance(value, str) or not value or _TOPIC_CHARS.fullmatch(value) is None:
        raise ValueError(f"a var value must be a non-empty string of [A-Za-z0-9._-], got {value!r}")
    return value


@dataclass(frozen=True)
class Template:
    """A parsed format string: literal texts and placeholder names, alternating.

    `literals` has one more item than `placeholders`: literal[0] placeholder[0] literal[1] ...
    """

    text: str
    literals: tuple[str, ...]
    placeholders: tuple[str, ...]

    @property
    def variables(self) -> tuple[str, ...]:
        """The placeholders other than {topic}, in order of appearance."""
        return tuple(p for p in self.placeholders if p != TOPIC)


def parse_template(text: object) -> Template:
    """Parse and check a format string alone (no var values); raises NamingError(topic_format)."""

    def bad(reason: str) -> NamingError:
        return NamingError("topic_format", f"{text!r}: {reason}")

    if not isinstance(text, str):
        raise NamingError("topic_format", f"must be a string, got {text!r}")
    literals: list[str] = []
    placeholders: list[str] = []
    pos = 0
    for match in _PLACEHOLDER.finditer(text):
        literals.append(text[pos : match.start()])
        placeholders.append(match.group(1))
        pos = match.end()
    literals.append(text[pos:])
    for literal in literals:
        if "{" in literal or "}" in literal:
            raise bad("unbalanced or nested braces")
    for literal in literals:
        if literal and _TOPIC_CHARS.fullmatch(literal) is None:
            chars = sorted({c for c in literal if _TOPIC_CHARS.fullmatch(c) is None})
            raise bad(f"literal text {literal!r} has characters not allowed in topic names {chars}")
    for name in placeholders:
        if _IDENTIFIER.fullmatch(name) is None:
            raise bad(f"placeholder {{{name}}} is not a name ([A-Za-z_][A-Za-z0-9_]*)")
    count = placeholders.count(TOPIC)
    if count != 1:
        raise bad(f"{{topic}} must appear exactly once, found {count}")
    for i, (left, right) in enumerate(zip(placeholders, placeholders[1:])):
        if not literals[i + 1]:
            raise bad(f"placeholders {{{left}}} and {{{right}}} are adjacent; put a literal separator between them")
    return Template(text, tuple(literals), tuple(placeholders))


@dataclass(frozen=True)
class TopicFormat:
    """One cluster's topic name format, parsed once: physical = prefix + logical + suffix.

    Build it with `TopicFormat.parse(text, vars)` (or `TopicFormat(text, vars)` with vars as a
    tuple of pairs); both validate and raise NamingError.
    """

    text: str = DEFAULT_FORMAT
    vars: tuple[tuple[str, str], ...] = ()
    prefix: str = field(init=False)
    suffix: str = field(init=False)

    def __post_init__(self) -> None:
        template = parse_template(self.text)
        values = dict(self.vars)
        if len(values) != len(self.vars):
            raise NamingError("vars", "a var is given twice")
        for name in sorted(values):
            if name == TOPIC:
                raise NamingError("vars.topic", "'topic' cannot be a var: {topic} is the logical topic name")
            if name not in template.variables:
                raise NamingError(
                    f"vars.{name}", f"unknown var {name!r}: not a placeholder of topic_format {self.text!r}"
                )
            try:
                check_var_value(values[name])
            except ValueError as err:
                raise NamingError(f"vars.{name}", str(err)) from None
        missing = [p for p in dict.fromkeys(template.variables) if p not in values]
        if missing:
            raise NamingError(
                "vars", f"no value for placeholder(s) {', '.join('{' + m + '}' for m in missing)} of topic_format {self.text!r}"
            )
        rendered = [template.literals[0]]
        for name, literal in zip(template.placeholders, template.literals[1:]):
            rendered.append("\0" if name == TOPIC else values[name])
            rendered.append(literal)
        prefix, suffix = "".join(rendered).split("\0")
        room = MAX_TOPIC_LENGTH - len(prefix) - len(suffix)
        if room < 1:
            raise NamingError(
                "topic_format",
                f"topic_format {self.text!r} with these vars is {len(prefix) + len(suffix)} characters without the topic; "
                f"a Kafka topic name has at most {MAX_TOPIC_LENGTH}",
            )
        object.__setattr__(self, "vars", tuple(sorted(values.items())))
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "suffix", suffix)

    @classmethod
    def parse(cls, text: str = DEFAULT_FORMAT, vars: Mapping[str, str] | None = None) -> "TopicFormat":
        return cls(text, tuple((vars or {}).items()))

    @property
    def is_identity(self) -> bool:
        return not self.prefix and not self.suffix

    @property
    def max_logical_length(self) -> int:
        return MAX_TOPIC_LENGTH - len(self.prefix) - len(self.suffix)

    def physical(self, logical: str) -> str:
        """The physical name of a logical topic; NamingError if it would not be a legal topic name."""
        name = self.physical_or_none(logical)
        if name is None:
            raise NamingError(
                "topic_format",
                f"logical topic {logical!r} has no legal physical name under {self.text!r} "
                f"(a topic name of at most {self.max_logical_length} characters of [A-Za-z0-9._-] is needed)",
            )
        return name

    def physical_or_none(self, logical: object) -> str | None:
        """As `physical`, but None instead of raising."""
        if not is_valid_topic(logical) or len(logical) > self.max_logical_length:  # type: ignore[arg-type]
            return None
        return f"{self.prefix}{logical}{self.suffix}"

    def logical(self, physical: object) -> str | None:
        """The logical name of a physical topic, or None if it does not fit this format. Never raises."""
        if not is_valid_topic(physical):
            return None
        assert isinstance(physical, str)
        if len(physical) <= len(self.prefix) + len(self.suffix):
            return None
        if not (physical.startswith(self.prefix) and physical.endswith(self.suffix)):
            return None
        logical = physical[len(self.prefix) : len(physical) - len(self.suffix)]
        return logical if is_valid_topic(logical) else None

    def fits(self, physical: object) -> bool:
        return self.logical(physical) is not None


IDENTITY = TopicFormat()


@dataclass(frozen=True)
class Naming:
    """The deployment's names: cluster -> TopicFormat. Frozen and picklable.

    An unknown cluster is a programming error (NamingError); a name that does not fit never is.
    """

    formats: tuple[tuple[str, TopicFormat], ...]
    _by_cluster: dict[str, TopicFormat] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "formats", tuple(self.formats))
        object.__setattr__(self, "_by_cluster", dict(self.formats))

    @classmethod
    def of(cls, formats: Mapping[str, TopicFormat]) -> "Naming":
        return cls(tuple(formats.items()))

    @classmethod
    def parse(cls, specs: Mapping[str, tuple[str, Mapping[str, str]]]) -> "Naming":
        """From {cluster: (topic_format, vars)}; a NamingError names the cluster and the field."""
        formats = {}
        for cluster, (text, vars) in specs.items():
            try:
                formats[cluster] = TopicFormat.parse(text, vars)
            except NamingError as err:
                raise err.for_cluster(cluster) from None
        return cls.of(formats)

    @classmethod
    def identity(cls, clusters: Iterable[str]) -> "Naming":
        return cls.of({c: IDENTITY for c in clusters})

    @property
    def clusters(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.formats)

    def format(self, cluster: str) -> TopicFormat:
        try:
            return self._by_cluster[cluster]
        except KeyError:
            raise NamingError("topic_format", f"no such cluster; known: {sorted(self._by_cluster)}", cluster) from None

    def physical(self, cluster: str, logical: str) -> str:
        """The physical name of `logical` on `cluster`; NamingError if it has no legal one there."""
        try:
            return self.format(cluster).physical(logical)
        except NamingError as err:
            raise err if err.cluster is not None else err.for_cluster(cluster) from None

    def logical(self, cluster: str, physical: object) -> str | None:
        """The logical name of a topic of `cluster`, or None if it does not fit the cluster's format."""
        return self.format(cluster).logical(physical)

    def translate(self, src: str, physical: object, dst: str) -> str | None:
        """The name on `dst` of topic `physical` of `src`; None if it does not fit `src`'s format
        or its logical name has no legal physical name on `dst` (too long). Never raises for a name."""
        logical = self.logical(src, physical)
        return None if logical is None else self.format(dst).physical_or_none(logical)

    def translate_subject(self, src: str, subject: object, dst: str) -> object:
        """A schema-registry subject of `src` as named on `dst`.

        `<physical topic>-key` / `-value` (TopicNameStrategy) are translated through the
        logical topic; any other subject, or one whose topic does not translate, is returned
        unchanged.
        """
        if not isinstance(subject, str):
            return subject
        for suffix in SUBJECT_SUFFIXES:
            if subject.endswith(suffix):
                topic = self.translate(src, subject[: -len(suffix)], dst)
                return subject if topic is None else topic + suffix
        return subject


@lru_cache(maxsize=64)
def naming_of(specs: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...]) -> Naming:
    """Every cluster's naming from `(cluster, topic_format, vars items)` triples, parsed once
    per distinct set (a deployment asks for it at every selection question)."""
    return Naming.parse({name: (fmt, dict(vars)) for name, fmt, vars in specs})


def subject_format(text: str, vars: Mapping[str, str]) -> TopicFormat:
    """A subject format uses some of its cluster's vars: only those are given to it."""
    used = set(parse_template(text).variables)
    return TopicFormat.parse(text, {k: v for k, v in vars.items() if k in used})
