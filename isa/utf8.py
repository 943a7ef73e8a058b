"""Text files users write (assembly, Arch and technology tables, sweep specs, topologies) read as UTF-8, with an error
that names the first byte that is not."""

from __future__ import annotations

from collections.abc import Callable


def decode_utf8(data: bytes, source: str, error: Callable[[str, int, int], Exception]) -> str:
    """``data`` decoded as UTF-8; else raise ``error(message, line, column)`` naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"not UTF-8 text: byte {data[e.start]:#04x} ({e.reason}); save {source} as UTF-8", line,
                    col) from None
