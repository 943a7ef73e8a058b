"""Static verification of a program: names, bounds, alignment, array limits and semaphores.

Errors (raised as :class:`VerifyError`) make the program unsafe to run: an operand outside its memory, a misaligned
view, an undeclared name, a semaphore with two producer or two consumer queues, unbalanced semaphores, a tile larger
than the array. The program-order scan that proves deadlock freedom is a *warning* when it fails: it is a sufficient
condition, and the simulator detects real deadlocks exactly at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .dtypes import Queue, Space
from .errors import VerifyError
from .instructions import DmaCopy, Halt, Instr, MatMul
from .program import SEM_MAX, Program


@dataclass
class VerifyReport:
    """Warnings of a program that passed verification, and which queue produces/consumes each semaphore."""

    warnings: list[str] = field(default_factory=list)
    producer: dict[str, Queue] = field(default_factory=dict)
    consumer: dict[str, Queue] = field(default_factory=dict)


def where(pc: int, instr: Instr) -> str:
    """``pc N `text```: how errors point at an instruction."""
    text = str(instr)
    return f"pc {pc} `{text if len(text) <= 100 else text[:97] + '...'}`"


def _check_bounds(program: Program, pc: int, instr: Instr) -> None:
    cfg = program.config
    for role, view, extra in instr.views():
        shape = instr.src_shape if role == "src" and type(instr) is DmaCopy else instr.shape
        es = view.dtype.size
        if es > 1 and (view.base % es or any(s % es for s in view.strides) or any(s % es for _, s in extra[:1])):
            raise VerifyError(f"{where(pc, instr)}: operand {role} must be aligned to its {es}-byte elements "
                              f"(base {view.base:#x}, strides {list(view.strides)})")
        if view.space is Space.DRAM:
            region = program.region_map.get(view.region)
            if region is None:
                raise VerifyError(f"{where(pc, instr)}: operand {role} names undeclared region {view.region!r}")
            size, name = region.size, f"region {region.name}"
        else:
            size, name = (cfg.spm, "SPM") if view.space is Space.SPM else (cfg.acc, "ACC")
        lo, hi = view.span(shape, extra)
        if lo < 0 or hi > size:
            raise VerifyError(f"{where(pc, instr)}: operand {role} touches bytes [{lo:#x}, {hi:#x}) outside the "
                              f"{size}-byte {name}")


def verify(program: Program) -> VerifyReport:
    """Check ``program``; raise VerifyError on the first error, return warnings otherwise."""
    report = VerifyReport()
    sem_index = program.sem_index
    count = [s.init for s in program.sems]
    first_neg: list[str] = []
    for pc, instr in enumerate(program.instrs):
        if isinstance(instr, Halt) and pc != len(program.instrs) - 1:
            raise VerifyError(f"{where(pc, instr)}: halt must be the last instruction")
        if isinstance(instr, MatMul) and (instr.k > program.config.rows or instr.n > program.config.cols):
            raise VerifyError(f"{where(pc, instr)}: a {instr.k}x{instr.n} weight tile does not fit the "
                              f"{program.config.rows}x{program.config.cols} array of .config")
        _check_bounds(program, pc, instr)
        q = instr.queue
        for ops, role, table in ((instr.waits, "waited on", report.consumer),
                                 (instr.signals, "signalled", report.producer)):
            for op in ops:
                if op.name not in sem_index:
                    raise VerifyError(f"{where(pc, instr)}: semaphore {op.name!r} is not declared (.sem NAME INIT)")
                other = table.setdefault(op.name, q)
                if other is not q:
                    raise VerifyError(f"{where(pc, instr)}: semaphore {op.name} is {role} by {other.text} and by "
                                      f"{q.text}; each semaphore has one producer queue and one consumer queue")
        for op in instr.waits:
            i = sem_index[op.name]
            if count[i] < op.count and not first_neg:
                first_neg.append(f"{where(pc, instr)} waits for {op.name}*{op.count} but only {count[i]} can have "
                                 f"been signalled before it in program order: the program may deadlock")
            count[i] -= op.count
        for op in instr.signals:
            i = sem_index[op.name]
            count[i] += op.count
            if count[i] > SEM_MAX:
                raise VerifyError(f"{where(pc, instr)}: semaphore {op.name} can reach {count[i]} > {SEM_MAX}; pair "
                                  f"every 'full' semaphore with an 'empty' one to bound it")
    for decl, c in zip(program.sems, count):
        if c != decl.init:
            raise VerifyError(f"semaphore {decl.name} is unbalanced: it starts at {decl.init} and the program's "
                              f"waits and signals leave it at {c}")
    report.warnings += first_neg
    return report
