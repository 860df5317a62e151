"""File names as the store keeps them: Linux paths are bytes, and a name that is not UTF-8 (Python holds its bad
bytes as lone surrogates) cannot go into DuckDB or a terminal as it is; its undecodable bytes are kept as `\\xNN`."""

from __future__ import annotations


def storable(name: str) -> str:
    """`name` with each byte that is not UTF-8 written as `\\xNN` (`log\\udcff.txt` -> `log\\\\xff.txt`); a UTF-8 name
    is returned unchanged, so ids and stored paths of ordinary runs stay what they were."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no undecodable byte (from JSON's \ud800, say)
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
