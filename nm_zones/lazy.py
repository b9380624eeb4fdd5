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


def import_deferring(name: str, deferred: tuple[str, ...]):
    """Import module `name` while the `deferred` modules it imports but does not need to
    run are stand-ins (those not imported already)."""
    stand_ins = {d: LazyModule(d) for d in deferred if d not in sys.modules}
    sys.modules.update(stand_ins)
    try:
        import importlib

        return importlib.import_module(name)
    finally:
        for deferred_name, stand_in in stand_ins.items():
            if sys.modules.get(deferred_name) is stand_in:
                del sys.modules[deferred_name]
