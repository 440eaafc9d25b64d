"""Running code around the process's first import of a package (TensorFlow, Keras).

`around_first_import("keras", around)` leaves a finder on `sys.meta_path` that answers for the
one top-level name only: when the process first imports it, `around(load)` runs in place of
the package's own module code, `load()` running that code. The finder takes itself off the
path once the import has succeeded, so later imports (and every other name) go the usual
way. Used by bert_tf.quiet_logs (TensorFlow's start-up lines) and bert_tf.keras_setup (the
classes .keras files name). Standard library only.
"""

import importlib.abc
import importlib.util
import sys


class _FirstImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs the first `import <name>` inside `around`."""

    def __init__(self, name, around):
        self.name = name
        self.around = around
        self._searching = False
        self._loader = None

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self._searching:
            return None
        self._searching = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        module.__spec__.loader = module.__loader__ = self._loader
        try:
            self.around(lambda: self._loader.exec_module(module))
        except BaseException:
            # A failed import leaves no module: the next attempt runs inside `around` again
            # (TensorFlow imports Keras inside a try, then the caller's own import follows).
            sys.meta_path.insert(0, self)
            raise


def around_first_import(name, around):
    """Runs `around(load)` in place of the first `import name` of the process.

    Nothing happens when `name` is imported already, or when the same `around` already waits
    for it (calling this twice leaves one finder).

    Args:
      name: a top-level package name ("tensorflow", "keras").
      around: function(load) that calls load() (the package's own import) exactly once.
    """
    if name in sys.modules:
        return
    for finder in sys.meta_path:
        if isinstance(finder, _FirstImport) and finder.name == name and finder.around is around:
            return
    sys.meta_path.insert(0, _FirstImport(name, around))
