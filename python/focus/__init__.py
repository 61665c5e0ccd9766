"""``focus`` is an alias of ``focus_go``: ``import focus.X`` gives the module ``focus_go.X``.

Documented import paths use ``focus`` (``from focus import Agent``, Slime's
``--custom-advantage-function-path focus.integrations.slime.advantages``); they resolve to
the very same module objects as ``focus_go``, so classes and state are shared.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

import focus_go

_ALIAS = __name__
_TARGET = "focus_go"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec):
        return importlib.import_module(self._target)

    def exec_module(self, module) -> None:
        # The target module is already executed by import_module.
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_ALIAS + "."):
            return None
        real = _TARGET + fullname[len(_ALIAS):]
        if importlib.util.find_spec(real) is None:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real))


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())

sys.modules[_ALIAS] = focus_go
