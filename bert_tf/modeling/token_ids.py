"""What every bert_tf Keras model says when given text: it takes token ids, and what to load.

The models take the encoder's int32 inputs; raw strings reach Keras' data adapters, which fail
with "Unrecognized data type". `TakesTokenIds`, first among a model's bases, refuses text in
`predict`, `fit`, `evaluate` and `__call__` in one line naming what answers text: a fine-tuned
run loaded with bert_tf.load_task (its tokenizer and labels come with it), or a task of
bert_tf.tasks built around the model. It also keeps Keras' live progress bar to terminals and
notebooks, and has Keras' `export` trace the graph a server runs.
"""

import itertools

import keras
import numpy as np

from bert_tf import progress
from bert_tf.config import ENCODER_INPUTS
from bert_tf.modeling import kernels

ENCODER_INPUT_NAMES = ", ".join(ENCODER_INPUTS)


def is_text(x):
    """True for a str or bytes, or a list, tuple or array whose first item is one."""
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "USO" and x.size > 0 and isinstance(x.flat[0], (str, bytes))
    if isinstance(x, (list, tuple)) and x:
        return isinstance(x[0], (str, bytes))
    return False


def text_refusal(model, method):
    """The one-line TypeError for text given to `model.method`."""
    name = type(model).__name__
    source = getattr(model, "_bert_tf_source", None)
    task = model.text_task
    if source is not None:
        hint = (f"bert_tf.load_task({source!r}) loads it with its tokenizer, or "
                f"bert_tf.tasks.{task}.from_pretrained({source!r}, ...) builds a task on it")
    else:
        hint = (f"bert_tf.load_task(RUN_DIR) loads a fine-tuned run with its tokenizer, or "
                f"bert_tf.tasks.{task}(model, tokenizer, ...) wraps this model")
    return TypeError(f"{name}.{method} takes token ids (a dict of {ENCODER_INPUT_NAMES}), "
                     f"not text; {hint}")


def _plain_unless_interactive(args, kwargs, position):
    """Keras' default progress bar writes colour codes and backspaces into a log: without a
    terminal or a notebook, "auto" means one plain line per epoch (bert_tf.progress).
    `position`: where `verbose` stands among the arguments after x."""
    if len(args) <= position and kwargs.get("verbose", "auto") == "auto":
        kwargs["verbose"] = progress.keras_verbose()
    return kwargs


class TakesTokenIds:
    """Mixed into the bert_tf Keras models (first among the bases): text is refused (see the
    module docstring), fit / evaluate / predict print plain progress lines where the output
    is no terminal, and `export` traces for serving. Subclasses name their text task in
    `text_task`."""

    text_task = "TextEmbedder"

    def __call__(self, *args, **kwargs):
        if args and is_text(args[0]):
            raise text_refusal(self, "__call__")
        return super().__call__(*args, **kwargs)

    def predict(self, x, *args, **kwargs):
        if is_text(x):
            raise text_refusal(self, "predict")
        return super().predict(x, *args, **_plain_unless_interactive(args, kwargs, 1))

    def fit(self, x=None, *args, **kwargs):
        if is_text(x):
            raise text_refusal(self, "fit")
        return super().fit(x, *args, **_plain_unless_interactive(args, kwargs, 3))

    def evaluate(self, x=None, *args, **kwargs):
        if is_text(x):
            raise text_refusal(self, "evaluate")
        return super().evaluate(x, *args, **_plain_unless_interactive(args, kwargs, 2))

    def export(self, filepath, format="tf_saved_model", verbose=None, input_signature=None,
               **kwargs):
        """keras.Model.export, traced as bert_tf's exports trace (kernels.export_tracing): no
        training kernels' custom gradients (a SavedModel cannot store them and warns on load)
        and, for formats that leave TensorFlow, attention without data-dependent branches. The
        outputs are the same.

        On JAX (format "tf_saved_model" only) jax2tf traces every input as [batch, length]
        with one shared length of at most max_position_embeddings (any, with sinusoidal
        positions; Keras' default gives each input its own length, which the encoder cannot
        add up), without gradients, for CPU and CUDA; a `jax2tf_kwargs` entry the caller
        gives wins."""
        if kernels.BACKEND == "jax":
            if format != "tf_saved_model":
                raise ValueError(
                    f"{type(self).__name__}.export(format={format!r}) needs "
                    "KERAS_BACKEND=tensorflow (on JAX, bert_tf exports format="
                    "'tf_saved_model'); load the .keras file under TensorFlow and export there")
            if input_signature is None:
                try:
                    input_signature = [self.input]
                except (AttributeError, ValueError):  # a subclassed model's inputs
                    raise ValueError(
                        f"{type(self).__name__}.export on JAX needs input_signature=: its "
                        "inputs are known only from its calls") from None
            kwargs["jax2tf_kwargs"] = self._jax2tf_kwargs(input_signature,
                                                          kwargs.get("jax2tf_kwargs"))
        with kernels.export_tracing(leaves_tensorflow=format != "tf_saved_model"):
            return super().export(filepath, format, verbose=verbose,
                                  input_signature=input_signature, **kwargs)

    def _jax2tf_kwargs(self, signature, given):
        """jax2tf.convert's arguments for `signature` (a structure of input specs)."""
        options = dict(given or {})
        if "polymorphic_shapes" not in options:
            shapes = _polymorphic_shapes(signature, itertools.count())
            options["polymorphic_shapes"] = shapes
            config = encoder_config(self)
            if (config.position_embedding_type != "sinusoidal"
                    and any("length" in shape for shape in keras.tree.flatten(shapes))):
                # The longest input the encoder takes; without the bound, slicing the position
                # table to `length` rows gives min(length, rows) rows, which do not add to
                # [batch, length, H]. Sinusoidal positions have no table and no bound.
                options.setdefault("polymorphic_constraints",
                                   (f"length <= {config.max_position_embeddings}",))
        # A server asks for no gradients, and the dropout seeds' uint32 state has none to save.
        options.setdefault("with_gradient", False)
        options.setdefault("native_serialization_platforms", ("cpu", "cuda"))
        return options


def _polymorphic_shapes(structure, fresh, key=None):
    """jax2tf's polymorphic shapes of a structure of input specs: each unknown size "batch"
    first, "length" second in the encoder's [B, S] inputs (named by their spec or dict key),
    a name of its own (from the counter `fresh`) elsewhere."""
    if isinstance(structure, dict):
        return {k: _polymorphic_shapes(v, fresh, k) for k, v in structure.items()}
    if isinstance(structure, (list, tuple)):
        return type(structure)(_polymorphic_shapes(v, fresh) for v in structure)
    name = getattr(structure, "name", None) or key
    dims = []
    for i, size in enumerate(structure.shape):
        if size is not None:
            dims.append(str(size))
        elif i == 0:
            dims.append("batch")
        elif i == 1 and name in ENCODER_INPUTS:
            dims.append("length")
        else:
            dims.append(f"size{next(fresh)}")
    return f"({', '.join(dims)})"


def encoder_config(model):
    """The config (BertConfig or ModernBertConfig) of a bert_tf model's encoder: the model's
    own for an encoder, its `encoder`'s for the models built on one."""
    return getattr(model, "encoder", model).config
