"""The text of a structured file (a config, a JSON document, a table) as its writer encoded it: UTF-8, with or
without a byte-order mark (Windows tools and Excel write one), or UTF-16 / UTF-32, which PowerShell's `>` and
some editors write. The one rule, applied where a reader turns a file's bytes into text.

A byte-order mark says the encoding; without one, UTF-16 and UTF-32 text of ASCII characters shows as NUL bytes
between the characters (the test `json.detect_encoding` makes of a document's first four bytes)."""

from __future__ import annotations

import codecs

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def encoding_of(head: bytes) -> str:
    """The codec of a text file whose first bytes are `head` (four are enough): 'utf-8-sig', 'utf-16', 'utf-32'
    (each reads and drops its mark), 'utf-16-le' ... for marked-less wide text, else 'utf-8'."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    b = head[:4]
    if len(b) == 4 and all(b):
        return "utf-8"
    if len(b) == 4:
        if b[0] and not b[1] and b[2] and not b[3]:
            return "utf-16-le"
        if not b[0] and b[1] and not b[2] and b[3]:
            return "utf-16-be"
        if b[0] and not any(b[1:]):
            return "utf-32-le"
        if not any(b[:3]) and b[3]:
            return "utf-32-be"
    return "utf-8"


def is_wide(head: bytes) -> bool:
    """True when the file is UTF-16 or UTF-32 text (a reader that works on the bytes of UTF-8 lines names it)."""
    return encoding_of(head).startswith(("utf-16", "utf-32"))


def decode(raw: bytes, errors: str = "replace") -> str:
    """`raw` as text in its encoding (`encoding_of`), its byte-order mark dropped; bytes that are not of the
    encoding are U+FFFD with errors='replace'."""
    return raw.decode(encoding_of(raw[:4]), errors)


def wide_name(head: bytes) -> str:
    """'UTF-16' or 'UTF-32', as a message names the encoding."""
    return "UTF-32" if "32" in encoding_of(head) else "UTF-16"


def wide_text(name: str, raw: bytes, start: int):
    """For a reader of UTF-8 lines by their byte offsets, which cannot read wide text: the Chunk that names the
    file's encoding (read problem `wide_text`), or None for a file it reads."""
    from ingest.records import Chunk, Issue

    if not is_wide(raw[:4]):
        return None
    return Chunk(end=start, issues=[Issue(None, "wide_text", f"{name} is {wide_name(raw[:4])} text, which this "
                                                             "line-by-line reader does not read; save it as UTF-8")])
