"""The original TF1 name of every bert_tf weight, and copying checkpoint weights into a model.

Every checkpoint format (original TF1, Hugging Face, keras-hub, bert_tf's own) is read into a
`WeightSource`: its tensors keyed by the original google-research/bert variable name, in the
original layout (kernels [in, out], `cls/seq_relationship/output_weights` [2, H]). A model's
variables are keyed the same way by `model_variables`, so `transfer` copies any source into any
bert_tf model and reports what was loaded, what was left newly initialised and what went unused.

Original names of the task heads (the original run_classifier.py and run_squad.py):
  BertClassifier        output_weights [C, H], output_bias [C]
  BertTokenClassifier   output_weights [C, H], output_bias [C] (the run_classifier head applied
                        per token, as TF1 tagging code built on it names it)
  BertSpanLabeler       cls/squad/output_weights [2, H], cls/squad/output_bias [2]
  ElectraPretrainer     the discriminator under bert/ (it is the encoder), its head under
                        ELECTRA's discriminator_predictions/{dense,dense_1}; the generator under
                        generator/ (BERT's names; its embeddings are the discriminator's) and
                        generator_predictions/{dense,LayerNorm,output_bias}
"""

import dataclasses
import re
from typing import Callable

import keras
import numpy as np
from absl import logging

from bert_tf.modeling import (BertClassifier, BertPretrainer, BertSentenceEmbedder,
                              BertSpanLabeler, BertTokenClassifier, ElectraPretrainer, Encoder)
from bert_tf.training.step_runner import CheckpointError

ENCODER_SCOPE = "bert/"
POOLER_SCOPE = "bert/pooler/"
# ALBERT's TF1 names (google-research/albert modeling.py): the projection of factorized
# embeddings, and the one shared block (one group of one inner layer, applied L times).
EMBEDDING_PROJECTION = "bert/encoder/embedding_hidden_mapping_in"
ALBERT_BLOCK_SCOPE = "bert/encoder/transformer/group_0/inner_group_0/"
# Name under ALBERT_BLOCK_SCOPE -> (TransformerBlock sub-layer, variable).
_ALBERT_BLOCK_NAMES = {
    "attention_1/self/query/kernel": ("query", "kernel"),
    "attention_1/self/query/bias": ("query", "bias"),
    "attention_1/self/key/kernel": ("key", "kernel"),
    "attention_1/self/key/bias": ("key", "bias"),
    "attention_1/self/value/kernel": ("value", "kernel"),
    "attention_1/self/value/bias": ("value", "bias"),
    "attention_1/output/dense/kernel": ("attention_output", "kernel"),
    "attention_1/output/dense/bias": ("attention_output", "bias"),
    "LayerNorm/gamma": ("attention_layer_norm", "gamma"),
    "LayerNorm/beta": ("attention_layer_norm", "beta"),
    "ffn_1/intermediate/dense/kernel": ("intermediate", "kernel"),
    "ffn_1/intermediate/dense/bias": ("intermediate", "bias"),
    "ffn_1/intermediate/output/dense/kernel": ("output_dense", "kernel"),
    "ffn_1/intermediate/output/dense/bias": ("output_dense", "bias"),
    "LayerNorm_1/gamma": ("output_layer_norm", "gamma"),
    "LayerNorm_1/beta": ("output_layer_norm", "beta"),
}
_LAYER_RE = re.compile(r"^bert/encoder/layer_(\d+)/")

# What a model's head computes; a head is only loaded from a source whose head (where the source
# says what it is) computes the same thing.
PRETRAINING = "pretraining"
CLASSIFICATION = "classification"
TOKEN_CLASSIFICATION = "token_classification"
SPAN = "span"
REPLACED_TOKEN_DETECTION = "replaced_token_detection"
# ELECTRA's generator and its head (ElectraPretrainer); the discriminator head's scope.
GENERATOR_SCOPES = ("generator/", "generator_predictions/")
DISCRIMINATOR_HEAD_SCOPE = "discriminator_predictions/"

