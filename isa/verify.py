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


def _geometry(view, shape: tuple[int, ...], extra: tuple[tuple[int, int], ...]) -> tuple[bool, int, int]:
    """(strides misaligned to the element size, lowest and one-past-highest byte touched relative to the base)."""
    es = view.dtype.size
    lo, hi = view.span(shape, extra)
    return (es > 1 and (any(s % es for s in view.strides) or any(s % es for _, s in extra[:1])),
            lo - view.base, hi - view.base)


def _check_bounds(program: Program, pc: int, instr: Instr, memo: dict | None = None) -> None:
    """Alignment and bounds of every operand of ``instr``; ``memo`` caches each view's geometry (strides, shape and
    extra give its span relative to the base) across the instructions of one program."""
    cfg = program.config
    memo = {} if memo is None else memo
    for role, view, extra in instr.views():
        shape = instr.src_shape if role == "src" and type(instr) is DmaCopy else instr.shape
        key = (view.strides, shape, extra, view.dtype.size)
        geo = memo.get(key)
        if geo is None:
            geo = memo[key] = _geometry(view, shape, extra)
        misaligned, lo_off, hi_off = geo
        es = view.dtype.size
        base = view.base
        if misaligned or es > 1 and base % es:
            raise VerifyError(f"{where(pc, instr)}: operand {role} must be aligned to its {es}-byte elements "
                              f"(base {base:#x}, strides {list(view.strides)})")
        space = view.space
        if space is Space.DRAM:
            region = program.region_map.get(view.region)
            if region is None:
                raise VerifyError(f"{where(pc, instr)}: operand {role} names undeclared region {view.region!r}")
            size = region.size
        else:
            size = cfg.spm if space is Space.SPM else cfg.acc
        if base + lo_off < 0 or base + hi_off > size:
            name = f"region {view.region}" if space is Space.DRAM else space.name
            raise VerifyError(f"{where(pc, instr)}: operand {role} touches bytes [{base + lo_off:#x}, "
                              f"{base + hi_off:#x}) outside the {size}-byte {name}")


def verify(program: Program) -> VerifyReport:
    """Check ``program``; raise VerifyError on the first error, return warnings otherwise."""
    report = VerifyReport()
    sem_index = program.sem_index
    count = [s.init for s in program.sems]
    first_neg: list[str] = []
    memo: dict = {}
    instrs, cfg = program.instrs, program.config
    last = len(instrs) - 1
    consumer, producer = report.consumer, report.producer
    for pc, instr in enumerate(instrs):
        t = type(instr)
        if t is Halt and pc != last:
            raise VerifyError(f"{where(pc, instr)}: halt must be the last instruction")
        if t is MatMul and (instr.k > cfg.rows or instr.n > cfg.cols):
            raise VerifyError(f"{where(pc, instr)}: a {instr.k}x{instr.n} weight tile does not fit the "
                              f"{cfg.rows}x{cfg.cols} array of .config")
        _check_bounds(program, pc, instr, memo)
        waits, signals = instr.waits, instr.signals
        if not (waits or signals):
            continue
        q = instr.queue
        for ops, role, table in ((waits, "waited on", consumer), (signals, "signalled", producer)):
            for op in ops:
                if op.name not in sem_index:
                    raise VerifyError(f"{where(pc, instr)}: semaphore {op.name!r} is not declared (.sem NAME INIT)")
                other = table.setdefault(op.name, q)
                if other is not q:
                    raise VerifyError(f"{where(pc, instr)}: semaphore {op.name} is {role} by {other.text} and by "
                                      f"{q.text}; each semaphore has one producer queue and one consumer queue")
        for op in waits:
            i = sem_index[op.name]
            if count[i] < op.count and not first_neg:
                first_neg.append(f"{where(pc, instr)} waits for {op.name}*{op.count} but only {count[i]} can have "
                                 f"been signalled before it in program order: the program may deadlock")
            count[i] -= op.count
        for op in signals:
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
