"""Op options: choices one op's lowering offers a compile (how ConvTranspose is lowered, where a deformable
attention keeps its tables, ...).

An op declares its options in its registry entry (:attr:`compiler.ops.spec.OpSpec.options`, one :class:`OpOption`
each); a compile carries the chosen values as one :class:`OpOptions`, validated once against the registry
(:func:`compiler.ops.validated_options`), and a lowering reads its own: ``low.options[MODE]``. Adding an option is
a change to the op's own module only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compiler.errors import CompileError


@dataclass(frozen=True)
class OpOption:
    """One option of an op's lowering: its keyword ``name`` (unique over the registry), the ``values`` it takes, its
    ``default`` (one of them) and ``doc``, one line for ``docs/ops.md``."""

    name: str
    values: tuple[str, ...]
    default: str
    doc: str

    def __post_init__(self) -> None:
        if self.default not in self.values:
            raise ValueError(f"option {self.name}'s default {self.default!r} is not one of its values {self.values}")

    def check(self, value: object) -> str:
        """``value`` if it is one of :attr:`values`, else CompileError naming the option and the values it takes."""
        if value not in self.values:
            raise CompileError(f"{self.name} must be one of {', '.join(self.values)}, not {value!r}")
        return value


@dataclass(frozen=True)
class OpOptions:
    """The op options of one compile: ``(name, value)`` pairs, every declared option once when made by
    :func:`compiler.ops.validated_options` (which validates them); an option not in it reads as its default."""

    values: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, declared: Mapping[str, OpOption], chosen: Mapping[str, object]) -> OpOptions:
        """Every option of ``declared`` (by name), at its value in ``chosen`` or its default; refuses a name no op
        declares (TypeError, as for an unknown keyword) and a value the option does not take (CompileError)."""
        unknown = sorted(set(chosen) - set(declared))
        if unknown:
            raise TypeError(f"unknown op option(s) {', '.join(unknown)}; the registry's op options are "
                            f"{', '.join(sorted(declared)) or 'none'}")
        return cls(tuple((name, opt.check(chosen[name]) if name in chosen else opt.default)
                         for name, opt in sorted(declared.items())))

    def __getitem__(self, option: OpOption) -> str:
        """The value chosen for ``option``, or its default."""
        return dict(self.values).get(option.name, option.default)

    def as_dict(self) -> dict[str, str]:
        """The values by option name."""
        return dict(self.values)
