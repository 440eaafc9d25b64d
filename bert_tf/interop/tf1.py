"""Original google-research/bert (TF1) checkpoints: read them into bert_tf models, write them back.

An original checkpoint (`bert_model.ckpt.{index,data-*}` beside `bert_config.json` and
`vocab.txt`) is name-based: every tensor is stored under its TF1 variable name
(`bert/encoder/layer_0/attention/self/query/kernel`, ...; see bert_tf.interop.weights). It is
read with tf.train.load_checkpoint and written with the SaveV2 op, the op tf.compat.v1's Saver
uses, so tools built for Google's checkpoints read the files written here.
"""

import os

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import file_names, fileio
from bert_tf.config import EncoderConfig
from bert_tf.interop import weights
from bert_tf.interop.weights import InteropError
from bert_tf.modeling import BertEncoder, BertPretrainer
from bert_tf.text.tokenizer_files import write_tokenizer_file

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# The MLM head's scope: a checkpoint without it is an encoder's (or a task model's).
_MLM_SCOPE = "cls/predictions/"


def read_tf1_checkpoint(ckpt_prefix):
    """Opens an original-layout checkpoint as a WeightSource (tensors are read on demand).

    Args:
      ckpt_prefix: the checkpoint prefix, e.g. `uncased_L-12_H-768_A-12/bert_model.ckpt`.

    Returns:
      WeightSource; optimizer slots (`*/adam_m`, `*/adam_v`, `global_step`) are listed as unused.
      Its config is the bert_config.json beside the checkpoint, when there is one.

    Raises:
      InteropError: no checkpoint at the prefix, or it is a TF2 object-based checkpoint.
    """
    try:
        reader = fileio.checkpoint_reader(ckpt_prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise InteropError(f"{ckpt_prefix}: no readable TF1 checkpoint at this prefix (expected "
                           f"{ckpt_prefix}.index and .data-* files): "
                           f"{str(e).splitlines()[0][:300]}") from None
    shapes = reader.get_variable_to_shape_map()
    if _OBJECT_GRAPH_KEY in shapes:
        raise InteropError(f"{ckpt_prefix}: an object-based (TF2) checkpoint, not an original "
                           "TF1 BERT checkpoint; bert_tf.interop.warm_start loads both")
    tensors, unused = {}, []
    for name in sorted(shapes):
        if weights.is_optimizer_variable(name):
            unused.append(name)
            continue
        tensors[name] = weights.SourceTensor(
            name=name, shape=tuple(shapes[name]), transpose=False,
            read=lambda n=name: reader.get_tensor(n))
    config_file = file_names.path(os.path.dirname(ckpt_prefix), file_names.CONFIG_FILE)
    config = EncoderConfig.from_json_file(config_file) if tf.io.gfile.exists(config_file) else None
    return weights.WeightSource(description=ckpt_prefix, format="tf1", tensors=tensors,
                                unused=unused, config=config)


def _resolve_config(config, ckpt_prefix):
    if isinstance(config, EncoderConfig):
        return config
    if config is None:
        config = file_names.path(os.path.dirname(ckpt_prefix), file_names.CONFIG_FILE)
        if not tf.io.gfile.exists(config):
            raise InteropError(f"{ckpt_prefix}: no config given and no bert_config.json beside "
                               "the checkpoint")
    return EncoderConfig.from_json_file(config)


def load_tf1_checkpoint(ckpt_prefix, config=None):
    """Builds the BertPretrainer (or BertEncoder) of an original TF1 BERT checkpoint.

    Every original name maps, the MLM head (cls/predictions) and NSP head (cls/seq_relationship)
    included, so the pretrainer reproduces the original's MLM and NSP outputs. A checkpoint
    without cls/seq_relationship (written from an MLM-only model) gives a pretrainer without NSP;
    one without cls/predictions (written from an encoder or a task model) gives the encoder,
    and a task head it holds is left out with a warning (a classifier's and a tagger's have
    the same names: the checkpoint does not say which it is).

    Args:
      ckpt_prefix: the checkpoint prefix, e.g. `uncased_L-12_H-768_A-12/bert_model.ckpt`.
      config: a BertConfig or the path of a bert_config.json (default: the bert_config.json
        beside the checkpoint).

    Returns:
      BertPretrainer (its encoder is `.encoder`), or BertEncoder without the MLM head.

    Raises:
      InteropError: a missing variable, a shape that differs from the config's (naming the
        variable and both shapes) or an encoder of another depth.

    Examples:

    >>> model = load_tf1_checkpoint("uncased_L-12_H-768_A-12/bert_model.ckpt")  # doctest: +SKIP
    >>> model.encoder.config.hidden_size  # doctest: +SKIP
    768
    """
    config = _resolve_config(config, ckpt_prefix)
    source = read_tf1_checkpoint(ckpt_prefix)
    if not any(name.startswith(_MLM_SCOPE) for name in source.tensors):
        model = BertEncoder(config)
        report = weights.transfer(source, model, strict=True)
        head = [name for name in report.unused if name not in source.unused]
        if head:
            more = f", ... ({len(head)} in all)" if len(head) > 4 else ""
            logging.warning("%s holds no MLM head (%s*): read as an encoder, without %s%s",
                            ckpt_prefix, _MLM_SCOPE, ", ".join(head[:4]), more)
        return model
    has_nsp = any(name.startswith("cls/seq_relationship/") for name in source.tensors)
    model = BertPretrainer(BertEncoder(config), use_next_sentence_label=has_nsp)
    weights.transfer(source, model, strict=True)
    return model


def save_tf1_checkpoint(model, ckpt_prefix, vocab_file=None,
                        sentencepiece_name=file_names.SENTENCEPIECE_FILE):
    """Writes a bert_tf model as an original-layout TF1 checkpoint, with bert_config.json beside it.

    The checkpoint holds every weight under its original name (a task model's head under the
    original run_classifier / run_squad names) and nothing else; it loads with
    tf.compat.v1.train.Saver into variables of the original names, and with
    tf.train.load_checkpoint. Files are written under a temporary name and renamed into place.

    Args:
      model: a BertEncoder, BertPretrainer, BertClassifier, BertSpanLabeler or
        BertTokenClassifier.
      ckpt_prefix: e.g. `out/bert_model.ckpt`; writes `<prefix>.index` and
        `<prefix>.data-00000-of-00001`, plus `bert_config.json` in the same directory.
      vocab_file: copied to `vocab.txt` beside the checkpoint when given (a SentencePiece
        model to `sentencepiece_name`).
      sentencepiece_name: the name a SentencePiece vocabulary gets.

    Returns:
      ckpt_prefix.
    """
    arrays = weights.model_arrays(model)
    directory = os.path.dirname(ckpt_prefix) or "."
    tf.io.gfile.makedirs(directory)
    tmp_prefix = os.path.join(directory, f".tmp_{os.getpid()}_{os.path.basename(ckpt_prefix)}")
    names = list(arrays)
    tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(np.asarray(arrays[n], np.float32)) for n in names])
    # The index goes last: a reader that finds <prefix>.index finds its data too.
    data_suffix = ".data-00000-of-00001"
    tf.io.gfile.rename(tmp_prefix + data_suffix, ckpt_prefix + data_suffix, overwrite=True)
    tf.io.gfile.rename(tmp_prefix + ".index", ckpt_prefix + ".index", overwrite=True)
    weights.encoder_of(model).config.to_json_file(
        file_names.path(directory, file_names.CONFIG_FILE))
    if vocab_file:
        write_tokenizer_file(directory, None, vocab_file, sentencepiece_name=sentencepiece_name)
    return ckpt_prefix
