"""The activations a bert_config.json `hidden_act` names (GELU through kernels.gelu, which
fuses its gradient on TensorFlow)."""

import functools

from keras import ops

from bert_tf.modeling import kernels


def get_activation(name):
    """Returns the activation function for a bert_config.json `hidden_act` value.

    Args:
      name: "gelu" or "gelu_new" (tanh approximation, as the original), "gelu_exact" (erf),
        "relu", "tanh", "swish" or "silu" (both x * sigmoid(x)).
    """
    if name in ("gelu", "gelu_new"):
        return functools.partial(kernels.gelu, approximate=True)
    if name == "gelu_exact":
        return functools.partial(kernels.gelu, approximate=False)
    if name == "relu":
        return ops.relu
    if name == "tanh":
        return ops.tanh
    if name in ("swish", "silu"):
        return ops.silu
    raise ValueError(f"hidden_act={name!r} is not one of gelu, gelu_new, gelu_exact, relu, "
                     f"tanh, swish, silu")
