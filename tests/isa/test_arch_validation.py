"""Arch entry checks: every field bounded (the bound in the message), name and description strings, TOML files
decoded as UTF-8 with the bad byte named, an empty or partial file refused unless a base preset fills it in."""

import dataclasses
import re

import pytest

from isa import ArchError
from isa.arch import SECTIONS, Arch, load_arch, preset_names

EDGE = load_arch("edge16")


@pytest.mark.parametrize("override,message", [
    # the fuzzer's OverflowError in isa.cost._dram / _row_delay and npusim.sim.resources, and the MemoryError of
    # spm.ports=2147483648 (a list of 2**31 ports)
    ("spm.ports=2147483648", "spm.ports must be an integer in [1, 64], not 2147483648"),
    ("dram.latency_ns=99999999999999999999", "dram.latency_ns must be a number in [0, 1e+06] (a millisecond), "
                                             "not 1e+20"),
    ("dma.outstanding=9223372036854775808", "dma.outstanding must be an integer in [1, 4096], not "
                                            "9223372036854775808"),
    ("host.launch_ns=1e30", "host.launch_ns must be a number in [0, 1e+09], not 1e+30"),
    ("spm.size=4294967296", "spm.size must be an integer in [1, 2**31] (2 GiB: program addresses are 32-bit and "
                            "the simulator holds the memory), not 4294967296"),
    ("matrix.cols=65536", "matrix.cols must be an integer in [1, 2**16 - 1] (the k and n of mxu.mm hold 1-65535), not "
                         "65536"),
    ("matrix.max_rows=65536", "matrix.max_rows must be an integer in [1, 2**16 - 1] (the m of mxu.mm holds "
                              "1-65535), not 65536"),
    ("dram.gb_per_s=inf", "dram.gb_per_s must be a number in [0.1, 1e+06] (at least 0.001 bytes per cycle at the "
                          "fastest clock), not inf"),
    ("clock.ghz=nan", "clock.ghz must be a number in [0.001, 100], not nan"),
    ("host.gops=1e-300", "host.gops must be a number in [0.001, 1e+06], not 1e-300"),
])
def test_every_integer_is_bounded(override, message):
    with pytest.raises(ArchError) as e:
        EDGE.with_overrides([override])
    assert str(e.value) == message


def test_a_memory_line_is_at_most_64_kib():
    with pytest.raises(ArchError, match=r"^spm\.banks \* bank_width \(one memory line\) must be at most 65_536 "
                                        r"bytes, not 1024 \* 4096 = 4194304$"):
        EDGE.with_overrides(["spm.banks=1024", "spm.bank_width=4096"])


def test_the_bounds_hold_the_presets_and_every_default():
    for name in preset_names():
        load_arch(name)
    Arch()


@pytest.mark.parametrize("field,value", [("name", 5), ("name", True), ("description", [1]), ("name", None)])
def test_name_and_description_are_strings(field, value):
    with pytest.raises(ArchError, match=rf"^{field} must be a string, not {re.escape(repr(value))}$"):
        dataclasses.replace(EDGE, **{field: value})
    d = EDGE.to_dict() | {field: value}
    with pytest.raises(ArchError, match=rf"^arch: {field} must be a string, not "):
        Arch.from_dict(d)


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "   \n\n"])
def test_an_empty_file_is_an_error_that_says_so(tmp_path, text):
    path = tmp_path / "empty.toml"
    path.write_text(text)
    with pytest.raises(ArchError) as e:
        load_arch(str(path))
    assert str(e.value) == (f"{path} is empty: an Arch gives every field, or names a preset to take the others "
                            f"from (base = \"edge16\"; presets: dc128, edge16, mid32)")


def test_a_partial_file_names_what_it_lacks():
    with pytest.raises(ArchError) as e:
        Arch.from_toml('name = "p"\ndescription = ""\n[matrix]\nrows = 8\n', "p.toml")
    assert str(e.value).startswith("p.toml lacks matrix.cols, matrix.dataflow, matrix.dtypes, matrix.fold_overlap, "
                                   "matrix.max_rows, vector.lanes, vector.alu_latency, vector.mul_latency and ")
    assert str(e.value).endswith(" more: give every field, or name a preset to take the others from "
                                 "(base = \"edge16\"; presets: dc128, edge16, mid32)")
    full = EDGE.to_dict()
    del full["dram"]["page_bytes"]
    with pytest.raises(ArchError, match=r"^arch lacks dram\.page_bytes: give every field"):
        Arch.from_dict(full)


def test_a_base_preset_fills_in_what_a_file_leaves_out(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text('base = "mid32"\nname = "mid64"\n[matrix]\nrows = 64\ncols = 64\n[spm]\nsize = 4194304\n')
    arch = load_arch(str(path))
    mid = load_arch("mid32")
    assert arch == dataclasses.replace(mid, name="mid64", matrix=dataclasses.replace(mid.matrix, rows=64, cols=64),
                                       spm=dataclasses.replace(mid.spm, size=4 << 20))
    assert Arch.from_toml(arch.to_toml()) == arch          # written out in full, it needs no base
    assert "base" not in arch.to_toml()
    with pytest.raises(ArchError, match=r"^big\.toml: base must name a preset \(dc128, edge16, mid32\), not 'x'$"):
        Arch.from_toml('base = "x"\n', "big.toml")
    with pytest.raises(ArchError, match=r"^big\.toml: matrix\.rows must be an integer in \[1, 2\*\*16 - 1\]"):
        Arch.from_toml('base = "mid32"\n[matrix]\nrows = 0\n', "big.toml")


@pytest.mark.parametrize("data,line,col,byte", [
    (b'name = "caf\xe9"\n', 1, 12, "0xe9"),                  # Latin-1
    (b'name = "x"\n\xff\xfe[matrix]\n', 2, 1, "0xff"),       # UTF-16 BOM bytes
])
def test_a_toml_file_must_be_utf8(tmp_path, data, line, col, byte):
    path = tmp_path / "latin1.toml"
    path.write_bytes(data)
    with pytest.raises(ArchError) as e:
        load_arch(str(path))
    assert str(e.value).startswith(f"{path}:{line}:{col}: not UTF-8 text: byte {byte} (")
    assert str(e.value).endswith(f"); save {path} as UTF-8")


def test_every_field_has_a_check_that_states_its_bound():
    """Every numeric field refuses 2**63 with a message giving its range (the energy section's too, when merged)."""
    for sec, klass in SECTIONS.items():
        for f in dataclasses.fields(klass):
            if isinstance(f.default, bool) or not isinstance(f.default, int | float):
                continue
            with pytest.raises(ArchError, match=rf"^{sec}\.{f.name} must be an? \w+ in [\[(][\d.]+, [\d_*. e+-]+\]"):
                EDGE.with_overrides([f"{sec}.{f.name}={2**63}"])
