"""`treedist schemas diff`: every cluster's registry side by side, per subject.

`fetch_view` (I/O, the CLI's process) reads one registry over its REST API; `compare` (pure)
lines the views up by the primary's subject names (each cluster's subjects translated by the
deployment's subject naming) and marks a subject as differing when any cluster's live
(version, ID) pairs are not the primary's, or an ID decodes to another schema there.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import httpx

from treedist.registry.errors import RegistryError
from treedist.topology.naming import Naming


@dataclass(frozen=True)
class RegistryView:
    """One registry's live subjects: subject -> ((version, id), ...), and id -> schema text."""

    cluster: str
    subjects: dict[str, tuple[tuple[int, int], ...]]
    schemas: dict[int, str]


@dataclass(frozen=True)
class SubjectRow:
    subject: str  # as the primary names it
    per_cluster: dict[str, dict]  # cluster -> {"subject", "versions": [[version, id], ...]}
    differs: bool
    why: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"subject": self.subject, "differs": self.differs, "why": list(self.why), "clusters": self.per_cluster}


def fetch_view(cluster: str, url: str, timeout_s: float = 10.0) -> RegistryView:
    """Read a registry's live subjects, versions, IDs and schemas; RegistryError naming the cluster."""
    try:
        with httpx.Client(base_url=url, timeout=timeout_s) as http:
            def get(path: str):
                response = http.get(path)
                if response.status_code != 200:
                    raise RegistryError(f"registry of cluster {cluster!r} at {url}: GET {path}: {response.status_code} {response.text}")
                return response.json()

            subjects: dict[str, tuple[tuple[int, int], ...]] = {}
            schemas: dict[int, str] = {}
            for subject in get("/subjects"):
                pairs = []
                for version in get(f"/subjects/{quote(subject, safe='')}/versions"):
                    body = get(f"/subjects/{quote(subject, safe='')}/versions/{version}")
                    pairs.append((body["version"], body["id"]))
                    schemas[body["id"]] = body["schema"]
                subjects[subject] = tuple(pairs)
    except httpx.HTTPError as err:
        raise RegistryError(f"registry of cluster {cluster!r} at {url} did not answer: {err}") from None
    return RegistryView(cluster, subjects, schemas)


def compare(views: dict[str, RegistryView], primary: str, naming: Naming) -> list[SubjectRow]:
    """One row per subject (primary's naming), clusters in `views` order."""
    reference = views[primary]
    by_subject: dict[str, dict[str, tuple[str, tuple[tuple[int, int], ...]]]] = {}
    for cluster, view in views.items():
        for subject, pairs in view.subjects.items():
            home = naming.translate_subject(cluster, subject, primary) if cluster != primary else subject
            by_subject.setdefault(str(home), {})[cluster] = (subject, pairs)
    rows = []
    for home in sorted(by_subject):
        found = by_subject[home]
        want = found.get(primary, (home, ()))[1]
        why = []
        for cluster, view in views.items():
            pairs = found.get(cluster, (None, ()))[1]
            if pairs != want:
                why.append(f"{cluster}: versions/IDs {list(pairs)} != primary's {list(want)}")
            for _, schema_id in pairs:
                theirs, ours = view.schemas.get(schema_id), reference.schemas.get(schema_id)
                if ours is not None and theirs is not None and theirs != ours:
                    why.append(f"{cluster}: ID {schema_id} is another schema than on the primary")
        per_cluster = {c: {"subject": found[c][0] if c in found else None, "versions": [list(p) for p in found.get(c, (None, ()))[1]]}
                       for c in views}
        rows.append(SubjectRow(home, per_cluster, bool(why), tuple(why)))
    return rows
