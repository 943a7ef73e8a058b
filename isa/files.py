"""Reading and writing program files: ``.npub`` is the binary encoding, anything else is text assembly."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from isa.asm import format_program, parse_program
from isa.encoding import decode_program, encode_program
from isa.errors import AsmSyntaxError, EncodingError
from isa.program import Program

BINARY_SUFFIX = ".npub"


def read_program(path: str | os.PathLike[str]) -> Program:
    """Read a program: binary for ``.npub``, else assembly (errors then read ``path:line:col: ...``)."""
    path = Path(path)
    if path.suffix.lower() == BINARY_SUFFIX:
        try:
            return decode_program(path.read_bytes())
        except EncodingError as e:
            raise EncodingError(f"{path}: {e}") from None
    text = decode_utf8(path.read_bytes(), str(path), lambda msg, line, col: AsmSyntaxError(msg, line, col, str(path)))
    return parse_program(text, source=str(path))


def decode_utf8(data: bytes, source: str, error: Callable[[str, int, int], Exception]) -> str:
    """``data`` decoded as UTF-8; else raise ``error(message, line, column)`` naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"not UTF-8 text: byte {data[e.start]:#04x} ({e.reason}); save {source} as UTF-8", line,
                    col) from None


def write_program(p: Program, path: str | os.PathLike[str]) -> None:
    """Write a program: binary for ``.npub``, else canonical assembly."""
    path = Path(path)
    if path.suffix.lower() == BINARY_SUFFIX:
        path.write_bytes(encode_program(p))
    else:
        path.write_text(format_program(p), encoding="utf-8")
