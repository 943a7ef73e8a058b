"""Energy, power and area: small programs priced by hand from the tables, table errors, report fields, the energy
plot, the two memory roofs, `npusim diff` and `run --csv`."""

import csv
import json
import math
import shutil
from importlib import resources

import numpy as np
import pytest
from matplotlib.figure import Figure

from compiler.frontend.builder import GraphBuilder, to_onnx
from isa import ArchError, DType, Space, View
from isa.arch import Arch, load_arch
from isa.asm import parse_program
from isa.cost import DramWindow, dma_stream_bandwidth, dram_window
from isa.energy import KINDS, run_energy
from isa.techtable import load_table, parse_table, table_names
from npusim import simulate
from npusim.app.cli import main
from npusim.app.driver import run_model
from npusim.report.plots import plot_energy, plot_roofline, render
from npusim.report.tables import diff_rows, layer_rows
from npusim.sim.stats import memory_roof, memory_roof_text

# The default Arch: table 45nm, lpddr4; SPM 256 KiB, ACC 64 KiB; a 16 x 16 array of i8/u8/f16/bf16/f32 MACs; 16
# vector lanes; 1 GHz. The 45 nm table's numbers, written out by hand:
ARCH = Arch()
SPM_PJ = 1.25 * (262144 / 8192) ** 0.4746        # per byte read or written (the same at 45 nm)
ACC_PJ = 1.25 * (65536 / 8192) ** 0.4746
DRAM_PJ = 8 * 8.0                                # per byte, lpddr4 8 pJ/bit
DMA_PJ = 0.144                                   # per byte moved by a DMA instruction
STATIC_W = 12.43e-9 * (256 * 11884 + 16 * 11884 + 10.69 * (262144 + 65536))  # f32 MACs, lanes, SRAM bytes

HEAD = ".config rows=16 cols=16 spm=262144 acc=65536\n.region A r0 4096\n"


def energy_of(text: str, arch: Arch = ARCH):
    result = simulate(parse_program(HEAD + text + "\nhalt\n"), arch, timing_only=True)
    return result, result.energy


def dynamic(energy) -> dict:
    return {k: v for k, v in energy.by_kind().items() if v}


# ------------------------------------------------------------------------------------------------ by hand
def test_one_mac_costs_a_mac_two_operand_bytes_and_one_accumulator_write():
    _, e = energy_of("mxu.mm.z shape[1] m=1 k=1 n=1 acc=acc:0x0<i32>{0} acc.row=4 a=spm:0x0<i8>{0} a.row=1 "
                     "b=spm:0x10<i8>{0}")
    assert dynamic(e) == pytest.approx({"mac": 0.3, "spm_read": 2 * SPM_PJ, "acc_write": 4 * ACC_PJ})
    assert e.by_unit(e.unit[0]) == pytest.approx(0.3 + 2 * SPM_PJ + 4 * ACC_PJ)


@pytest.mark.parametrize("dtype,pj", [("i8", 0.3), ("u8", 0.3), ("f16", 2.0), ("bf16", 2.0), ("f32", 4.6)])
def test_a_mac_is_priced_by_its_operand_type(dtype, pj):
    size, acc = DType.from_text(dtype).size, "f32" if dtype[0] in "fb" else "i32"
    _, e = energy_of(f"mxu.mm shape[1] m=2 k=3 n=4 acc=acc:0x0<{acc}>{{0}} acc.row=16 a=spm:0x0<{dtype}>{{0}} "
                     f"a.row={3 * size} b=spm:0x100<{dtype}>{{0}}")
    assert e.by_kind()["mac"] == pytest.approx(24 * pj)
    assert e.by_kind()["spm_read"] == pytest.approx((6 + 12) * size * SPM_PJ)
    assert e.by_kind()["acc_read"] == e.by_kind()["acc_write"] == pytest.approx(8 * 4 * ACC_PJ)   # accumulates


