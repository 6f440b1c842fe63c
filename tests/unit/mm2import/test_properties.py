"""Java's .properties format as java.util.Properties.load reads it (treedist.mm2import.properties)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treedist.mm2import import Mm2ImportError, dump_properties, parse_properties


def _values(text: str) -> dict[str, str]:
    return {k: s.value for k, s in parse_properties(text).items()}


def test_separators_blanks_and_comments():
    text = ("# a comment\n! another\n   \n"
            "a=1\nb = 2\nc:3\nd : 4\ne 5\n  f\t=\t6  \ng\nh=\ni = x = y\n")
    assert _values(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6  ", "g": "", "h": "",
                             "i": "x = y"}


def test_a_hash_after_a_value_is_part_of_the_value():
    assert _values("clusters = a, b   # the aliases\n") == {"clusters": "a, b   # the aliases"}


def test_continuation_lines_drop_their_leading_blanks_and_a_comment_char_there_is_text():
    text = "topics = foo, \\\n    bar, \\\n    # not a comment\nnext = 1\n"
    assert _values(text) == {"topics": "foo, bar, # not a comment", "next": "1"}


def test_an_even_number_of_backslashes_does_not_continue_and_a_comment_is_never_continued():
    text = "a = x\\\\\nb = y\n# comment \\\nc = z\n"
    assert _values(text) == {"a": "x\\", "b": "y", "c": "z"}


def test_escapes_in_keys_and_values():
    text = "key\\ with\\:odd\\=chars = tab\\there\\nnewline \\u00e9 \\. \\\\. \\q\n"
    assert _values(text) == {"key with:odd=chars": "tab\there\nnewline \u00e9 . \\. q"}


def test_a_regex_dot_needs_a_doubled_backslash_as_in_java():
    assert _values("topics.exclude = .*[\\-\\.]internal, .*\\\\.replica\n") == {
        "topics.exclude": ".*[-.]internal, .*\\.replica"}


def test_crlf_and_cr_line_ends_and_the_last_key_wins_with_its_line():
    parsed = parse_properties("a = 1\r\nb = 2\ra = 3\n")
    assert {k: (s.value, s.line) for k, s in parsed.items()} == {"b": ("2", 2), "a": ("3", 3)}


def test_a_malformed_unicode_escape_names_its_line():
    with pytest.raises(Mm2ImportError, match="line 2: malformed"):
        parse_properties("a = 1\nb = \\u12g4\n")


def test_surrogate_pairs_make_one_character_as_in_java():
    assert _values("a = \\ud83d\\ude00\n") == {"a": "\U0001F600"}


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(TEXT.filter(bool), TEXT, max_size=8))
def test_escaped_keys_and_values_read_back_equal(settings_):
    """dump then parse is the identity, whatever the keys and values hold (separators, blanks,
    backslashes, comment characters, line ends, non-ASCII)."""
    assert _values(dump_properties(settings_)) == settings_


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_any_text_parses_or_is_one_error_naming_a_line(text):
    try:
        parse_properties(text)
    except Mm2ImportError as err:
        assert str(err).startswith("line ")