# Variables of the original optimizers and training loop: expected in a training checkpoint,
# never model weights.
_OPTIMIZER_SLOT_SUFFIXES = ("/adam_m", "/adam_v", "/lamb_m", "/lamb_v", "/Adam", "/Adam_1",
                            "/Momentum", "/LAMB", "/LAMB_1")
_OPTIMIZER_NAMES = ("global_step", "beta1_power", "beta2_power")


class InteropError(CheckpointError):
    """A checkpoint that cannot be converted or loaded, naming the file and variable at fault."""


def is_optimizer_variable(name):
    """True for optimizer slots and step counters (TF1 names, or bert_tf's `optimizer/...`)."""
    return (name in _OPTIMIZER_NAMES or name.endswith(_OPTIMIZER_SLOT_SUFFIXES)
            or name.startswith("optimizer/"))


@dataclasses.dataclass
class SourceTensor:
    """One tensor of a checkpoint.

    Attributes:
      name: its name in the checkpoint's own format (shown in messages).
      shape: its shape in that format.
      transpose: True when the format stores the transpose of the original layout (Hugging Face
        and PyTorch Linear weights are [out, in]).
      read: () -> np.ndarray in the checkpoint's own layout; called only for weights that load.
    """
    name: str
    shape: tuple
    transpose: bool
    read: Callable[[], np.ndarray]

    def read_original_layout(self):
        value = np.asarray(self.read())
        return value.T if self.transpose else value


@dataclasses.dataclass
class WeightSource:
    """The weights of one checkpoint, keyed by original TF1 name.

    Attributes:
      description: the path, as messages name it.
      format: "tf1", "huggingface", "keras_hub", "bert_tf_checkpoint", "keras" or "weights_h5".
      tensors: original name -> SourceTensor.
      unused: names (in the checkpoint's format) with no model meaning, such as optimizer slots.
      config: the BertConfig the checkpoint was written with, where it says (else None).
      head_kind: what the checkpoint's task head computes, where the format says (else None).
      native_name: original name -> (name in the checkpoint's format, transposed?), for
        messages about a weight the checkpoint lacks (default: the original name).
    """
    description: str
    format: str
    tensors: dict
    unused: list
    config: object = None
    head_kind: str = None
    native_name: Callable = None

    def describe_missing(self, name, shape):
        """`name` and `shape` (original layout) as this checkpoint's format would show them."""
        if self.native_name is None:
            return name, shape
        native, transposed = self.native_name(name)
        return native, (shape[::-1] if transposed else shape)


@dataclasses.dataclass
class WarmStartReport:
    """What a warm start did.

    Attributes:
      source: the checkpoint path.
      source_format: see WeightSource.format.
      loaded: paths of the model's variables that were loaded.
      newly_initialized: paths of the model's variables that kept their fresh initial values
        (task heads the checkpoint lacks).
      unused: names of checkpoint tensors that were not used (other heads, optimizer slots).
    """
    source: str
    source_format: str
    loaded: list
    newly_initialized: list
    unused: list

    def summary(self):
        """A few lines for the log: counts, every newly initialised variable, unused tensors."""
        slots = [name for name in self.unused if is_optimizer_variable(name)]
        others = [name for name in self.unused if not is_optimizer_variable(name)]
        lines = [f"Warm start from {self.source} ({self.source_format}): "
                 f"{len(self.loaded)} variables loaded, {len(self.newly_initialized)} newly "
                 f"initialized, {len(self.unused)} checkpoint tensors unused"]
        if self.newly_initialized:
            lines.append("  newly initialized: " + ", ".join(self.newly_initialized))
        if others:
            lines.append("  unused: " + ", ".join(others))
        if slots:
            lines.append(f"  unused optimizer state: {len(slots)} tensors (e.g. "
                         f"{', '.join(slots[:3])})")
        return "\n".join(lines)