def test_one_dma_of_n_bytes_reads_dram_writes_spm_and_moves_each_byte_once():
    _, e = energy_of("dma.ld shape[300] dst=spm:0x0<i8>{1} src=dram:A+0x0<i8>{1}")
    assert dynamic(e) == pytest.approx({"dram_read": 300 * DRAM_PJ, "spm_write": 300 * SPM_PJ, "dma": 300 * DMA_PJ})
    _, e = energy_of("dma.st shape[25] dst=dram:A+0x0<i32>{4} src=acc:0x0<i32>{4}")
    assert dynamic(e) == pytest.approx({"dram_write": 100 * DRAM_PJ, "acc_read": 100 * ACC_PJ, "dma": 100 * DMA_PJ})


@pytest.mark.parametrize("op,pj", [("vpu.add", 0.9), ("vpu.mul", 3.7), ("vpu.div", 18.4)])
def test_one_vector_op_costs_its_class_per_element_and_its_operands(op, pj):
    _, e = energy_of(f"{op} shape[64] dst=spm:0x0<f32>{{4}} src0=spm:0x100<f32>{{4}} src1=spm:0x200<f32>{{4}}")
    assert dynamic(e) == pytest.approx({"vector": 64 * pj, "spm_read": 2 * 256 * SPM_PJ, "spm_write": 256 * SPM_PJ})


def test_leakage_is_static_power_times_time():
    result, e = energy_of("dma.ld shape[64] dst=spm:0x0<i8>{1} src=dram:A+0x0<i8>{1}")
    assert sum(e.static_w.values()) == pytest.approx(STATIC_W)
    assert sum(e.static_pj.values()) == pytest.approx(STATIC_W * result.cycles * 1e3)   # W x ns = 1e3 pJ
    n = 1_000_000
    slow = run_energy(result.program, result.costs, ARCH.with_overrides(["clock.ghz=0.5"]), n)
    assert sum(slow.static_pj.values()) == pytest.approx(STATIC_W * n * 2e3)          # 2 ns a cycle
    assert slow.dynamic_total == e.dynamic_total


def test_table_and_dram_type_change_the_price_not_the_cycles():
    text = "dma.ld shape[300] dst=spm:0x0<i8>{1} src=dram:A+0x0<i8>{1}"
    r45, e45 = energy_of(text)
    r7, e7 = energy_of(text, ARCH.with_overrides(["energy.table=7nm", "energy.dram=hbm3"]))
    assert r45.cycles == r7.cycles
    assert e7.by_kind()["dram_read"] == pytest.approx(300 * 8 * 4.05)
    assert e7.by_kind()["spm_write"] == pytest.approx(300 * 2.344 * (262144 / 4194304) ** 0.5833)


def test_area_counts_the_widest_mac_type_lanes_and_sram():
    area = ARCH.with_overrides(["matrix.dtypes=i8"])
    r = simulate(parse_program(HEAD + "halt\n"), area, timing_only=True).to_dict()["area"]
    assert r["matrix_mm2"] == pytest.approx(256 * 419e-6)
    assert r["vector_mm2"] == pytest.approx(16 * 11884e-6)
    assert r["spm_mm2"] + r["acc_mm2"] == pytest.approx((262144 + 65536) * 10.69e-6)
    assert r["total_mm2"] == pytest.approx(r["matrix_mm2"] + r["vector_mm2"] + r["spm_mm2"] + r["acc_mm2"])


# ------------------------------------------------------------------------------------------------ tables
def test_bundled_tables_have_every_value_sourced_and_the_same_dram():
    assert table_names() == ["45nm", "7nm"]
    t45, t7 = load_table("45nm"), load_table("7nm")
    for t in (t45, t7):
        for section in t.entries.values():
            for entry in section.values():
                assert entry.source and all(k.strip() in t.sources for k in entry.source.split(","))
    assert t45.entries["dram_pj_per_bit"] == t7.entries["dram_pj_per_bit"]
    assert set(t45.dram_types) == {"lpddr4", "lpddr5", "ddr4", "ddr5", "hbm2", "hbm2e", "hbm3"}
    assert t7.mac_pj("bf16") == 0.084 and t7.sram_pj_per_byte(4194304) == pytest.approx(1.992)


