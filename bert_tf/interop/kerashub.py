"""keras-hub BERT models (BertBackbone, BertMaskedLM) into bert_tf, with the same outputs.

keras-hub's BertBackbone is the original post-LN BERT: its feed-forward GELU is the tanh
approximation (`gelu_approximate`), as the original's and bert_tf's "gelu", and every LayerNorm
has epsilon 1e-12, so a converted encoder gives the same sequence and pooled outputs.
Attention kernels are stored per head ([H, A, d], output [A, d, H]) and are reshaped to the
original [H, H]. keras-hub has no NSP head.

keras-hub's BertMaskedLM head differs from the original BERT head in two details: its transform
uses the exact (erf) GELU and its LayerNorm epsilon is 1e-5. bert_tf's head follows the original
(the config's hidden_act and layer_norm_eps), so after conversion the MLM weights are the same
but MLM logits differ slightly from keras-hub's (about 1e-3 on a small random model); the
encoder outputs are unaffected.
"""

import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import optional
from bert_tf.config import BertConfig
from bert_tf.interop import weights
from bert_tf.interop.weights import InteropError
from bert_tf.modeling import BertEncoder, BertPretrainer

_VOCAB_ASSET = os.path.join("assets", "tokenizer", "vocabulary.txt")
# A preset's tokenizer as keras-hub serialises it (its config: lowercase, ...), not a Hugging
# Face tokenizer.json.
_TOKENIZER_CONFIG = "tokenizer.json"


def _keras_hub():
    return optional.require("keras_hub")


def _split(backbone, masked_lm):
    """(backbone, masked_lm) from either argument order; checks the classes."""
    keras_hub = _keras_hub()
    if masked_lm is None and isinstance(backbone, keras_hub.models.BertMaskedLM):
        backbone, masked_lm = backbone.backbone, backbone
    if not isinstance(backbone, keras_hub.models.BertBackbone):
        raise InteropError(f"from_keras_hub: expected a keras_hub.models.BertBackbone or "
                           f"BertMaskedLM, got {type(backbone).__name__}")
    if masked_lm is not None:
        if not isinstance(masked_lm, keras_hub.models.BertMaskedLM):
            raise InteropError(f"from_keras_hub: masked_lm must be a keras_hub.models."
                               f"BertMaskedLM, got {type(masked_lm).__name__}")
        if masked_lm.backbone is not backbone:
            raise InteropError("from_keras_hub: masked_lm.backbone is not the given backbone")
    return backbone, masked_lm


def config_from_backbone(backbone):
    """The BertConfig of a keras-hub BertBackbone (one dropout rate for both dropouts)."""
    return BertConfig(
        vocab_size=backbone.vocabulary_size, hidden_size=backbone.hidden_dim,
        num_hidden_layers=backbone.num_layers, num_attention_heads=backbone.num_heads,
        intermediate_size=backbone.intermediate_dim, hidden_act="gelu",
        hidden_dropout_prob=backbone.dropout, attention_probs_dropout_prob=backbone.dropout,
        max_position_embeddings=backbone.max_sequence_length,
        type_vocab_size=backbone.num_segments)


def keras_hub_source(backbone, masked_lm=None, description="keras-hub model"):
    """A WeightSource over a keras-hub BertBackbone (and BertMaskedLM head)."""
    backbone, masked_lm = _split(backbone, masked_lm)
    hidden = backbone.hidden_dim
    tensors = {}

    def add(name, variable, shape=None):
        shape = tuple(shape or variable.shape)
        tensors[name] = weights.SourceTensor(
            name=variable.path, shape=shape, transpose=False,
            read=lambda: np.reshape(variable.numpy(), shape))

    def dense(prefix, layer, kernel_shape=None, bias_shape=None):
        add(prefix + "/kernel", layer.kernel, kernel_shape)
        add(prefix + "/bias", layer.bias, bias_shape)

    def layer_norm(prefix, layer):
        add(prefix + "/gamma", layer.gamma)
        add(prefix + "/beta", layer.beta)

    add("bert/embeddings/word_embeddings", backbone.token_embedding.embeddings)
    add("bert/embeddings/token_type_embeddings", backbone.segment_embedding.embeddings)
    add("bert/embeddings/position_embeddings", backbone.position_embedding.position_embeddings)
    layer_norm("bert/embeddings/LayerNorm", backbone.embeddings_layer_norm)
    for i, block in enumerate(backbone.transformer_layers):
        prefix = f"bert/encoder/layer_{i}/"
        attention = block._self_attention_layer
        # Per-head einsum kernels [H, A, d] and [A, d, H] are the original [H, H] matrices.
        for name, layer in (("query", attention._query_dense), ("key", attention._key_dense),
                            ("value", attention._value_dense)):
            dense(prefix + "attention/self/" + name, layer, (hidden, hidden), (hidden,))
        dense(prefix + "attention/output/dense", attention._output_dense, (hidden, hidden))
        layer_norm(prefix + "attention/output/LayerNorm", block._self_attention_layer_norm)
        dense(prefix + "intermediate/dense", block._feedforward_intermediate_dense)
        dense(prefix + "output/dense", block._feedforward_output_dense)
        layer_norm(prefix + "output/LayerNorm", block._feedforward_layer_norm)
    dense("bert/pooler/dense", backbone.pooled_dense)
    if masked_lm is not None:
        head = masked_lm.masked_lm_head
        if head.token_embedding is not backbone.token_embedding:
            raise InteropError(f"{description}: the BertMaskedLM head is not tied to the token "
                               "embedding; bert_tf ties them, as BERT does")
        dense("cls/predictions/transform/dense", head._intermediate_dense)
        layer_norm("cls/predictions/transform/LayerNorm", head._intermediate_layer_norm)
        add("cls/predictions/output_bias", head._bias)
    return weights.WeightSource(
        description=description, format="keras_hub", tensors=tensors, unused=[],
        config=config_from_backbone(backbone),
        head_kind=weights.PRETRAINING if masked_lm is not None else None)


