"""Labels that say what ran (issue 24, finding 4): an Arch changed by overrides is named for its changes and
described from its fields, so a report of a 256 KiB run never says "mid32, 1 MiB SPM"."""

from isa.arch import Arch, load_arch


def test_finding4_overridden_arch_is_named_and_described_for_what_it_is():
    arch = load_arch("mid32", ["spm.size=262144", "matrix.rows=64", "matrix.cols=64"])
    assert arch.name == "mid32+matrix.rows=64,matrix.cols=64,spm.size=262144"
    assert arch.description == ("64x64 NPU: 256 KiB SPM, 38.4 GB/s DRAM, 1.2 GHz "
                                "(mid32 with matrix.rows=64, matrix.cols=64, spm.size=262144)")
    assert arch.spm.size == 262144 and (arch.matrix.rows, arch.matrix.cols) == (64, 64)


def test_overrides_that_change_nothing_keep_the_preset_name():
    preset = load_arch("mid32")
    same = load_arch("mid32", [f"spm.size={preset.spm.size}", f"clock.ghz={preset.clock.ghz}"])
    assert (same.name, same.description) == (preset.name, preset.description) and same == preset


def test_changes_to_lists_every_changed_field_in_declaration_order():
    a, b = load_arch("edge16"), load_arch("edge16", ["clock.ghz=2", "dram.gb_per_s=16", "vector.lanes=32"])
    assert a.changes_to(b) == ["vector.lanes=32", "dram.gb_per_s=16", "clock.ghz=2"]
    assert b.name == "edge16+vector.lanes=32,dram.gb_per_s=16,clock.ghz=2"
    assert Arch().changes_to(Arch()) == []
