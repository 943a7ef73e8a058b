"""Seed material the fuzzers mutate: valid programs, Arch TOML texts, a tiny model, run reports and input files.

Everything is built from the project's own examples and compilers, small enough that one simulation takes
milliseconds, and cached per process.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

MIX = """\
.config rows=16 cols=16 spm=262144 acc=65536
.region X r0 4096
.region Y r1 4096
.sem x_full 0
.sem y_full 0
.sem h_done 0
dma.ld shape[16,64] dst=spm:0x0<i8>{64,1} src=dram:X+0x0<i8>{256,1} signal(x_full)
vpu.add shape[16,64] dst=spm:0x1000<i8>{64,1} src0=spm:0x0<i8>{64,1} imm=3 wait(x_full)
vpu.cvt shape[16,64] dst=spm:0x2000<f16>{128,2} src=spm:0x1000<i8>{64,1} scale=0.5 zp_in=0 zp_out=0
vpu.act.exp shape[16,64] dst=spm:0x4000<f32>{256,4} src=spm:0x2000<f16>{128,2}
vpu.red.max.z shape[16,64] dst=spm:0x8000<f32>{4,0} src=spm:0x4000<f32>{256,4}
vpu.mul shape[4,16,16] dst=spm:0x9000<i8>{256,16,1} src0=spm:0x0<i8>{4,64,1} src1=spm:0x0<i8>{0,64,1} act=relu
dma.st.fill shape[32] dst=dram:Y+0x100<i32>{4} value=-7
dma.st shape[8,128] dst=dram:Y+0x800<i8>{128,1} src=spm:0x9000<i8>{128,1} signal(y_full)
host.call fn=post rd=1024 wr=64 ops=4096 wait(y_full) signal(h_done)
dma.ld.sync wait(h_done)
barrier
halt
"""


@functools.cache
def seed_programs() -> tuple[str, ...]:
    """Canonical assembly texts of small valid programs (each simulates on edge16 in milliseconds)."""
    from compiler.kernels.common.target import Target
    from compiler.kernels.conv2d import ConvShape, conv2d
    from compiler.kernels.gemm import tiled_gemm
    from isa import DType
    from isa.arch import Arch
    from isa.asm import format_program, parse_program

    target = Target.of(Arch())   # 16 x 16, 256 KiB SPM, 64 KiB ACC
    conv = conv2d(ConvShape(1, 8, 6, 6, 16, 3, 3, 1, 1), DType.I8, target)
    gemm = tiled_gemm(40, 24, 20, DType.F16, target)
    texts = [(EXAMPLES / "gemm_int8.s").read_text(), (EXAMPLES / "deadlock.s").read_text(), MIX,
             format_program(conv), format_program(gemm)]
    return tuple(format_program(parse_program(t)) for t in texts)


@functools.cache
def seed_binaries() -> tuple[bytes, ...]:
    from isa.asm import parse_program
    from isa.encoding import encode_program

    return tuple(encode_program(parse_program(t)) for t in seed_programs())


@functools.cache
def preset_tomls() -> tuple[str, ...]:
    from isa.arch import load_arch, preset_names

    return tuple(load_arch(n).to_toml() for n in preset_names())


def tiny_graph():
    """A two-input model: relu(conv(x)) + z, x 1x4x8x8 and z 1x8x8x8 float32."""
    from compiler.frontend.builder import GraphBuilder

    b = GraphBuilder("tiny")
    x = b.input("x", (1, 4, 8, 8), np.float32)
    w = np.random.default_rng(0).standard_normal((8, 4, 3, 3)).astype(np.float32)
    y = b.relu(b.conv(x, w, None, pads=(1, 1, 1, 1)))
    z = b.input("z", (1, 8, 8, 8), np.float32)
    b.output(b.add(y, z))
    return b.build()


TINY_INPUTS = {"x": ((1, 4, 8, 8), np.float32), "z": ((1, 8, 8, 8), np.float32)}


def tiny_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(shape).astype(dt) for k, (shape, dt) in TINY_INPUTS.items()}


def gemm_inputs() -> dict[str, np.ndarray]:
    with np.load(EXAMPLES / "gemm_int8.npz") as d:
        return {k: d[k] for k in d.files}


def write_files(d: Path) -> dict[str, str]:
    """Files the CLI fuzzer names (good, bad and odd), written into ``d``; returns name -> path."""
    import onnx

    from compiler.frontend.builder import to_onnx
    from isa.files import read_program, write_program

    d.mkdir(parents=True, exist_ok=True)
    f: dict[str, str] = {}

    def put(name: str, data: bytes | str) -> None:
        p = d / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        f[name] = str(p)

    good = seed_programs()[0]
    put("good.s", good)
    put("mix.s", seed_programs()[2])
    put("deadlock.s", seed_programs()[1])
    write_program(read_program(d / "good.s"), d / "good.npub")
    f["good.npub"] = str(d / "good.npub")
    put("latin1.s", good.replace("; ", "; caf\xe9 ").encode("latin-1") + b"; \xe9t\xe9\n")
    put("binary.s", bytes(range(256)) * 4)
    put("nul.s", good[:200] + "\0\0\0" + good[200:])
    put("empty.s", "")
    put("truncated.npub", (d / "good.npub").read_bytes()[:-7])
    put("garbage.npub", b"NPU0" + bytes(60))
    np.savez(d / "good.npz", **gemm_inputs())
    f["good.npz"] = str(d / "good.npz")
    gi = gemm_inputs()
    np.savez(d / "wrongdtype.npz", A=gi["A"].astype(np.float32), B=gi["B"])
    f["wrongdtype.npz"] = str(d / "wrongdtype.npz")
    np.savez(d / "unknown.npz", Q=gi["A"])
    f["unknown.npz"] = str(d / "unknown.npz")
    np.save(d / "single.npy", gi["A"])
    f["single.npy"] = str(d / "single.npy")
    np.savez(d / "strings.npz", A=np.array(["a", "b"]))
    f["strings.npz"] = str(d / "strings.npz")
    np.savez(d / "objects.npz", A=np.array([1, "b", None], dtype=object))
    f["objects.npz"] = str(d / "objects.npz")
    put("corrupt.npz", b"PK\x03\x04" + bytes(100))
    ti = tiny_inputs()
    np.savez(d / "tiny.npz", **ti)
    f["tiny.npz"] = str(d / "tiny.npz")
    np.savez(d / "tiny_shape.npz", x=ti["x"][0], z=ti["z"])
    f["tiny_shape.npz"] = str(d / "tiny_shape.npz")
    np.savez(d / "tiny_dtype.npz", x=ti["x"].astype(np.float64), z=ti["z"])
    f["tiny_dtype.npz"] = str(d / "tiny_dtype.npz")
    np.savez(d / "tiny_missing.npz", x=ti["x"])
    f["tiny_missing.npz"] = str(d / "tiny_missing.npz")
    np.save(d / "tiny_x.npy", ti["x"])
    f["tiny_x.npy"] = str(d / "tiny_x.npy")
    onnx.save(to_onnx(tiny_graph()), d / "tiny.onnx")
    f["tiny.onnx"] = str(d / "tiny.onnx")
    from isa.arch import load_arch

    put("good.toml", load_arch("mid32").to_toml())
    put("empty.toml", "")
    put("partial.toml", 'name = "p"\n[matrix]\nrows = 8\n')
    put("based.toml", 'base = "mid32"\nname = "p"\n[matrix]\nrows = 8\n')
    put("latin1.toml", 'name = "caf\xe9"\n'.encode("latin-1"))
    put("badname.toml", load_arch("edge16").to_toml().replace('name = "edge16"', "name = 5"))
    put("huge.toml", re.sub(r"ports = \d+", "ports = 2147483648", load_arch("edge16").to_toml(), count=1))
    put("cycles.toml", 'base = "mid32"\n[dram]\nbandwidth = 32.0\n')      # a field from before GB/s
    put("list.json", "[1, 2, 3]")
    put("garbage.json", "{not json")
    put("empty.json", "{}")
    put("sim.json", json.dumps(_report()))
    put("weird.json", json.dumps({"cycles": 5, "units": [1, 2], "layers": "x"}))
    put("sweep.toml", 'arch = "edge16"\npoints = [{}]\n[[workloads]]\ngemm = { M = 16, N = 16, K = 16 }\n')
    put("sweep_bad.toml", 'arch = "edge16"\ngrid = { "matrix.rows" = [0] }\n[[workloads]]\n'
                          'gemm = { M = 16, N = 16, K = 16 }\n')
    put("topo.csv", "Layer, IFMAP H, IFMAP W, Filter H, Filter W, Channels, Num Filter, Strides,\n"
                    "c1, 8, 8, 3, 3, 4, 8, 1,\n")
    put("topo_bad.csv", "Layer,a\nc1, x, 8, 3, 3, 4, 8, 1,\n")
    put("topo_gemm.csv", "Layer, M, N, K,\ng1, 32, 16, 24,\n")
    return f


@functools.cache
def _report() -> dict:
    from isa.arch import load_arch
    from isa.asm import parse_program
    from npusim import simulate

    return simulate(parse_program(seed_programs()[0]), load_arch("edge16"), timing_only=True).to_dict()