def _bundled_text(name="45nm") -> str:
    return resources.files("isa.techtables").joinpath(f"{name}.toml").read_text()


@pytest.mark.parametrize("edit,message", [
    (lambda s: s.replace('i8 = { value = 0.3, source = "horowitz", note = "8-bit multiply 0.2 + 32-bit add 0.1" }',
                         "i8 = 0.3"), r"\[mac_pj\]\.i8 must be \{ value = NUMBER, source = \"KEY\" \}"),
    (lambda s: s.replace('i8 = { value = 0.3, source = "horowitz"', 'i8 = { value = 0.3, source = ""'),
     r"\[mac_pj\]\.i8 has no source"),
    (lambda s: s.replace('i8 = { value = 0.3, source = "horowitz"', 'i8 = { value = 0.3, source = "nobody"'),
     r"\[mac_pj\]\.i8: source 'nobody' is not in \[sources\]"),
    (lambda s: s.replace("i8 = { value = 0.3,", "i8 = { value = -0.3,"),
     r"value must be a number in \[0, 1e\+09\], not -0.3"),
    (lambda s: s.replace("[vector_pj]", "[vectr_pj]"), r"unknown section \[vectr_pj\]; did you mean 'vector_pj'\?"),
    (lambda s: s.replace("\nspecial = {", "\nspecal = {"), r"\[vector_pj\] lacks special"),
    (lambda s: s.replace("[sources]", "[sauces]"), r"needs a \[sources\] table"),
    (lambda s: s.replace("[dma]", "[dma"), r"not valid TOML"),
])
def test_table_errors_say_what_and_where(tmp_path, edit, message):
    path = tmp_path / "mine.toml"
    path.write_text(edit(_bundled_text()))
    with pytest.raises(ArchError, match=f"energy table .*mine.toml: .*{message}"):
        load_arch("edge16", [f"energy.table={path}"])


def test_a_users_table_file_is_priced_and_bad_names_are_clear(tmp_path):
    path = tmp_path / "cheap.toml"
    path.write_text(_bundled_text().replace('lpddr4 = { value = 8.0,', 'lpddr4 = { value = 2.0,'))
    arch = ARCH.with_overrides([f"energy.table={path}"])
    _, e = energy_of("dma.ld shape[100] dst=spm:0x0<i8>{1} src=dram:A+0x0<i8>{1}", arch)
    assert e.by_kind()["dram_read"] == pytest.approx(100 * 8 * 2.0)
    with pytest.raises(ArchError, match=r"energy.table must be a bundled table \(45nm, 7nm\) or a TOML file, not "
                                        r"'5nm'"):
        ARCH.with_overrides(["energy.table=5nm"])
    with pytest.raises(ArchError, match=r"energy.dram must be one of table 45nm's DRAM types lpddr4, lpddr5, ddr4, "
                                        r"ddr5, hbm2, hbm2e, hbm3, not 'gddr6'"):
        ARCH.with_overrides(["energy.dram=gddr6"])
    with pytest.raises(ArchError, match=r"energy table inline: missing section \[mac_pj\] \(energy of one "
                                        r"multiply-accumulate .*; keys i8, f16, bf16, f32\)"):
        parse_table('[sources]\nx = "y"\n', "inline")


def test_an_arch_files_relative_table_is_the_one_beside_it():
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "examples" / "zigzag"
    arch = load_arch(folder / "tpu_like.arch.toml")
    assert arch.energy.table == str(folder / "tpu_like.energy.toml") and arch.energy.dram == "zigzag_read"
    assert load_table(arch.energy.table).mac_pj("i8") == 0.04


