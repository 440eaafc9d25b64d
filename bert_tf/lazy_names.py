"""Package attributes that import their module on first use (PEP 562).

bert_tf's packages export names whose modules pull in Keras, TensorFlow or JAX; resolving them
only when asked keeps `import bert_tf.text` (the pure-Python tokenizer) and the config cheap.
"""

import importlib


def module_getattr(package, names):
    """A module `__getattr__` for `package` (its __name__): names maps an exported name to the
    absolute name of the module that defines it."""

    def __getattr__(name):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        return getattr(importlib.import_module(module), name)

    return __getattr__
