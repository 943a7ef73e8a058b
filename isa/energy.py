"""Energy, power and area of a run, priced by the Arch's technology table (``energy.table``; docs/energy.md).

Nothing is simulated again: the counts are what the run recorded per instruction, its static
:class:`isa.cost.Cost` (MACs; DRAM, SPM and ACC bytes read and written) and, for a vector instruction, its elements
and operation class; the run's cycles give the time the parts leak for. Energies are pJ, power W, area mm².
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain

import numpy as np

from isa.arch import Arch
from isa.columns import unit_keys
from isa.cost import Cost, vpu_class
from isa.instructions import DmaCopy, DmaFill, Gather, HostCall, MatMul, VecBinary, VecConvert, VecRequant, VecUnary
from isa.machine import machine, machine_units
from isa.program import Program
from isa.techtable import TechTable, load_table
from isa.units import Role

KINDS = ("mac", "vector", "spm_read", "spm_write", "acc_read", "acc_write", "dram_read", "dram_write", "dma", "host")
"""Dynamic action kinds, in report order; ``leakage`` is the static kind."""
PART_OF_KIND = {"mac": "matrix", "vector": "vector", "spm_read": "spm", "spm_write": "spm", "acc_read": "acc",
                "acc_write": "acc", "dram_read": "dram", "dram_write": "dram", "dma": "dma", "host": "host"}
PARTS = ("matrix", "vector", "spm", "acc", "dram", "dma", "host")
"""Hardware parts; matrix, vector, spm and acc also leak and have area (DRAM's, the DMA engines' and the host CPU's
are not counted)."""
VECTOR = (VecBinary, VecUnary, VecConvert, VecRequant)
_COST_INDEX = {f: i for i, f in enumerate(Cost._fields)}


def table_of(arch: Arch) -> TechTable:
    """The technology table ``arch.energy.table`` names."""
    return load_table(arch.energy.table)


def unit_area_um2(part: str, arch: Arch, table: TechTable) -> float:
    """Area (µm²) of one unit whose :attr:`isa.units.UnitSpec.part` is ``part``: ``matrix``, the array (rows x cols
    MACs, each sized for the widest type in ``matrix.dtypes``); ``vector``, its lanes."""
    if part == "matrix":
        return arch.matrix.rows * arch.matrix.cols * table.mac_area_um2(arch.matrix.dtypes)
    if part == "vector":
        return arch.vector.lanes * table.value("vector_lane", "area_um2")
    raise KeyError(f"no area model of unit part {part!r}")


def area_mm2(arch: Arch) -> dict[str, float]:
    """Area of each part that has one (mm²) and ``total``: every unit of the machine whose kind names a part
    (:func:`unit_area_um2`), and the SPM and ACC bytes."""
    t = table_of(arch)
    um2: dict[str, float] = {}
    for unit in machine_units(arch):
        if unit.spec.part is not None:
            um2[unit.spec.part] = um2.get(unit.spec.part, 0.0) + unit_area_um2(unit.spec.part, arch, t)
    um2 |= {"spm": arch.spm.size * t.value("sram", "area_um2_per_byte"),
            "acc": arch.acc.size * t.value("sram", "area_um2_per_byte")}
    out = {part: v * 1e-6 for part, v in um2.items()}
    return out | {"total": sum(out.values())}


def leakage_w(arch: Arch) -> dict[str, float]:
    """Static power (W) of each part: the logic leakage density times the array's and the lanes' area, the SRAM
    leakage density times the SPM's and ACC's."""
    t, a = table_of(arch), area_mm2(arch)
    logic = {part: t.logic_leak_w(mm2 * 1e6) for part, mm2 in a.items() if part not in ("spm", "acc", "total")}
    return logic | {"spm": t.sram_leak_w(arch.spm.size), "acc": t.sram_leak_w(arch.acc.size)}


def instruction_energy(program: Program, costs: list[Cost], arch: Arch) -> np.ndarray:
    """Dynamic energy (pJ) of each instruction by kind: an array of shape ``(instructions, len(KINDS))``.

    mac: MACs x ``mac_pj[operand type]``; vector: elements x ``vector_pj[class]`` (``vpu.gather``: the elements it
    writes, alu class); spm/acc read and write: bytes x the SRAM's per-byte energy at its size; dram: bytes x 8 x
    ``dram_pj_per_bit[energy.dram]`` (a host call's DRAM bytes too); dma: the bytes a DMA instruction (copy, fill or
    gather) writes (to DRAM, SPM or ACC) x ``dma.pj_per_byte``; host: a ``host.call``'s operations x
    ``host.pj_per_op`` + the bytes it reads and writes x ``host.pj_per_byte``.
    """
    t, n = table_of(arch), len(program.instrs)
    c = np.fromiter(chain.from_iterable(costs), np.float64, n * len(Cost._fields)).reshape(n, -1).T
    col = lambda name: c[_COST_INDEX[name]]
    mac_pj, elems_pj, host_pj, is_dma = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n, bool)
    for pc, ins in enumerate(program.instrs):
        if isinstance(ins, MatMul):
            mac_pj[pc] = t.mac_pj(ins.a.dtype.text)
        elif isinstance(ins, VECTOR):
            elems_pj[pc] = math.prod(ins.shape) * t.value("vector_pj", vpu_class(ins))
        elif isinstance(ins, Gather) and ins.queue.unit.role is Role.VECTOR:   # the elements it moves, at the alu class
            elems_pj[pc] = ins.points * ins.row * t.value("vector_pj", vpu_class(ins))
        elif isinstance(ins, HostCall):
            host_pj[pc] = ins.ops * t.value("host", "pj_per_op") + (ins.rd + ins.wr) * t.value("host", "pj_per_byte")
        else:
            is_dma[pc] = isinstance(ins, DmaCopy | DmaFill | Gather)
    spm_r, spm_w = t.sram_pj_per_byte(arch.spm.size), t.sram_pj_per_byte(arch.spm.size, write=True)
    acc_r, acc_w = t.sram_pj_per_byte(arch.acc.size), t.sram_pj_per_byte(arch.acc.size, write=True)
    dram = t.dram_pj_per_byte(arch.energy.dram)
    written = col("dram_write") + col("spm_write") + col("acc_write")
    columns = {"mac": col("macs") * mac_pj, "vector": elems_pj,
               "spm_read": (col("spm_bytes") - col("spm_write")) * spm_r, "spm_write": col("spm_write") * spm_w,
               "acc_read": (col("acc_bytes") - col("acc_write")) * acc_r, "acc_write": col("acc_write") * acc_w,
               "dram_read": col("dram_read") * dram, "dram_write": col("dram_write") * dram,
               "dma": np.where(is_dma, written, 0.0) * t.value("dma", "pj_per_byte"), "host": host_pj}
    return np.column_stack([columns[k] for k in KINDS]) if n else np.zeros((0, len(KINDS)))


@dataclass(frozen=True)
class RunEnergy:
    """The energy of one run: dynamic pJ per instruction and kind (``per_pc``), static power per part (W) and the
    run's length (cycles at ``ghz``). Totals and splits are derived from these."""

    arch: Arch
    per_pc: np.ndarray
    unit: np.ndarray
    static_w: dict[str, float]
    cycles: int

    @property
    def seconds(self) -> float:
        return self.cycles / (self.arch.clock.ghz * 1e9)

    @property
    def static_pj(self) -> dict[str, float]:
        """Leakage energy (pJ) of each part over the whole run."""
        return {part: w * self.seconds * 1e12 for part, w in self.static_w.items()}

    @property
    def dynamic_total(self) -> float:
        """Dynamic energy of the run (pJ): the sum of :meth:`by_kind`, as the report adds it (the same float)."""
        return sum(self.by_kind().values())

    @property
    def total(self) -> float:
        """Dynamic + static energy of the run (pJ)."""
        return self.dynamic_total + sum(self.static_pj.values())

    def by_kind(self, pcs=slice(None)) -> dict[str, float]:
        """Dynamic pJ by kind of the instructions ``pcs`` (all by default)."""
        return dict(zip(KINDS, self.per_pc[pcs].sum(axis=0).tolist()))

    def by_unit(self, unit: int) -> float:
        """Dynamic pJ of the instructions of the unit with index ``unit`` (:attr:`isa.machine.Unit.index`), their
        memory and DRAM accesses included."""
        return float(self.per_pc[self.unit == unit].sum())

    def to_dict(self, inferences: int = 1) -> dict:
        """The report's ``energy`` object (docs/report.md): pJ, W, J*s."""
        static, kinds = self.static_pj, self.by_kind()
        dynamic, leak = sum(kinds.values()), sum(static.values())
        total = dynamic + leak
        seconds = self.seconds
        parts = {p: {"dynamic_pj": sum(v for k, v in kinds.items() if PART_OF_KIND[k] == p),
                     "static_pj": static.get(p, 0.0)} for p in PARTS}
        return {"table": self.arch.energy.table, "dram_type": self.arch.energy.dram,
                "total_pj": total, "dynamic_pj": dynamic, "static_pj": leak,
                "inferences": inferences, "per_inference_pj": total / max(inferences, 1),
                "average_power_w": total * 1e-12 / seconds if seconds else 0.0,
                "static_power_w": sum(self.static_w.values()),
                "edp_js": total * 1e-12 * seconds,
                "by_kind_pj": kinds | {"leakage": leak}, "by_part_pj": parts}


def run_energy(program: Program, costs: list[Cost], arch: Arch, cycles: int) -> RunEnergy:
    """The :class:`RunEnergy` of a run of ``program`` on ``arch`` that took ``cycles``, from its per-pc costs."""
    unit = machine(arch).indices(unit_keys(program.instrs))
    return RunEnergy(arch, instruction_energy(program, costs, arch), unit, leakage_w(arch), cycles)


def layer_energy(energy: RunEnergy, layers: list[tuple[int, int, int]]) -> list[dict]:
    """Per layer ``(pc_start, pc_end, cycles)``: ``energy_pj`` and ``energy_by_kind_pj``: its instructions' dynamic
    energy by kind, and ``leakage``, the run's static energy shared by the layers in proportion to their cycles (layers
    overlap in time, so this keeps the layers' sum equal to the run's total)."""
    leak = sum(energy.static_pj.values())
    span = sum(c for _, _, c in layers)
    out = []
    for lo, hi, cycles in layers:
        kinds = energy.by_kind(slice(lo, hi)) | {"leakage": leak * cycles / span if span else 0.0}
        out.append({"energy_pj": sum(kinds.values()), "energy_by_kind_pj": kinds})
    return out

