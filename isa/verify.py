"""Static verification of a program: names, bounds, alignment, array limits and semaphores.

Errors (raised as :class:`VerifyError`) make the program unsafe to run: an operand outside its memory, a misaligned
view, an undeclared name, a semaphore with two producer or two consumer queues, unbalanced semaphores, a tile larger
than the array. The program-order scan that proves deadlock freedom is a *warning* when it fails: it is a sufficient
condition, and the simulator detects real deadlocks exactly at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from isa.columns import Columns
from isa.dtypes import Space
from isa.errors import VerifyError
from isa.instructions import DmaCopy, Halt, Instr, MatMul
from isa.program import SEM_MAX, Program
from isa.units import key_text


@dataclass
class VerifyReport:
    """Warnings of a program that passed verification, and which unit produces/consumes each semaphore (its
    :func:`isa.units.unit_key`: queue and ordinal)."""

    warnings: list[str] = field(default_factory=list)
    producer: dict[str, int] = field(default_factory=dict)
    consumer: dict[str, int] = field(default_factory=dict)


_K, _N = attrgetter("k"), attrgetter("n")
ARRAYS_FROM = 512
"""Instructions from which :func:`verify` checks a program by arrays when given its columns: below, the arrays'
fixed cost (about 0.4 ms) makes the scan faster; reading the columns costs about as much as the scan saves, so
without them it scans."""


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


def _check_bounds(program: Program, pc: int, instr: Instr) -> None:
    """Alignment and bounds of every operand of ``instr``, with the error that names the first one that fails."""
    cfg = program.config
    for role, view, extra in instr.views():
        shape = instr.src_shape if role == "src" and type(instr) is DmaCopy else instr.shape
        misaligned, lo_off, hi_off = _geometry(view, shape, extra)
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


def _operands_fit(program: Program, start: int = 0) -> int:
    """Index of the first instruction from ``start`` whose operands are misaligned or out of bounds, or -1: the fast
    path of :func:`_check_bounds` over a program. Instructions that differ only in their operands' bases (and
    semaphores) share one geometry, memoised by what it reads, so each operand costs a base check; an instruction
    that fails is checked again by ``_check_bounds`` for its message."""
    cfg = program.config
    size_of = {Space.SPM: cfg.spm, Space.ACC: cfg.acc} | {r.name: r.size for r in program.regions}
    memo: dict = {}
    instrs = program.instrs
    for pc in range(start, len(instrs)):
        instr = instrs[pc]
        t = type(instr)
        if t is MatMul:   # the key names what views() and _geometry read; the views in views() order
            acc, a, b = views = instr.acc, instr.a, instr.b
            key = (t, instr.shape, instr.m, instr.k, instr.n, instr.acc_row, instr.a_row, acc.strides, a.strides,
                   b.strides, acc.dtype.size, a.dtype.size, b.dtype.size)
        elif t is DmaCopy:
            dst, src = views = instr.dst, instr.src
            key = (t, instr.shape, instr.pad, dst.strides, src.strides, dst.dtype.size, src.dtype.size)
        else:
            roles = instr.views()
            if not roles:
                continue
            views = [v for _, v, _ in roles]
            key = (t, instr.shape, tuple([(role, v.strides, v.dtype.size, extra) for role, v, extra in roles]))
        geo = memo.get(key)
        if geo is None:   # per operand of views(): (misaligned, lo, hi relative to the base, element size)
            geo = memo[key] = tuple([
                (*_geometry(v, instr.src_shape if role == "src" and t is DmaCopy else instr.shape, extra),
                 v.dtype.size) for role, v, extra in instr.views()])
        for v, (misaligned, lo, hi, es) in zip(views, geo):   # (a DmaCopy whose source is all padding: dst only)
            base = v.base
            size = size_of.get(v.region or v.space)
            if misaligned or size is None or base + lo < 0 or base + hi > size or base % es:
                return pc
    return -1


def verify(program: Program, cols: Columns | None = None) -> VerifyReport:
    """Check ``program``; raise VerifyError on the first error, return warnings otherwise.

    Given the program's :func:`isa.columns.columns` ``cols`` (a simulation reads them anyway) and at least
    :data:`ARRAYS_FROM` instructions, a program that passes is proved so by whole-program array checks
    (:func:`_passes`). Otherwise, and for a program that fails, it is scanned in program order (:func:`_scan`), which
    raises the error that names the first offending instruction."""
    if cols is not None and len(program.instrs) >= ARRAYS_FROM:
        report = _passes(program, cols)
        if report is not None:
            return report
    return _scan(program)


def _passes(program: Program, cols: Columns) -> VerifyReport | None:
    """The report of :func:`_scan` if it would raise nothing, else None: the same checks over arrays."""
    instrs, cfg = program.instrs, program.config
    halts = np.flatnonzero(cols.halt)
    if halts.size and (halts.size > 1 or halts[0] != len(instrs) - 1):
        return None
    mm = [i for i in instrs if type(i) is MatMul]
    if mm and (max(map(_K, mm)) > cfg.rows or max(map(_N, mm)) > cfg.cols):
        return None
    if _operands_fit(program) >= 0:
        return None
    w, s = cols.waits, cols.signals
    wpc, spc = w.pc, s.pc
    if (w.sem < 0).any() or (s.sem < 0).any():
        return None
    for ops, pcs in ((w, wpc), (s, spc)):   # one consumer unit and one producer unit per semaphore
        pairs = np.unique(ops.sem * 256 + cols.key[pcs])   # (a unit key is one byte)
        if pairs.size != np.unique(pairs // 256).size:
            return None
    # each semaphore's count after each operation, in program order (an instruction's waits before its signals)
    sem = np.concatenate((w.sem, s.sem))
    order = np.lexsort((np.concatenate((2 * wpc, 2 * spc + 1)), sem))
    sem, delta = sem[order], np.concatenate((-w.count, s.count))[order]
    init = np.array([d.init for d in program.sems], np.int64)
    after = np.cumsum(delta)
    first = np.flatnonzero(np.diff(sem, prepend=-1))   # where each semaphore's operations begin
    bounds = np.append(first, sem.size)
    last = bounds[1:] - 1
    after += init[sem] - np.repeat(after[first] - delta[first], np.diff(bounds))
    if (after[delta > 0] > SEM_MAX).any() or (after[last] != init[sem[last]]).any():
        return None
    report = VerifyReport()
    for ops, pcs, table in ((w, wpc, report.consumer), (s, spc, report.producer)):
        used, at = np.unique(ops.sem, return_index=True)
        for k in np.argsort(at).tolist():
            table[program.sems[int(used[k])].name] = int(cols.key[pcs[at[k]]])
    neg = order[(after < 0) & (delta < 0)]   # waits that may find too few: the first in program order warns
    if neg.size:
        j = int(neg.min())
        pc, name, n = int(wpc[j]), program.sems[int(w.sem[j])].name, int(w.count[j])
        c = int(after[np.flatnonzero(order == j)[0]]) + n
        report.warnings.append(f"{where(pc, instrs[pc])} waits for {name}*{n} but only {c} can have been "
                               f"signalled before it in program order: the program may deadlock")
    return report


def _scan(program: Program) -> VerifyReport:
    """:func:`verify` instruction by instruction, in program order."""
    report = VerifyReport()
    sem_index = program.sem_index
    count = [s.init for s in program.sems]
    first_neg: list[str] = []
    instrs, cfg = program.instrs, program.config
    last = len(instrs) - 1
    consumer, producer = report.consumer, report.producer
    bad = _operands_fit(program)
    for pc, instr in enumerate(instrs):
        t = type(instr)
        if t is Halt and pc != last:
            raise VerifyError(f"{where(pc, instr)}: halt must be the last instruction")
        if t is MatMul and (instr.k > cfg.rows or instr.n > cfg.cols):
            raise VerifyError(f"{where(pc, instr)}: a {instr.k}x{instr.n} weight tile does not fit the "
                              f"{cfg.rows}x{cfg.cols} array of .config")
        if pc == bad:
            _check_bounds(program, pc, instr)  # raises with the message (the fast path only finds the pc)
            bad = _operands_fit(program, pc + 1)
        waits, signals = instr.waits, instr.signals
        if not (waits or signals):
            continue
        q = instr.unit_key
        for ops, role, table in ((waits, "waited on", consumer), (signals, "signalled", producer)):
            for op in ops:
                name = op.name
                if name not in sem_index:
                    raise VerifyError(f"{where(pc, instr)}: semaphore {name!r} is not declared (.sem NAME INIT)")
                other = table.setdefault(name, q)
                if other is not q:
                    raise VerifyError(f"{where(pc, instr)}: semaphore {name} is {role} by {key_text(other)} and by "
                                      f"{key_text(q)}; each semaphore has one producer queue and one consumer queue")
        for op in waits:
            i, n = sem_index[op.name], op.count
            c = count[i]
            if c < n and not first_neg:
                first_neg.append(f"{where(pc, instr)} waits for {op.name}*{n} but only {c} can have "
                                 f"been signalled before it in program order: the program may deadlock")
            count[i] = c - n
        for op in signals:
            i = sem_index[op.name]
            c = count[i] = count[i] + op.count
            if c > SEM_MAX:
                raise VerifyError(f"{where(pc, instr)}: semaphore {op.name} can reach {c} > {SEM_MAX}; pair "
                                  f"every 'full' semaphore with an 'empty' one to bound it")
    for decl, c in zip(program.sems, count):
        if c != decl.init:
            raise VerifyError(f"semaphore {decl.name} is unbalanced: it starts at {decl.init} and the program's "
                              f"waits and signals leave it at {c}")
    report.warnings += first_neg
    return report