def test_presets_select_7nm_and_the_arch_round_trips():
    for name, dram in (("edge16", "lpddr4"), ("mid32", "ddr5"), ("dc128", "hbm2e")):
        arch = load_arch(name)
        assert (arch.energy.table, arch.energy.dram) == ("7nm", dram)
        assert Arch.from_toml(arch.to_toml()) == arch


# ------------------------------------------------------------------------------------------------ reports
def small_model(batch=1):
    rng = np.random.default_rng(0)
    b = GraphBuilder("small")
    x = b.input("x", (batch, 3, 16, 16))
    y = b.relu(b.conv(x, b.const("w", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)), strides=2, pads=1))
    y = b.gemm(b.flatten(y), b.const("fc", rng.standard_normal((512, 10)).astype(np.float32)))
    b.output(y)
    return b.build()


@pytest.fixture(scope="module")
def report():
    return run_model(small_model(), load_arch("edge16"), timing_only=True)[3]


def test_report_fields_add_up_and_carry_units(report):
    e, area = report["energy"], report["area"]
    assert {"total_pj", "dynamic_pj", "static_pj", "per_inference_pj", "average_power_w", "static_power_w",
            "edp_js", "by_kind_pj", "by_part_pj"} <= set(e)
    assert e["total_pj"] == pytest.approx(e["dynamic_pj"] + e["static_pj"])
    assert list(e["by_kind_pj"]) == [*KINDS, "leakage"]
    assert sum(e["by_kind_pj"].values()) == pytest.approx(e["total_pj"])
    assert sum(p["dynamic_pj"] + p["static_pj"] for p in e["by_part_pj"].values()) == pytest.approx(e["total_pj"])
    assert sum(u["energy_pj"] for u in report["units"].values()) == pytest.approx(e["dynamic_pj"])
    assert sum(lr["energy_pj"] for lr in report["layers"]) == pytest.approx(e["total_pj"])
    seconds = report["cycles"] / (report["arch"]["clock"]["ghz"] * 1e9)
    assert e["average_power_w"] == pytest.approx(e["total_pj"] * 1e-12 / seconds)
    assert e["edp_js"] == pytest.approx(e["total_pj"] * 1e-12 * seconds)
    assert e["per_inference_pj"] == e["total_pj"] and e["inferences"] == 1
    assert set(area) == {"matrix_mm2", "vector_mm2", "spm_mm2", "acc_mm2", "total_mm2"}
    # edge16: 8 B/cycle at 0.8 GHz; 16 bursts of 64 B in flight per 120 + 8 cycles carry 8 B/cycle too
    assert report["memory_roof"] == {"bytes_per_cycle": 8.0, "gb_per_s": pytest.approx(6.4), "binds": "both",
                                     "dram_bus": {"bytes_per_cycle": 8.0, "gb_per_s": 6.4},
                                     "dma": {"bytes_per_cycle": 8.0, "gb_per_s": pytest.approx(6.4), "outstanding": 16,
                                             "burst_bytes": 64, "round_trip_ns": 160.0}}


def test_energy_per_inference_divides_by_the_batch():
    e = run_model(small_model(batch=2), load_arch("edge16"), timing_only=True)[3]["energy"]
    assert e["inferences"] == 2 and e["per_inference_pj"] == pytest.approx(e["total_pj"] / 2)


