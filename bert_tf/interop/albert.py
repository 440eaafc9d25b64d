"""ALBERT's original TF1 checkpoints (google-research/albert) in and out of bert_tf models.

An ALBERT checkpoint (`model.ckpt-best.{index,data-*}` beside `albert_config.json`) keeps BERT's
embedding names and stores the rest as ALBERT's modeling.py names it:

  bert/embeddings/{word,token_type,position}_embeddings, LayerNorm    [V, E], [2, E], [512, E]
  bert/encoder/embedding_hidden_mapping_in/{kernel,bias}              [E, H] (only when E != H)
  bert/encoder/transformer/group_0/inner_group_0/
      attention_1/self/{query,key,value}, attention_1/output/dense, LayerNorm,
      ffn_1/intermediate/dense, ffn_1/intermediate/output/dense, LayerNorm_1
  bert/pooler/dense
  cls/predictions/transform/dense [H, E], transform/LayerNorm, output_bias [V]
  cls/seq_relationship/output_weights [2, H], output_bias              (sentence order)

A bert_tf model with `embedding_size` E and `share_parameters="all"` has exactly these weights
(bert_tf.interop.weights names them), so conversion is a copy in both directions and the
outputs are the original's. ALBERT's configuration options beyond that layout
(num_hidden_groups > 1, inner_group_num > 1, net_structure_type, down_scale_factor, ...) are
not supported and are reported as errors. ALBERT tokenizes with a SentencePiece model
(30k-clean.model), not WordPiece: the weights convert, bert_tf's WordPiece tokenizer does not
read that vocabulary.
"""

import json
import os

import tensorflow as tf

from bert_tf import file_names
from bert_tf.config import BertConfig, ConfigError, EncoderConfig
from bert_tf.fileio import write_text_atomic
from bert_tf.interop import tf1, weights
from bert_tf.interop.weights import InteropError
from bert_tf.modeling import BertEncoder, BertPretrainer

ALBERT_CONFIG_FILE = "albert_config.json"

# albert_config.json fields that map onto BertConfig fields of the same name.
_SHARED_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size", "hidden_act", "hidden_dropout_prob",
                  "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
                  "initializer_range", "embedding_size")
# ALBERT's options and the value of the layout bert_tf implements (one shared group).
_ALBERT_LAYOUT = {"num_hidden_groups": 1, "inner_group_num": 1, "net_structure_type": 0,
                  "gap_size": 0, "num_memory_blocks": 0, "down_scale_factor": 1}


def config_from_albert(values, source=ALBERT_CONFIG_FILE):
    """A BertConfig from the fields of an albert_config.json.

    Args:
      values: dict of albert_config.json fields.
      source: the file, as messages name it.

    Returns:
      BertConfig with share_parameters="all" and ALBERT's embedding_size.

    Raises:
      ConfigError: a required field is missing, or an ALBERT option bert_tf does not implement
        (naming it and the supported value).
    """
    missing = [name for name in _SHARED_FIELDS if name not in values]
    if missing:
        raise ConfigError(f"{source}: missing ALBERT field(s) {', '.join(missing)}")
    for name, supported in _ALBERT_LAYOUT.items():
        if values.get(name, supported) != supported:
            raise ConfigError(f"{source}: {name}={values[name]!r} is not supported (bert_tf "
                              f"implements ALBERT with {name}={supported})")
    known = set(_SHARED_FIELDS) | set(_ALBERT_LAYOUT) | {"layer_norm_eps"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown ALBERT field(s) {', '.join(unknown)}")
    fields = {name: values[name] for name in _SHARED_FIELDS}
    if "layer_norm_eps" in values:
        fields["layer_norm_eps"] = values["layer_norm_eps"]
    return BertConfig.from_dict(dict(fields, share_parameters="all"), source=source)


def albert_config_from_bert(config):
    """The albert_config.json fields of an ALBERT-layout BertConfig (see `check_albert_layout`)."""
    check_albert_layout(config)
    values = {name: getattr(config, name) for name in _SHARED_FIELDS}
    values["embedding_size"] = config.embedding_width
    values.update(_ALBERT_LAYOUT)
    if config.layer_norm_eps != BertConfig().layer_norm_eps:
        values["layer_norm_eps"] = config.layer_norm_eps
    return values


def check_albert_layout(config):
    """Raises InteropError unless the config is ALBERT's layout: one block shared by all layers
    and learned position embeddings (factorized embeddings optional, as in ALBERT)."""
    if config.share_parameters != "all":
        raise InteropError(f"ALBERT checkpoints share one block across all layers; the model's "
                           f"config has share_parameters={config.share_parameters!r}, expected "
                           "'all'")
    if config.position_embedding_type != "learned":
        raise InteropError(f"ALBERT checkpoints hold learned position embeddings; the model's "
                           f"config has position_embedding_type="
                           f"{config.position_embedding_type!r}")


def read_albert_config(path):
    """Reads an albert_config.json (or a bert_tf bert_config.json describing an ALBERT model)."""
    try:
        with tf.io.gfile.GFile(path) as f:
            values = json.load(f)
    except tf.errors.NotFoundError:
        raise ConfigError(f"{path}: no such ALBERT config file") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})") from None
    if values.get("share_parameters") == "all":
        return BertConfig.from_dict(values, source=str(path))
    return config_from_albert(values, source=str(path))


