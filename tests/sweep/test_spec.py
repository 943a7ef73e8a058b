"""Sweep specs: points of a grid, a list and a seeded random sample, workloads of every kind, and one clear error
for every bad key or value before anything runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from isa.arch import load_arch
from npusim.app.sweep import Conv, Gemm, OnnxModel, SpecError, Topology, grid_points, load_spec
from npusim.app.topology import read_topology
from npusim.app.zoo import resnet18

GEMM = [{"gemm": {"M": 64, "N": 64, "K": 64}}]


def test_grid_points_are_the_cartesian_product_with_joint_keys():
    pts = grid_points({"matrix.rows,matrix.cols": [8, 16], "dram.gb_per_s": [4.0, 8.0, 16.0]})
    assert len(pts) == 6
    assert pts[0] == ["matrix.rows=8", "matrix.cols=8", "dram.gb_per_s=4.0"]
    assert pts[-1] == ["matrix.rows=16", "matrix.cols=16", "dram.gb_per_s=16.0"]


def test_grid_values_take_their_field_types_and_columns_show_the_value_in_effect():
    spec = load_spec({"arch": {"base": "mid32", "set": ["dram.latency_ns=150"]},
                      "grid": {"dram.gb_per_s": [8, 16], "matrix.dtypes": [["i8"], ["i8", "f32"]]},
                      "workloads": GEMM})
    assert spec.base == load_arch("mid32", ["dram.latency_ns=150"])
    assert spec.points[0] == (("dram.gb_per_s", 8.0), ("matrix.dtypes", ("i8",)))
    assert isinstance(spec.points[0][0][1], float)
    assert spec.overrides(spec.points[3]) == ["dram.gb_per_s=16.0", "matrix.dtypes=i8,f32"]
    assert spec.column_values(spec.points[3]) == {"dram.gb_per_s": 16.0, "matrix.dtypes": "i8,f32"}


def test_listed_points_fill_the_columns_they_do_not_set_from_the_base_arch():
    spec = load_spec({"arch": "edge16", "points": [{"matrix.rows": 8}, {"dram.latency_ns": 300, "matrix.rows": 32}],
                      "workloads": GEMM})
    assert spec.columns == ("matrix.rows", "dram.latency_ns")
    base = load_arch("edge16")
    assert spec.column_values(spec.points[0]) == {"matrix.rows": 8, "dram.latency_ns": base.dram.latency_ns}
    assert spec.column_values(spec.points[1]) == {"matrix.rows": 32, "dram.latency_ns": 300}


def test_no_points_table_means_the_base_arch_alone():
    spec = load_spec({"workloads": GEMM})
    assert spec.points == ((),) and spec.base == load_arch("edge16") and spec.columns == ()


def test_random_sample_is_seeded_and_stays_in_its_space():
    table = {"samples": 40, "seed": 7, "matrix.rows,matrix.cols": [8, 16, 32],
             "dram.gb_per_s": {"low": 4.0, "high": 32.0, "log": True},
             "spm.size": {"low": 65536, "high": 1048576, "step": 65536}, "dram.latency_ns": {"low": 50, "high": 60}}
    a = load_spec({"random": table, "workloads": GEMM})
    assert a.points == load_spec({"random": table, "workloads": GEMM}).points   # same seed, same points
    assert a.points != load_spec({"random": table | {"seed": 8}, "workloads": GEMM}).points
    assert len(a.points) == 40
    for p in a.points:
        d = dict(p)
        assert d["matrix.rows"] == d["matrix.cols"] in (8, 16, 32)
        assert 4.0 <= d["dram.gb_per_s"] <= 32.0 and isinstance(d["dram.gb_per_s"], float)
        assert d["spm.size"] % 65536 == 0 and 65536 <= d["spm.size"] <= 1048576 and isinstance(d["spm.size"], int)
        assert 50 <= d["dram.latency_ns"] <= 60
        # numbers of 3 significant digits, so that every drawn Arch converts GB/s to cycles exactly (isa.speeds)
        assert all(float(f"{d[k]:.3g}") == d[k] for k in ("dram.gb_per_s", "dram.latency_ns"))
        load_arch("mid32", [f"{k}={v}" for k, v in d.items()])
    assert len({dict(p)["matrix.rows"] for p in a.points}) == 3   # every choice drawn in 40 samples
    assert min(dict(p)["dram.gb_per_s"] for p in a.points) < 8 < max(dict(p)["dram.gb_per_s"] for p in a.points)


def test_workloads_of_every_kind(tmp_path):
    (tmp_path / "topo.csv").write_text("Layer, IFMAP H, IFMAP W, Filter H, Filter W, Channels, Num Filter, Strides,\n"
                                       "conv1, 16, 16, 3, 3, 8, 16, 1,\nconv2, 14, 14, 1, 1, 16, 32, 2,\n")
    onnx_file = tmp_path / "tiny.onnx"
    onnx_file.write_bytes(resnet18(image=32, width=8, classes=10).SerializeToString())
    (tmp_path / "spec.toml").write_text("""