# BERT-family options of BertConfig and the value that means plain BERT. Hugging Face BertModel
# and keras-hub BertBackbone hold plain BERT only; TF1 checkpoints also hold ALBERT's layout
# (bert_tf.interop.albert).
_PLAIN_BERT = {"embedding_size": None, "share_parameters": "none",
               "position_embedding_type": "learned"}


def require_plain_bert(model, format_name, factorized_embeddings=False):
    """Raises InteropError unless `model` is plain BERT (no BERT-family option set; with
    factorized_embeddings, embedding_size may be set: ELECTRA's layout has it)."""
    config = encoder_of(model).config
    if config.architecture == "modernbert":
        raise InteropError(f"the model's config has modern encoder options (norm_placement="
                           f"{config.norm_placement!r}, position_embedding_type="
                           f"{config.position_embedding_type!r}, ...); {format_name} checkpoints "
                           "hold plain BERT only (write it with --to=huggingface as ModernBERT)")
    for field, plain in _PLAIN_BERT.items():
        value = getattr(config, field)
        if value != plain and not (field == "embedding_size" and (
                factorized_embeddings or value == config.hidden_size)):
            raise InteropError(f"the model's config has {field}={value!r}; {format_name} "
                               f"checkpoints hold plain BERT only ({field}={plain!r})")


def encoder_of(model):
    """The encoder of any bert_tf model (itself for an encoder)."""
    if isinstance(model, Encoder):
        return model
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, Encoder):
        raise InteropError(f"{type(model).__name__} is not a bert_tf model: expected a "
                           "BertEncoder, BertPretrainer or a bert_tf task model")
    return encoder


def head_kind(model):
    """PRETRAINING, CLASSIFICATION, TOKEN_CLASSIFICATION, SPAN, REPLACED_TOKEN_DETECTION, or None
    for an encoder."""
    for cls, kind in ((BertPretrainer, PRETRAINING), (BertClassifier, CLASSIFICATION),
                      (BertTokenClassifier, TOKEN_CLASSIFICATION), (BertSpanLabeler, SPAN),
                      (ElectraPretrainer, REPLACED_TOKEN_DETECTION)):
        if isinstance(model, cls):
            return kind
    encoder_of(model)
    return None


def same_kind(model, encoder):
    """A new model of the same class and head shape as `model`, on `encoder`."""
    if isinstance(model, Encoder):
        return encoder
    if isinstance(model, BertPretrainer):
        return BertPretrainer(encoder, use_next_sentence_label=model.next_sentence is not None)
    if isinstance(model, BertClassifier):
        return BertClassifier(encoder, model.num_classes, multi_label=model.multi_label)
    if isinstance(model, BertTokenClassifier):
        return BertTokenClassifier(encoder, model.num_classes)
    if isinstance(model, BertSpanLabeler):
        return BertSpanLabeler(encoder)
    if isinstance(model, ElectraPretrainer):
        return ElectraPretrainer(encoder, model.generator.config.hidden_size,
                                 model.discriminator_weight)
    if isinstance(model, BertSentenceEmbedder):
        # No head: its pooling and normalisation have no weights.
        return BertSentenceEmbedder(encoder, pooling=model.pooling, normalize=model.normalize)
    raise InteropError(f"{type(model).__name__} is not a bert_tf model")