def _config_for(ckpt_prefix, config):
    if isinstance(config, EncoderConfig):
        return config
    if config is None:
        directory = os.path.dirname(ckpt_prefix)
        for name in (ALBERT_CONFIG_FILE, file_names.CONFIG_FILE):
            if tf.io.gfile.exists(os.path.join(directory, name)):
                config = os.path.join(directory, name)
                break
        else:
            raise InteropError(f"{ckpt_prefix}: no config given and no {ALBERT_CONFIG_FILE} "
                               "beside the checkpoint")
    return read_albert_config(config)


def load_albert_checkpoint(ckpt_prefix, config=None):
    """Builds a BertPretrainer holding the weights of an original ALBERT TF1 checkpoint.

    The pretrainer has the masked-LM head and, when the checkpoint has cls/seq_relationship, the
    sentence-order head (sentence_order_prediction=True), so it reproduces the original's
    pre-training outputs; its `.encoder` fine-tunes like any BertEncoder.

    Args:
      ckpt_prefix: e.g. `albert_base/model.ckpt-best`.
      config: a BertConfig, or the path of an albert_config.json (default: the
        albert_config.json, else a bert_config.json, beside the checkpoint).

    Returns:
      BertPretrainer.

    Raises:
      InteropError: no checkpoint, a missing variable or a shape that differs from the config's
        (naming the variable and both shapes). ConfigError: an ALBERT option bert_tf does not
        implement.

    Examples:

    >>> model = load_albert_checkpoint("albert_base/model.ckpt-best")  # doctest: +SKIP
    >>> model.encoder.config.embedding_size  # doctest: +SKIP
    128
    """
    config = _config_for(ckpt_prefix, config)
    check_albert_layout(config)
    source = tf1.read_tf1_checkpoint(ckpt_prefix)
    has_sop = any(name.startswith("cls/seq_relationship/") for name in source.tensors)
    model = BertPretrainer(BertEncoder(config), use_next_sentence_label=has_sop,
                           sentence_order_prediction=has_sop)
    weights.transfer(source, model, strict=True)
    return model


def save_albert_checkpoint(model, ckpt_prefix, vocab_file=None):
    """Writes an ALBERT-layout bert_tf model as an original ALBERT TF1 checkpoint.

    Writes `<prefix>.index`, `<prefix>.data-00000-of-00001` (every weight under its ALBERT
    name), albert_config.json and bert_config.json beside it (and the vocabulary when given:
    vocab.txt, or 30k-clean.model as the ALBERT release names its SentencePiece model). A
    span-boundary head has no ALBERT name and is refused.

    Args:
      model: a BertEncoder, BertPretrainer or task model whose config has
        share_parameters="all" and learned position embeddings.
      ckpt_prefix: e.g. `out/model.ckpt`.
      vocab_file: copied beside the checkpoint (vocab.txt or 30k-clean.model).

    Returns:
      ckpt_prefix.
    """
    config = weights.encoder_of(model).config
    values = albert_config_from_bert(config)
    tf1.save_tf1_checkpoint(model, ckpt_prefix, vocab_file=vocab_file,
                            sentencepiece_name=file_names.ALBERT_SENTENCEPIECE_FILE)
    write_text_atomic(os.path.join(os.path.dirname(ckpt_prefix) or ".", ALBERT_CONFIG_FILE),
                      json.dumps(values, indent=2, sort_keys=True) + "\n")
    return ckpt_prefix
