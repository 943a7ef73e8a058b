"""Memory microbenchmarks: DRAM row-buffer access patterns and SPM bank-conflict layouts, one DMA each.

    python bench/memory_micro.py [--arch edge16]

DRAM rows read the same 4 KiB into the SPM: sequentially, one burst per page (stride = dram.page_bytes), and as two
interleaved streams whose pages sit in different banks or in the same bank (row thrash). SPM rows read a 16-row block
one bank word wide transposed (a column per output row) from an i8 matrix whose rows are one SPM line: unpadded
(every element of a column in one bank), padded by one word, and XOR-swizzled (word w of row j stored at word
w ^ (j % banks)), which a strided view of at most 5 dimensions expresses exactly. Each pattern is simulated alone;
docs/timing.md gives the formulas and tests/sim/test_memory.py asserts every edge16 row's cycles, derived by hand.
"""

from __future__ import annotations

import argparse
from typing import NamedTuple

from isa import DmaCopy, DType, Halt, Program, ProgramConfig, Queue, Region, Space, View
from isa.arch import Arch, load_arch
from isa.cost import instr_cost
from npusim import SimResult, simulate

NBYTES = 4096  # DRAM patterns: bytes read by each


class Pattern(NamedTuple):
    name: str
    instr: DmaCopy
    overrides: tuple[str, ...] = ()  # Arch overrides this pattern runs with


def _dram_read(shape: tuple[int, ...], strides: tuple[int, ...]) -> DmaCopy:
    return DmaCopy(queue=Queue.DMA_LD, shape=shape, dst=View(Space.SPM, 0, DType.I8, _dense(shape)),
                   src=View(Space.DRAM, 0, DType.I8, strides, "A"))


def _dense(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major byte strides of a dense i8 array of ``shape``."""
    out, acc = [], 1
    for e in reversed(shape):
        out.append(acc)
        acc *= e
    return tuple(reversed(out))


def dram_patterns(arch: Arch) -> list[Pattern]:
    """4 KiB DRAM -> SPM reads that differ only in their DRAM address pattern."""
    page, banks, burst = arch.dram.page_bytes, arch.dram.banks, arch.dma.burst_bytes
    n = NBYTES // burst
    seq = _dram_read((n, burst), (burst, 1))
    return [
        Pattern("dram sequential", seq),
        Pattern("dram sequential, model=bandwidth", seq, ("dram.model=bandwidth",)),
        Pattern(f"dram strided: 1 burst per page ({page} B)", _dram_read((n, burst), (page, 1))),
        Pattern("dram 2 streams, different banks", _dram_read((n // 2, 2, burst), (burst, page, 1))),
        Pattern("dram 2 streams, same bank", _dram_read((n // 2, 2, burst), (burst, page * banks, 1))),
    ]


def _transposed(base: int, strides: tuple[int, ...], shape: tuple[int, ...]) -> DmaCopy:
    """SPM -> SPM copy of an i8 block read column by column; the destination (at 64 KiB) is dense."""
    return DmaCopy(queue=Queue.DMA_LD, shape=shape, dst=View(Space.SPM, 65536, DType.I8, _dense(shape)),
                   src=View(Space.SPM, base, DType.I8, strides))


def spm_patterns(arch: Arch, block: int = 3, rows: int = 16) -> list[Pattern]:
    """Block column ``block`` (one ``spm.bank_width``-byte word) of a ``rows``-row i8 matrix, read transposed.

    The matrix's row pitch is one SPM line (``banks * bank_width`` bytes), so every row's word ``block`` sits in
    the same bank. Padding the pitch by one word moves row j's word to bank ``(block + j) % banks``. The XOR swizzle
    stores word w of row j at word ``w ^ (j % 2**s)`` of the row (s = log2(banks), at most 4 so that the view keeps
    at most 5 dimensions). For a fixed w the swizzled word is affine in the bits of j: bit b of j adds ``+2**b``
    words if bit b of w is 0 and ``-2**b`` if it is 1. So the column is the view with loops
    ``[i, j >> s, j_{s-1}, ..., j_0]`` and strides ``[1, 2**s * pitch, ..., 2**b * pitch +- 2**b * word, ...]``.
    """
    word, pitch = arch.spm.bank_width, arch.spm.banks * arch.spm.bank_width
    bits = min(arch.spm.banks.bit_length() - 1, (rows - 1).bit_length(), 4)
    base = block * word
    high = ((rows >> bits, 2**bits * pitch),) if rows >> bits > 1 else ()
    low = tuple((2, 2**b * pitch + (-(2**b) if block >> b & 1 else 2**b) * word) for b in reversed(range(bits)))
    dims = ((word, 1),) + high + low
    return [
        Pattern(f"spm transposed, pitch {pitch}", _transposed(base, (1, pitch), (word, rows))),
        Pattern(f"spm transposed, padded pitch {pitch + word}", _transposed(base, (1, pitch + word), (word, rows))),
        Pattern(f"spm transposed, pitch {pitch} XOR-swizzled",
                _transposed(base, tuple(st for _, st in dims), tuple(e for e, _ in dims))),
    ]


def program(arch: Arch, instr: DmaCopy) -> Program:
    cfg = ProgramConfig(rows=arch.matrix.rows, cols=arch.matrix.cols, spm=arch.spm.size, acc=arch.acc.size)
    size = instr.src.span(instr.shape)[1] if instr.src.space is Space.DRAM else 1
    return Program(cfg, (Region("A", 0, size),), (), (instr, Halt()))


def run(arch: Arch, pattern: Pattern) -> SimResult:
    """Simulate the pattern alone (timing only); its cycles equal the instruction's static cost."""
    a = arch.with_overrides(list(pattern.overrides))
    res = simulate(program(a, pattern.instr), a, timing_only=True)
    assert res.cycles == instr_cost(pattern.instr, a).cycles
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="edge16")
    args = ap.parse_args()
    arch = load_arch(args.arch)
    print(f"arch {arch.name}: DRAM {arch.dram.model}, {arch.dram.banks} banks x {arch.dram.page_bytes} B pages, "
          f"row miss {arch.dram_timing.row_miss} cycles; SPM {arch.spm.banks} banks x {arch.spm.bank_width} B")
    print(f"{'pattern':<40} {'bytes':>6} {'cycles':>7} {'bus':>6} {'hits':>5} {'misses':>6} {'conflict':>8} "
          f"{'B/cycle':>7} {'bus B/cycle':>11}")
    for p in dram_patterns(arch) + spm_patterns(arch):
        res = run(arch, p)
        a = arch.with_overrides(list(p.overrides))
        cost = instr_cost(p.instr, a)
        nbytes = cost.dram_read + cost.dram_write or cost.spm_bytes // 2
        bus = f"{cost.dram_window:>6}" if cost.dram_window else f"{'-':>6}"
        rows = (f"{res.dram_row_hits:>5} {res.dram_row_misses:>6}" if cost.dram_window else f"{'-':>5} {'-':>6}")
        bus_rate = f"{nbytes / cost.dram_window:>11.2f}" if cost.dram_window else f"{'-':>11}"
        conflict = res.unit["dma_load"].stall["bank_conflict"]
        print(f"{p.name:<40} {nbytes:>6} {res.cycles:>7} {bus} {rows} {conflict:>8} {nbytes / res.cycles:>7.2f} "
              f"{bus_rate}")


if __name__ == "__main__":
    main()
