"""Stand-in modules that become the real module on first use.

Some imports pull in modules that are used only on paths nm-zones never takes, and every
command is a new process that pays for them. While such an import runs, the unused modules
are stand-ins; whoever kept a reference to one gets the real module on first attribute use.
Afterwards the stand-ins leave sys.modules, so later imports get real modules.

(importlib.util.LazyLoader cannot do this on Python 3.11: an `import` statement reads the
module's __spec__, which loads it. This module also must stay cheap to import: the event path
uses it through iptc_env.)
"""

from __future__ import annotations

import sys


class LazyModule(type(sys)):
    """Stands in for a module until one of its attributes is used, then is the real one."""

    def __getattr__(self, attribute: str):
        if attribute.startswith("__"):  # what the import system asks: not a use
            raise AttributeError(attribute)
        return getattr(self.real(), attribute)

    def real(self):
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        import importlib

        return importlib.import_module(self.__name__)


class StandIns:
    """`with StandIns({name: module, ...}):` while the block runs, each module not imported
    yet is its stand-in (None: the import fails); afterwards the stand-ins still in place
    leave sys.modules. Entered, it gives the stand-ins it put in place."""

    def __init__(self, modules: dict):
        self.modules = {name: m for name, m in modules.items() if name not in sys.modules}

    def __enter__(self) -> dict:
        sys.modules.update(self.modules)
        return self.modules

    def __exit__(self, *exc_info) -> None:
        for name, module in self.modules.items():
            if name in sys.modules and sys.modules[name] is module:
                del sys.modules[name]


def import_deferring(name: str, deferred: tuple[str, ...]):
    """Import module `name` while the `deferred` modules it imports but does not need to
    run are stand-ins (those not imported already)."""
    import importlib

    with StandIns({d: LazyModule(d) for d in deferred}):
        return importlib.import_module(name)
