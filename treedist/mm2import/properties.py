"""Java's .properties format, as `java.util.Properties.load` reads it (pure; CLI process).

The rules: a logical line is one or more natural lines, each ending in an odd number of
backslashes continued by the next (whose leading whitespace is dropped); a natural line whose
first non-blank character is `#` or `!` is a comment (never continued); the key runs to the
first unescaped `=`, `:` or whitespace, then blanks, one `=` or `:` and blanks more are
skipped; in keys and values `\\t \\n \\r \\f \\uXXXX` are what they say and a backslash
before any other character stands for that character (so `\\.` in a file is `.`: a regex
dot is written `\\\\.`). A later key replaces an earlier one. `#` after a value is part of
the value, not a comment.
"""

from __future__ import annotations

from dataclasses import dataclass

from treedist.mm2import.errors import Mm2ImportError

_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True)
class Setting:
    key: str
    value: str
    line: int  # the natural line the logical line starts on (1-based)


def parse_properties(text: str) -> dict[str, Setting]:
    """Every key of `text` with its value and line (the last one wins). Raises Mm2ImportError
    naming the line for a malformed `\\uXXXX` escape."""
    found: dict[str, Setting] = {}
    for line_no, logical in _logical_lines(text):
        key, value = _split(logical, line_no)
        found.pop(key, None)  # a repeated key moves to where it was last set
        found[key] = Setting(key, value, line_no)
    return found


def _natural_lines(text: str) -> list[str]:
    # \r\n, \r and \n all end a line (str.splitlines also splits on other characters)
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _logical_lines(text: str):
    lines = _natural_lines(text)
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while _continued(line) and i < len(lines):
            parts.append(line[:-1])
            line = lines[i].lstrip(_BLANK)
            i += 1
        if _continued(line):  # a backslash ending the file's last line is dropped
            line = line[:-1]
        parts.append(line)
        yield start + 1, "".join(parts)


def _continued(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str, line_no: int) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANK:
            break
        i += 1
    key_raw, rest = line[:i], line[i:]
    rest = rest.lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return _unescape(key_raw, line_no), _unescape(rest, line_no)


def _unescape(text: str, line_no: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            i += 1  # a lone backslash at the end stands for nothing
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise Mm2ImportError(f"line {line_no}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    joined = "".join(out)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in joined):  # \uD83D\uDE00: one character, as in Java's UTF-16
        joined = joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return joined


def dump_properties(settings: dict[str, str]) -> str:
    """`settings` as .properties text that `parse_properties` (and Java) reads back equal:
    `\\`, separators, comment characters and control characters escaped."""
    return "".join(f"{_escape(k, key=True)}={_escape(v, key=False)}\n" for k, v in settings.items())


def _escape(text: str, key: bool) -> str:
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c == " " and (key or i == 0):
            out.append("\\ ")
        elif key and c in "=:#!":
            out.append("\\" + c)
        elif not key and i == 0 and c in "#!":
            out.append("\\" + c)  # not needed after `=`, but harmless and clearer
        elif ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or 0xd800 <= ord(c) <= 0xdfff:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)