def model_variables(model):
    """Original TF1 name -> (variable, transpose) for every weight of a bert_tf model.

    `transpose` is True where the bert_tf variable is the transpose of the original tensor
    (the NSP and task-head kernels [H, C] against the original output_weights [C, H]).

    BERT-family models are named too: ALBERT's layout (factorized embeddings, one shared block)
    by ALBERT's names (EMBEDDING_PROJECTION, ALBERT_BLOCK_SCOPE); with "attention" or "ffn"
    sharing, the shared sub-layers appear once, under layer_0; sinusoidal position embeddings
    have no variable. The span-boundary head has no original name.

    Args:
      model: a BertEncoder, BertPretrainer, BertClassifier, BertSpanLabeler,
        BertTokenClassifier or ElectraPretrainer.

    Returns:
      dict, encoder weights first, in the original checkpoint's order.
    """
    encoder = encoder_of(model)
    config = encoder.config
    names = {}
    dense, layer_norm = _namers(names)
    if config.architecture == "modernbert":
        _modern_encoder_variables(encoder, dense, layer_norm, names)
    else:
        _bert_encoder_variables(encoder, dense, layer_norm, names)

    if isinstance(model, BertPretrainer):
        dense("cls/predictions/transform/dense", model.masked_lm.transform)
        layer_norm("cls/predictions/transform/LayerNorm", model.masked_lm.transform_layer_norm)
        names["cls/predictions/output_bias"] = (model.masked_lm.output_bias, False)
        if model.next_sentence is not None:
            names["cls/seq_relationship/output_weights"] = (model.next_sentence.kernel, True)
            names["cls/seq_relationship/output_bias"] = (model.next_sentence.bias, False)
    elif isinstance(model, (BertClassifier, BertTokenClassifier)):
        head = model.get_layer("classifier")
        names["output_weights"] = (head.kernel, True)
        names["output_bias"] = (head.bias, False)
    elif isinstance(model, BertSpanLabeler):
        head = model.get_layer("span_logits")
        names["cls/squad/output_weights"] = (head.kernel, True)
        names["cls/squad/output_bias"] = (head.bias, False)
    elif isinstance(model, ElectraPretrainer):
        _electra_head_variables(model, dense, layer_norm, names)
    return names


def _namers(names):
    """(dense, layer_norm): each adds a layer's variables to `names` under a name prefix."""
    def dense(prefix, layer, transpose=False):
        names[prefix + "/kernel"] = (layer.kernel, transpose)
        if layer.bias is not None:
            names[prefix + "/bias"] = (layer.bias, False)

    def layer_norm(prefix, layer):
        names[prefix + "/gamma"] = (layer.gamma, False)
        if layer.beta is not None:
            names[prefix + "/beta"] = (layer.beta, False)

    return dense, layer_norm


def _electra_head_variables(model, dense, layer_norm, names):
    """Names of an ElectraPretrainer's weights besides the discriminator (its encoder)."""
    generator = {}
    _bert_encoder_variables(model.generator, *_namers(generator), generator)
    shared = {id(variable) for variable, _ in names.values()}
    for name, entry in generator.items():
        if id(entry[0]) not in shared:  # the embeddings are the discriminator's
            names[GENERATOR_SCOPES[0] + name[len(ENCODER_SCOPE):]] = entry
    head = model.generator_head
    dense(GENERATOR_SCOPES[1] + "dense", head.transform)
    layer_norm(GENERATOR_SCOPES[1] + "LayerNorm", head.transform_layer_norm)
    names[GENERATOR_SCOPES[1] + "output_bias"] = (head.output_bias, False)
    dense(DISCRIMINATOR_HEAD_SCOPE + "dense", model.discriminator_head.dense)
    dense(DISCRIMINATOR_HEAD_SCOPE + "dense_1", model.discriminator_head.dense_prediction)