output = "res"
[options]
prefetch = false
[[workloads]]
zoo = "resnet18"
args = { image = 32, width = 8, classes = 10 }
[[workloads]]
onnx = "tiny.onnx"
[[workloads]]
gemm = [64, 32, 16]
dtype = "f16"
[[workloads]]
conv = { N = 1, C = 8, H = 10, W = 10, K = 16, R = 3, S = 3, pad = 1 }
name = "c3"
[[workloads]]
topology = "topo.csv"
""")
    spec = load_spec(tmp_path / "spec.toml")
    zoo, onnx, gemm, conv, topo = spec.workloads
    assert spec.output == Path("res")   # relative to where npusim runs, not to the spec (issue 24)
    assert isinstance(zoo, OnnxModel) and zoo.name == "resnet18(image=32, width=8, classes=10)"
    assert zoo.data == onnx.data and zoo.digest == onnx.digest and onnx.name == "tiny"   # same bytes, same key
    assert zoo.options == (("prefetch", False),)
    assert zoo.digest != OnnxModel("x", zoo.data).digest   # options are part of the key
    assert gemm == Gemm("gemm 64x32x16 f16", 64, 32, 16, "f16")
    assert isinstance(conv, Conv) and conv.name == "c3" and (conv.shape.OH, conv.shape.pad) == (10, (1, 1, 1, 1))
    assert isinstance(topo, Topology) and topo.name == "topo"
    assert topo.layers == tuple(read_topology(tmp_path / "topo.csv"))
    assert topo.layers[1].M == 8 * 8   # SCALE-Sim's geometry: ceil((14 - 1 + 2) / 2) = 8


BAD = [
    ({"workloads": GEMM, "grids": {}}, "unknown key 'grids'"),
    ({"workloads": GEMM, "grid": {"matrix.rowz": [8]}}, "unknown Arch field 'matrix.rowz'; did you mean 'matrix.rows'"),
    ({"workloads": GEMM, "grid": {"matrix.rows": [8, 0]}},
     "matrix.rows must be an integer in [1, 2**16 - 1] (the k and n of mxu.mm hold 1-65535), not 0"),
    ({"workloads": GEMM, "grid": {"matrix.rows": 8}}, "matrix.rows must be a non-empty list of values"),
    ({"workloads": GEMM, "grid": {"matrix.dataflow": ["ws", "xs"]}}, "matrix.dataflow must be one of"),
    ({"workloads": GEMM, "grid": {"a": [1]}, "points": [{}]}, "give one of grid, points or random"),
    ({"workloads": GEMM, "random": {"samples": 0, "matrix.rows": [8]}}, "random.samples must be an integer >= 1"),
    ({"workloads": GEMM, "random": {"samples": 3, "dram.gb_per_s": {"low": 8}}}, "must be a list of values or a"),
    ({"workloads": GEMM, "random": {"samples": 3, "dram.gb_per_s": {"low": 9.0, "high": 4.0}}}, "0 < low <= high"),
    ({"workloads": GEMM, "arch": "edge17"}, "--arch must be a preset"),
    ({"workloads": GEMM, "arch": {"base": "mid32", "set": ["dma.chanels=2"]}}, "did you mean 'dma.channels'"),
    ({"workloads": []}, "workloads must be a non-empty list"),
    ({"workloads": [{"zoo": "resnet19"}]}, "unknown zoo model 'resnet19'; the zoo has resnet18"),
    ({"workloads": [{"zoo": "resnet18", "args": {"depth": 3}}]}, "resnet18 has no argument 'depth'"),
    ({"workloads": [{"zoo": "bert_layer", "args": {"hidden": 30, "heads": 4}}]}, "multiple of heads"),
    ({"workloads": [{"gemm": {"M": 64, "N": 64}}]}, "workloads[0].gemm lacks K"),
    ({"workloads": [{"gemm": {"M": 64, "N": 64, "K": -1}}]}, "gemm.K must be an integer >= 1, not -1"),
    ({"workloads": [{"gemm": [1, 2, 3], "dtype": "i4"}]}, "dtype must be one of"),
    ({"workloads": [{"gemm": [1, 2, 3], "zoo": "resnet18"}]}, "exactly one of zoo, onnx, gemm, conv, topology"),
    ({"workloads": [{"gemm": [1, 2, 3], "args": {}}]}, "unknown key 'args' for a gemm workload"),
    ({"workloads": [{"conv": {"N": 1, "C": 6, "H": 8, "W": 8, "K": 4, "R": 3, "S": 3, "groups": 4}}]}, "groups=4"),
    ({"workloads": [{"onnx": "missing.onnx"}]}, "no such file"),
    ({"workloads": [{"topology": "t.csv", "format": "gem"}]}, "format must be 'conv' or 'gemm'"),
    ({"workloads": [{"topology": __file__}]}, "workloads[0].topology: "),
    ({"workloads": GEMM * 2}, "two workloads are named 'gemm 64x64x64 i8'"),
    ({"workloads": GEMM, "options": {"prefech": True}}, "unknown option 'prefech'"),
    ({"workloads": GEMM, "options": {"buffers": 3}}, "buffers must be 1 or 2"),
]


@pytest.mark.parametrize("data, message", BAD, ids=[m for _, m in BAD])
def test_bad_specs_fail_with_one_line_naming_the_problem(data, message):
    with pytest.raises(SpecError, match=re.escape(message)) as e:
        load_spec(data)
    assert "\n" not in str(e.value)


def test_bad_toml_and_missing_spec(tmp_path):
    (tmp_path / "s.toml").write_text("grid = [")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(tmp_path / "s.toml")
    with pytest.raises(SpecError, match="no sweep spec"):
        load_spec(tmp_path / "nope.toml")
