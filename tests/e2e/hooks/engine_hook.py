"""Runs a function on a vLLM module right after its first import, in an engine's process.

The ``sitecustomize.py`` of a hook directory (``tests/e2e/reads``, ``tests/two_nodes/fault``,
``bench/two_nodes_timing``) imports this before vLLM is imported; ``e2e_harness.pythonpath`` puts both
directories on the processes' ``PYTHONPATH``.
"""
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            self.patch(module)

        spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, patch: Callable[[ModuleType], None]) -> None:
    """Call ``patch(module)`` once the module ``name`` is first imported and has run."""
    sys.meta_path.insert(0, _AfterImport(name, patch))
