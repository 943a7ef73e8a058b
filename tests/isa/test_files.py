"""Program files: assembly is UTF-8 text, and a file that is not says where (line, column, the byte)."""

import pytest

from isa import AsmSyntaxError
from isa.files import read_program, write_program
from tests.isa.test_asm import CANONICAL


@pytest.mark.parametrize("data,line,col,byte,reason", [
    # the fuzzer's UnicodeDecodeError cases: a Latin-1 comment, random binary bytes, a UTF-16 file
    (CANONICAL.encode() + "; caf\xe9\n".encode("latin-1"), 26, 6, "0xe9", "invalid continuation byte"),
    (b".config rows=16 cols=16 spm=262144 acc=65536\n\x80\x81\n", 2, 1, "0x80", "invalid start byte"),
    ("halt\n".encode("utf-16"), 1, 1, "0xff", "invalid start byte"),
])
def test_assembly_that_is_not_utf8_is_a_syntax_error_at_the_byte(tmp_path, data, line, col, byte, reason):
    path = tmp_path / "prog.s"
    path.write_bytes(data)
    with pytest.raises(AsmSyntaxError) as e:
        read_program(path)
    assert (e.value.line, e.value.col) == (line, col)
    assert str(e.value) == f"{path}:{line}:{col}: not UTF-8 text: byte {byte} ({reason}); save {path} as UTF-8"


def test_utf8_assembly_still_reads_and_round_trips(tmp_path):
    path = tmp_path / "prog.s"
    path.write_bytes(("; caf\u00e9 \u2014 UTF-8 comments are fine\n" + CANONICAL).encode())
    program = read_program(path)
    write_program(program, tmp_path / "again.s")
    assert read_program(tmp_path / "again.s") == program