def _bert_encoder_variables(encoder, dense, layer_norm, names):
    """Names of a BERT-family encoder's weights (the original TF1 ones, or ALBERT's)."""
    config = encoder.config
    embeddings = encoder.embedding_layer
    names["bert/embeddings/word_embeddings"] = (embeddings.word_embeddings.embeddings, False)
    names["bert/embeddings/token_type_embeddings"] = (
        embeddings.token_type_embeddings.embeddings, False)
    if config.position_embedding_type == "learned":
        names["bert/embeddings/position_embeddings"] = (
            embeddings.position_embeddings.embeddings, False)
    layer_norm("bert/embeddings/LayerNorm", embeddings.layer_norm)
    if config.embedding_width != config.hidden_size:
        dense(EMBEDDING_PROJECTION, encoder.get_layer("embedding_projection"))
    if config.share_parameters == "all":
        block = encoder.get_layer("transformer_layer_0")
        for name, (layer, attribute) in _ALBERT_BLOCK_NAMES.items():
            names[ALBERT_BLOCK_SCOPE + name] = (getattr(getattr(block, layer), attribute), False)
    for i in range(config.num_hidden_layers if config.share_parameters != "all" else 0):
        block = encoder.get_layer(f"transformer_layer_{i}")
        prefix = f"bert/encoder/layer_{i}/"
        # With partial sharing, layers after the first skip the sub-layers of layer_0 they use.
        if i == 0 or config.share_parameters != "attention":
            dense(prefix + "attention/self/query", block.query)
            dense(prefix + "attention/self/key", block.key)
            dense(prefix + "attention/self/value", block.value)
            dense(prefix + "attention/output/dense", block.attention_output)
            layer_norm(prefix + "attention/output/LayerNorm", block.attention_layer_norm)
        if i == 0 or config.share_parameters != "ffn":
            dense(prefix + "intermediate/dense", block.intermediate)
            dense(prefix + "output/dense", block.output_dense)
            layer_norm(prefix + "output/LayerNorm", block.output_layer_norm)
    dense("bert/pooler/dense", encoder.get_layer("pooler"))


def _modern_encoder_variables(encoder, dense, layer_norm, names):
    """Names of the modern encoder's weights, in the scheme of BERT's (ModernBERT has no TF1
    original; bert_tf.interop.modernbert maps these to Hugging Face names)."""
    config = encoder.config
    embeddings = encoder.embedding_layer
    names["bert/embeddings/word_embeddings"] = (embeddings.word_embeddings.embeddings, False)
    if embeddings.token_type_embeddings is not None:
        names["bert/embeddings/token_type_embeddings"] = (
            embeddings.token_type_embeddings.embeddings, False)
    if config.position_embedding_type == "learned":
        names["bert/embeddings/position_embeddings"] = (
            embeddings.position_embeddings.embeddings, False)
    layer_norm("bert/embeddings/LayerNorm", embeddings.layer_norm)
    for i in range(config.num_hidden_layers):
        block = encoder.get_layer(f"transformer_layer_{i}")
        prefix = f"bert/encoder/layer_{i}/"
        if block.attention_layer_norm is not None:
            layer_norm(prefix + "attention/LayerNorm", block.attention_layer_norm)
        dense(prefix + "attention/self/qkv", block.qkv)
        dense(prefix + "attention/output/dense", block.attention_output)
        layer_norm(prefix + "mlp/LayerNorm", block.output_layer_norm)
        dense(prefix + "mlp/wi", block.intermediate)
        dense(prefix + "mlp/wo", block.output_dense)
    if config.final_layer_norm:
        layer_norm("bert/encoder/final_layer_norm", encoder.get_layer("final_layer_norm"))
    pooler = encoder.get_layer("pooler")
    dense("bert/pooler/dense", pooler.dense)
    if pooler.layer_norm is not None:
        layer_norm("bert/pooler/LayerNorm", pooler.layer_norm)


def unmapped_variables(model):
    """The model's variables that have no original name (heads BERT does not have)."""
    mapped = {id(variable) for variable, _ in model_variables(model).values()}
    return [v for v in model.weights if id(v) not in mapped]


def model_arrays(model):
    """Original TF1 name -> float32 np.ndarray in the original layout, for every weight.

    Raises:
      InteropError: the model has weights with no original name (they would be lost).
    """
    unmapped = unmapped_variables(model)
    if unmapped:
        raise InteropError(f"{model.name}: {', '.join(v.path for v in unmapped)} have no "
                           "original BERT name; only BERT's own weights can be exported")
    arrays = {}
    for name, (variable, transpose) in model_variables(model).items():
        value = np.asarray(variable.numpy(), dtype=np.float32)
        arrays[name] = value.T if transpose else value
    return arrays


