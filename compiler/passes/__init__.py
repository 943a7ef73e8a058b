"""Graph-to-graph passes over :class:`compiler.ir.Graph`; each returns a new graph."""

from compiler.passes.fold_constants import fold_constants, fold_node, remove_dead

__all__ = ["fold_constants", "fold_node", "remove_dead"]