# ------------------------------------------------------------------------------------------------ roofs
def test_the_dma_roof_is_the_dram_window_formula_for_a_long_stream():
    # 25.6 GB/s at 0.8 GHz: 32 B/cycle, a 64-B burst holds the bus d = 2 cycles; 16 in flight per 120 + 2 cycles
    # issue one every 122 / 16 = 7.625 cycles (Little's law, exact): 8.39 B/cycle, the requests in flight bind
    arch = load_arch("edge16", ["dram.model=bandwidth", "dram.gb_per_s=25.6"])
    n = 64 * 1000
    view = View(Space.DRAM, 0, DType.I8, (1,), "A")
    assert dram_window(view, (n,), arch) == DramWindow(math.ceil(999 * 122 / 16 + 2), 1000)   # 7,620 cycles
    assert dma_stream_bandwidth(arch) == pytest.approx(64 * 16 / 122)
    roof = memory_roof(arch)
    assert (roof["binds"], roof["bytes_per_cycle"], roof["gb_per_s"]) == \
        ("dma.outstanding", pytest.approx(64 * 16 / 122), pytest.approx(64 * 16 / 122 * 0.8))
    assert roof["dram_bus"] == {"bytes_per_cycle": 32.0, "gb_per_s": 25.6}
    assert roof["dma"]["round_trip_ns"] == pytest.approx(122 / 0.8)
    assert memory_roof_text(roof) == ("memory roof 6.71 GB/s (8.39 B/cycle): bound by dma.outstanding (16 x 64 B in "
                                      "flight per 152.5 ns round trip); the DRAM bus gives 25.6 GB/s: raise "
                                      "dma.outstanding")
    assert memory_roof(load_arch("edge16", ["dma.outstanding=64"]))["binds"] == "dram.gb_per_s"


def test_roofline_draws_both_roofs_and_points_stay_under_the_lower(report):
    drawn = plot_roofline(report, Figure().add_subplot())
    assert (drawn.bandwidth, drawn.dma, drawn.binds, drawn.roof) == (8.0, 8.0, "both", 8.0)
    assert [a.get_label().split("\n")[0] for a in drawn.artists[:2]] == \
        ["binds: DRAM bus (dram.gb_per_s)", "binds: DMA in flight (dma.outstanding)"]
    assert drawn.artists[1].get_label().endswith("16 x 64 B per 160 ns = 6.4 GB/s = 8 B/cycle")
    assert (drawn.attained <= np.minimum(drawn.peak, drawn.intensity * drawn.dma) + 1e-9).all()
    old = {k: v for k, v in report.items() if k != "memory_roof"}   # a report from before the field: from its arch
    assert plot_roofline(old, Figure().add_subplot()).dma == 8.0


def test_energy_plot_stacks_each_layers_kinds(report, tmp_path):
    drawn = plot_energy(report, Figure().add_subplot())
    assert drawn.names == [lr["name"] for lr in report["layers"]]
    stacked = sum(drawn.parts.values())
    assert stacked == pytest.approx([lr["energy_pj"] for lr in report["layers"]])
    assert drawn.parts["leakage"].sum() == pytest.approx(report["energy"]["static_pj"])
    render(report, "energy", tmp_path / "e.png")
    assert (tmp_path / "e.png").read_bytes().startswith(b"\x89PNG")


# ------------------------------------------------------------------------------------------------ CLI
@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    import onnx

    path = tmp_path_factory.mktemp("m") / "small.onnx"
    onnx.save(to_onnx(small_model()), path)
    return path


def test_run_csv_has_one_row_per_layer_with_energy(model_file, tmp_path, capsys):
    out, js = tmp_path / "layers.csv", tmp_path / "r.json"
    assert main(["run", str(model_file), "--arch", "edge16", "--timing-only", "--quiet", "--csv", str(out),
                 "--json", str(js)]) == 0
    text = capsys.readouterr().out
    assert "energy uJ" in text and "energy " in text
    assert "memory roof 6.4 GB/s (8 B/cycle): bound by both the DRAM bus (dram.gb_per_s) and dma.outstanding (16 x " \
           "64 B in flight per 160 ns round trip): raise both" in text
    rows = list(csv.DictReader(out.open()))
    report = json.loads(js.read_text())
    assert [r["name"] for r in rows] == [lr["name"] for lr in report["layers"]]
    assert [float(r["energy_pj"]) for r in rows] == [lr["energy_pj"] for lr in report["layers"]]
    assert {"cycles", "time_split_compute", "energy_dram_read_pj", "energy_leakage_pj"} <= set(rows[0])
    assert layer_rows(report)[0]["cycles"] == int(rows[0]["cycles"])


