"""docs/configuration.md is generated from the model (treedist.config.docs) and must not go
stale: a key added, removed or redescribed in treedist/config without regenerating fails here.

Regenerate with: .venv/bin/python -m treedist.config.docs -o docs/configuration.md"""

from __future__ import annotations

from pathlib import Path

from treedist.config import docs

COMMITTED = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_the_committed_reference_is_the_generated_one():
    assert COMMITTED.read_text() == docs.markdown() + "\n", (
        f"docs/configuration.md is out of date with the model in treedist/config: regenerate it with "
        f"`{docs.REGENERATE}` and commit it"
    )


def test_every_key_of_every_section_is_a_row_with_its_description():
    text = docs.markdown()
    sections = docs.sections()
    paths = [s.path for s in sections]
    assert paths[0] == "" and {"clusters.<name>", "tree", "topics.sync", "distributor.restarts", "targets",
                               "targets.failover", "offsets.groups", "control.rebalance", "acls"} <= set(paths)
    for section in sections:
        body = text.split(f'<a id="{docs._anchor(section.path)}"></a>', 1)[1].split("<a id=", 1)[0]
        for name, field in section.model.model_fields.items():
            row = next((line for line in body.splitlines() if line.startswith(f"| `{name}` |")), None)
            assert row is not None, f"{section.path or 'top level'}: no row for {name}"
            assert " ".join(field.description.split()).replace("|", "\\|") in row


def test_types_and_defaults_read_as_an_operator_writes_them():
    text = docs.markdown()
    assert "| `interval` | duration | `10 s` |" in text                       # topics.sync.interval
    assert "| `trigger_interval` | duration (0 allowed) | `0.1 s` |" in text
    assert "| `malformed_flags` | `copy` \\| `skip` \\| `fail` | `\"copy\"` |" in text
    assert "| `failback` | `manual` or [section `targets.failback`](#targets-failback) | unset |" in text
    assert "| `bootstrap_servers` | string | required |" in text
    assert "| `max_failures` | integer (≥ 1) | `5` |" in text


def test_check_fails_on_a_stale_copy_and_passes_on_a_fresh_one(tmp_path, capsys):
    stale = tmp_path / "configuration.md"
    stale.write_text(docs.markdown().replace("Time between two sync passes.", "An old text.") + "\n")
    assert docs.main(["--check", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err
    fresh = tmp_path / "fresh.md"
    assert docs.main(["-o", str(fresh)]) == 0
    assert docs.main(["--check", str(fresh)]) == 0