def source_from_model(model, description, format, unused=()):
    """A WeightSource over the weights of an in-memory bert_tf model."""
    tensors = {}
    for name, (variable, transpose) in model_variables(model).items():
        tensors[name] = SourceTensor(
            name=variable.path, shape=tuple(variable.shape), transpose=transpose,
            read=lambda v=variable: v.numpy())
    return WeightSource(description=description, format=format, tensors=tensors,
                        unused=list(unused), config=encoder_of(model).config,
                        head_kind=head_kind(model))


def _shape_str(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _num_layers(names):
    layers = {int(m.group(1)) for m in map(_LAYER_RE.match, names) if m}
    return max(layers) + 1 if layers else 0


def transfer(source, model, *, strict, optional_scopes=()):
    """Copies the weights of `source` into `model`; returns a WarmStartReport.

    Encoder weights must all be present with the model's shapes. Heads load where the source
    has them with matching shapes (and, where the source says what its head computes, the
    same kind of head); otherwise they keep their initial values and are reported.

    Args:
      source: a WeightSource.
      model: any bert_tf model.
      strict: every variable of the model must load (no newly initialised weights).
      optional_scopes: name prefixes that may be missing even when strict (e.g. the pooler,
        which Hugging Face's BertForMaskedLM does not have).

    Raises:
      InteropError: a missing encoder weight, a shape that differs from the model's (both
        shapes given), an encoder of another depth, or (strict) any missing weight.
    """
    targets = model_variables(model)
    config = encoder_of(model).config
    source_layers = _num_layers(source.tensors)
    if source_layers and source_layers != config.num_hidden_layers:
        raise InteropError(
            f"{source.description}: the checkpoint has {source_layers} encoder layers "
            f"(bert/encoder/layer_0..{source_layers - 1}) but the model's config has "
            f"num_hidden_layers={config.num_hidden_layers}")
    target_kind = head_kind(model)
    heads_compatible = source.head_kind is None or source.head_kind == target_kind
    loaded, newly_initialized, used = [], [], set()
    assignments = []
    for name, (variable, transpose) in targets.items():
        is_encoder = name.startswith(ENCODER_SCOPE)
        required = strict or (is_encoder and not name.startswith(POOLER_SCOPE))
        if name.startswith(tuple(optional_scopes)):
            required = False
        tensor = source.tensors.get(name)
        if tensor is not None and not is_encoder and not heads_compatible:
            tensor = None
        expected = tuple(variable.shape)[::-1] if transpose else tuple(variable.shape)
        if tensor is None:
            if required:
                native, native_shape = source.describe_missing(name, expected)
                raise InteropError(
                    f"{source.description}: variable {native} not found (the model needs it "
                    f"with shape {_shape_str(native_shape)})")
            newly_initialized.append(variable.path)
            continue
        native_expected = expected[::-1] if tensor.transpose else expected
        if tuple(tensor.shape) != native_expected:
            if required or is_encoder:
                raise InteropError(
                    f"{source.description}: variable {tensor.name} has shape "
                    f"{_shape_str(tensor.shape)} in the checkpoint but "
                    f"{_shape_str(native_expected)} in the model built from the config")
            logging.warning("%s: %s has shape %s, the model's %s has %s; it stays newly "
                            "initialized", source.description, tensor.name,
                            _shape_str(tensor.shape), variable.path,
                            _shape_str(native_expected))
            newly_initialized.append(variable.path)
            continue
        assignments.append((variable, transpose, tensor))
        used.add(name)
        loaded.append(variable.path)
    # Weights of heads BERT does not have keep their initial values.
    newly_initialized += [v.path for v in unmapped_variables(model)]
    for variable, transpose, tensor in assignments:
        value = tensor.read_original_layout()
        variable.assign(keras.ops.cast(value.T if transpose else value, variable.dtype))
    unused = list(source.unused)
    unused += [tensor.name for name, tensor in source.tensors.items() if name not in used]
    report = WarmStartReport(source=source.description, source_format=source.format,
                             loaded=loaded, newly_initialized=newly_initialized, unused=unused)
    logging.info("%s", report.summary())
    return report