def from_keras_hub(backbone, masked_lm=None):
    """Converts a keras-hub BERT into bert_tf.

    Args:
      backbone: a keras_hub.models.BertBackbone (or a BertMaskedLM, whose backbone is used).
      masked_lm: optional keras_hub.models.BertMaskedLM over `backbone`; its MLM head is
        converted too.

    Returns:
      A BertEncoder, or with a masked-LM head a BertPretrainer without NSP (keras-hub has none).
      Encoder outputs equal keras-hub's (sequence_output, pooled_output); see the module
      docstring for the MLM head.

    Examples:

    >>> backbone = keras_hub.models.BertBackbone(vocabulary_size=100, num_layers=2,
    ...     num_heads=2, hidden_dim=32, intermediate_dim=64)  # doctest: +SKIP
    >>> encoder = from_keras_hub(backbone)  # doctest: +SKIP
    """
    backbone, masked_lm = _split(backbone, masked_lm)
    source = keras_hub_source(backbone, masked_lm)
    encoder = BertEncoder(source.config)
    if masked_lm is None:
        model = encoder
    else:
        logging.warning("keras-hub's BertMaskedLM head uses the exact GELU and LayerNorm "
                        "epsilon 1e-5; bert_tf's MLM head uses hidden_act=%r and epsilon %g as "
                        "the original BERT, so MLM logits differ slightly from keras-hub's",
                        source.config.hidden_act, source.config.layer_norm_eps)
        model = BertPretrainer(encoder, use_next_sentence_label=False)
    weights.transfer(source, model, strict=True)
    return model


def is_preset_dir(path):
    """True for a keras-hub preset directory (metadata.json and a keras_hub config.json)."""
    if not (tf.io.gfile.exists(os.path.join(path, "metadata.json"))
            and tf.io.gfile.exists(os.path.join(path, "config.json"))):
        return False
    with tf.io.gfile.GFile(os.path.join(path, "config.json")) as f:
        return str(json.load(f).get("module", "")).startswith("keras_hub")


def load_keras_hub(path):
    """Loads a keras-hub BERT from a local preset directory or a saved .keras file.

    Nothing is downloaded: `path` must be local.

    Args:
      path: a preset directory (save_to_preset: config.json, model.weights.h5, and for a
        BertMaskedLM task.json, task.weights.h5, tokenizer assets) or a `.keras` file of a
        BertBackbone or BertMaskedLM.

    Returns:
      (backbone, masked_lm or None, vocab_file or None, do_lower_case or None).
    """
    keras_hub = _keras_hub()
    if path.endswith(".keras"):
        import keras

        loaded = keras.saving.load_model(path, compile=False)
        backbone, masked_lm = _split(loaded, None)
        return backbone, masked_lm, None, None
    if not is_preset_dir(path):
        raise InteropError(f"{path}: not a keras-hub preset directory (no metadata.json and "
                           "keras_hub config.json) nor a .keras file")
    masked_lm = None
    task_file = os.path.join(path, "task.json")
    if tf.io.gfile.exists(task_file):
        with tf.io.gfile.GFile(task_file) as f:
            task_class = json.load(f).get("class_name")
        if task_class == "BertMaskedLM":
            # The tokenizer is not needed: its vocabulary file is read directly.
            masked_lm = keras_hub.models.BertMaskedLM.from_preset(path, preprocessor=None)
    backbone = (masked_lm.backbone if masked_lm is not None
                else keras_hub.models.BertBackbone.from_preset(path))
    vocab_file = os.path.join(path, _VOCAB_ASSET)
    return (backbone, masked_lm, vocab_file if tf.io.gfile.exists(vocab_file) else None,
            preset_lowercase(path))


def preset_lowercase(path):
    """The tokenizer's `lowercase` from a preset's tokenizer.json, or None."""
    tokenizer_file = os.path.join(path, _TOKENIZER_CONFIG)
    if not tf.io.gfile.exists(tokenizer_file):
        return None
    with tf.io.gfile.GFile(tokenizer_file) as f:
        value = json.load(f).get("config", {}).get("lowercase")
    return value if isinstance(value, bool) else None
