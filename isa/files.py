"""Reading and writing program files: ``.npub`` is the binary encoding, anything else is text assembly."""

from __future__ import annotations

import os
from pathlib import Path

from isa.asm import format_program, parse_program
from isa.encoding import decode_program, encode_program
from isa.errors import AsmSyntaxError, EncodingError
from isa.program import Program
from isa.utf8 import decode_utf8

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


def write_program(p: Program, path: str | os.PathLike[str]) -> None:
    """Write a program: binary for ``.npub``, else canonical assembly."""
    path = Path(path)
    if path.suffix.lower() == BINARY_SUFFIX:
        path.write_bytes(encode_program(p))
    else:
        path.write_text(format_program(p), encoding="utf-8")
