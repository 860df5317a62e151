"""The text of a structured file (a config, a JSON document, a table) as its writer encoded it: UTF-8, with or
without a byte-order mark (Windows tools and Excel write one), or UTF-16 / UTF-32, which PowerShell's `>` and
some editors write. The one rule, applied where a reader turns a file's bytes into text; and whether a file's bytes
are text at all, judged from a sample taken across it (the console reader and the format sniffers share both).

A byte-order mark says the encoding; without one, UTF-16 and UTF-32 text of ASCII characters shows as NUL bytes
between the characters (the test `json.detect_encoding` makes of a document's first four bytes)."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path

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


# -- text or data, and a text file sampled across it (the console reader and the format sniffers read these) ------

# Encodings a text log is written in besides UTF-8 (a Chinese Windows console's GBK, which GB18030 extends): text in
# one of them is a log's text, whose ASCII (its names and values) reads as it is.
LEGACY_ENCODINGS = ("gb18030",)
LEGACY_EVIDENCE = 4  # characters of a script a head must hold, decoded, before it is called that encoding's text


# Control bytes text holds (tab, line breaks, form feed, backspace and bell of progress bars, ANSI's escape) and
# the share of other control bytes above which a head is data: a crash's few odd bytes stay well under it.
TEXT_CONTROLS = frozenset(b"\t\n\r\x0b\x0c\x08\x07\x1b")
MAX_CONTROL_SHARE = 0.05


def utf16_order(head: bytes) -> str | None:
    """The codec of a UTF-16 text (`utf-16-le`/`-be`): a byte-order mark, or a NUL in every other byte of mostly
    ASCII text (PowerShell's `>` and `Tee-Object` write logs so); None for any other file."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16-le" if head[:2] == b"\xff\xfe" else "utf-16-be"
    body = head[: len(head) // 2 * 2]
    if len(body) < 32:
        return None
    even, odd = body[0::2], body[1::2]
    for nuls, chars, order in ((odd, even, "utf-16-le"), (even, odd, "utf-16-be")):
        if nuls.count(0) > 0.9 * len(nuls) and chars.count(0) < 0.1 * len(chars):
            return order
    return None


def as_utf8(data: bytes) -> bytes:
    """`data` as UTF-8 where it is UTF-16 text or text in a legacy encoding (for the sniffers, which read bytes),
    else as it is."""
    order = utf16_order(data)
    if order is None:
        legacy = legacy_encoding(data[:4096])
        return data if legacy is None else data.decode(legacy, errors="replace").encode("utf-8")
    data = data[2:] if data[:2] in (b"\xff\xfe", b"\xfe\xff") else data
    return data[: len(data) // 2 * 2].decode(order, errors="replace").encode("utf-8")


def binary_reason(head: bytes) -> str | None:
    """Why `head` is data, not text (None: text). NULs are holes, not data (a log truncated while its writer kept
    its offset restarts with zeros; a crash leaves a block of them); UTF-16 is text; so are a few odd bytes, escape
    codes and a legacy encoding (GBK). Data holds other control bytes, or bytes no encoding reads, in bulk."""
    if utf16_order(head.lstrip(b"\x00")) is not None:
        return None
    head = head.replace(b"\x00", b"")
    if not head:
        return None
    control = sum(b < 32 and b not in TEXT_CONTROLS for b in head)
    if control > MAX_CONTROL_SHARE * len(head):
        return f"{control / len(head):.0%} of its first bytes are control bytes"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4 and _undecodable_share(head) > 0.3 and not _legacy_text(head):
            return "most of its first bytes are no text in UTF-8 or a legacy encoding"
    return None


def legacy_encoding(head: bytes) -> str | None:
    """The legacy encoding (`LEGACY_ENCODINGS`) a text file is written in, judged from its first bytes: not UTF-8
    (beyond a character cut at the end of `head`) and read by that encoding as `LEGACY_EVIDENCE` characters or more,
    mostly letters of a script (CJK); None for UTF-8, UTF-16, data and a head too short to tell."""
    if head.isascii() or utf16_order(head) is not None:
        return None
    try:
        head.decode("utf-8")
        return None
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 4:
            return None  # a UTF-8 character cut by the sample's end
    for encoding in LEGACY_ENCODINGS:
        text = _decoded(head, encoding)
        if text is None:
            continue
        wide = [c for c in text if not c.isascii()]
        if len(wide) >= LEGACY_EVIDENCE and sum(c.isalpha() or 0x3000 <= ord(c) <= 0x303F or 0xFF00 <= ord(c) <= 0xFFEF
                        for c in wide) >= 0.8 * len(wide):
            return encoding
    return None


def _decoded(head: bytes, encoding: str) -> str | None:
    """`head` in `encoding`, a character its end cut (up to 3 bytes) left out; None where it is not that encoding."""
    for cut in range(4):
        try:
            return head[: len(head) - cut].decode(encoding)
        except UnicodeDecodeError:
            continue
    return None


def _legacy_text(head: bytes) -> bool:
    """Whether `head` is text in one of `LEGACY_ENCODINGS` (a character cut at its end allowed)."""
    for encoding in LEGACY_ENCODINGS:
        try:
            head[:-4].decode(encoding)
            return True
        except UnicodeDecodeError:
            continue
    return False


def _undecodable_share(head: bytes) -> float:
    text = head.decode("utf-8", errors="replace")
    return text.count("\ufffd") / max(1, len(text))


SAMPLE_BYTES = 16 << 10  # bytes `sample` takes at each of a file's head, middle and tail


def sample(path: Path, n: int = SAMPLE_BYTES) -> bytes:
    """A file's bytes where it is small, else its first `n` bytes and whole lines from its middle and its end,
    joined by line breaks: a log whose first kilobytes are an environment or config dump, or that holds several
    launches, is known by what it prints later. A binary file (`binary_reason` of its first 4 KiB)
    gives its head only; UTF-16 text is given as UTF-8; b"" when it cannot be read."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(0)
            if size <= 3 * n:
                return as_utf8(f.read())
            parts = [f.read(n)]
            if binary_reason(parts[0][:4096]) is not None:
                return parts[0]  # binary: no line of it is sampled further
            wide = utf16_order(parts[0]) is not None
            newline = b"\n\x00" if wide and parts[0][:2] != b"\xfe\xff" else b"\x00\n" if wide else b"\n"
            for at in (size // 2 - n // 2, size - n):
                at -= at % 2 if wide else 0
                f.seek(at)
                part = f.read(n)
                cut = next((i + len(newline) for i in _finds(part, newline) if not wide or i % 2 == 0), 0)
                parts.append(part[cut:] if cut else b"")
    except OSError:
        return b""
    if wide:
        order = utf16_order(parts[0])
        parts = [as_utf8(parts[0]), *(p[: len(p) // 2 * 2].decode(order, errors="replace").encode("utf-8")
                                      for p in parts[1:])]
    head = parts[0]
    head = head[: max(head.rfind(b"\n"), 0) + 1]  # the head's whole lines only
    taken = b"".join([head, *(p if p.endswith(b"\n") else p + b"\n" for p in parts[1:] if p)])
    if not wide and size <= BAR_SCAN_BYTES and _mostly_bars(taken):
        return _between_bars(path, head, 3 * n) or taken
    return taken


# A progress bar's redraw with nothing after its timing (`Train:  0%|    | 5/1108 [00:24<43:34,  2.37s/it]`, its
# cursor-up escape after it): a log whose sample is mostly these keeps its records (an epoch's `loss: 5.62`) far
# apart, between thousands of redraws, so the lines between the bars are sampled instead, across the whole file
# where it is no larger than `BAR_SCAN_BYTES`.
_IDLE_BAR = re.compile(rb"\d+/\d+ \[[\d:]+<[\d:?]+,\s*[\d.?]+\s*(?:s/it|it/s)\](?:\x1b\[A|\s)*$")
BAR_SCAN_BYTES = 8 << 20


def _mostly_bars(data: bytes) -> bool:
    lines = [line for line in re.split(rb"\r\n|\r|\n", data) if line.strip()]
    return len(lines) >= 20 and sum(_IDLE_BAR.search(line) is not None for line in lines) * 2 >= len(lines)


def _between_bars(path: Path, head: bytes, n: int) -> bytes:
    """`head`, then the file's lines that are no idle progress bar, up to `n` bytes in all (b"" when unreadable)."""
    try:
        data = path.read_bytes()
    except OSError:
        return b""
    out, size = [head], len(head)
    for line in re.split(rb"(?<=\n)", data[len(head):]):
        if size >= n:
            break
        if line.strip() and not any(_IDLE_BAR.search(seg) for seg in re.split(rb"\r(?!\n)", line) if seg.strip()):
            out.append(line if line.endswith(b"\n") else line + b"\n")
            size += len(out[-1])
    return b"".join(out)


def _finds(data: bytes, sub: bytes) -> Iterator[int]:
    """Where `sub` occurs in `data`, in order."""
    at = data.find(sub)
    while at >= 0:
        yield at
        at = data.find(sub, at + 1)