def test_finding4_diff_puts_two_runs_side_by_side_arch_differences_first(model_file, tmp_path, capsys):
    a, b, rows_csv = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "diff.csv"
    for path, extra in ((a, []), (b, ["--set", "energy.table=45nm", "--set", "dma.outstanding=4"])):
        assert main(["run", str(model_file), "--arch", "edge16", "--timing-only", "--quiet", "--json", str(path),
                     *extra]) == 0
    capsys.readouterr()
    assert main(["diff", str(a), str(b), "--csv", str(rows_csv)]) == 0
    text = capsys.readouterr().out
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    rows = diff_rows(ra, rb)
    cycles = next(r for r in rows if r["metric"] == "cycles" and r["section"] == "total")
    assert (cycles["a"], cycles["b"]) == (ra["cycles"], rb["cycles"]) and rb["cycles"] > ra["cycles"]
    mac = next(r for r in rows if r["metric"] == "energy_mac_pj")
    assert mac["b"] / mac["a"] == pytest.approx(1 / 0.042)               # 45 nm against 7 nm: the same f32 MACs
    assert {r["name"] for r in rows if r["section"] == "unit"} == set(ra["units"])
    assert not any(r["name"] == "host" and r["metric"] == "busy_cycles" for r in rows)      # 0 in both: not shown
    assert {r["name"] for r in rows if r["section"] == "layer"} == {lr["name"] for lr in ra["layers"]}
    assert f"{rb['cycles'] / ra['cycles']:.3f}x" in text and "stall_dram_bandwidth" in text
    assert len(list(csv.DictReader(rows_csv.open()))) == len(rows)
    assert all(r["a"] == r["b"] for r in diff_rows(ra, ra))
    # the Arch differences come first (issue 24: diff showed none although the runs ran different machines)
    arch = [(r["name"], r["metric"], r["a"], r["b"]) for r in rows if r["section"] == "arch"]
    assert arch == [("arch", "name", "edge16", "edge16+dma.outstanding=4,energy.table=45nm"),
                    ("dma", "outstanding", ra["arch"]["dma"]["outstanding"], 4),
                    ("energy", "table", ra["arch"]["energy"]["table"], "45nm")]
    assert rows[:3] == [r for r in rows if r["section"] == "arch"] and text.splitlines()[1].startswith("arch")
    # dma.outstanding changes the tiling search's prices, so B ran another program: diff says so (issue 24)


def test_finding4_diff_warns_when_the_runs_ran_different_programs(model_file, tmp_path, capsys):
    """Same program, other clock-free field (energy.table): no note; another tiling: a note naming both programs."""
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    for path, extra in ((a, []), (b, ["--set", "energy.table=45nm"]), (c, ["--set", "spm.size=131072"])):
        assert main(["run", str(model_file), "--arch", "edge16", "--timing-only", "--quiet", "--json", str(path),
                     *extra]) == 0
    ra, rb, rc = (json.loads(p.read_text()) for p in (a, b, c))
    assert ra["program"] == rb["program"] and ra["program"]["instructions"] > 0
    capsys.readouterr()
    assert main(["diff", str(a), str(b)]) == 0 and capsys.readouterr().err == ""
    assert ra["program"]["sha256"] != rc["program"]["sha256"]
    assert main(["diff", str(a), str(c)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("npusim: note: A and B ran different programs (sha256 " + ra["program"]["sha256"][:12])
    assert f"{ra['program']['instructions']:,} vs {rc['program']['instructions']:,} instructions" in err


def test_diff_and_plot_refuse_what_is_not_a_report(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert main(["diff", str(bad), str(bad)]) == 1
    assert "is not an npusim report (no 'cycles')" in capsys.readouterr().err
    shutil.copy(bad, tmp_path / "x.json")
    assert main(["plot", str(tmp_path / "x.json"), "--kind", "energy", "-o", str(tmp_path / "e.png")]) == 1
