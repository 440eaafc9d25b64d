"""The feature-extraction job: per-token activations (and sentence embeddings) as JSON lines.

`extract_features(ExtractFeaturesConfig(...))` (bert_tf.jobs.extract_features_config) is what
`bert-tf-extract-features` (bert_tf.cli.extract_features) runs; that command's help describes
the output, the same as the original extract_features.py's.
"""

import dataclasses
import json
import os
import re
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio, interop
from bert_tf.config import ENCODER_INPUTS, EncoderConfig
from bert_tf.data.tasks import length_buckets
from bert_tf.data.tasks.task_errors import decoded_lines
from bert_tf.jobs import tokenizer_setup
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.modeling import build_encoder
from bert_tf.text import pack_inputs, tokenizer_files, truncated_lengths
from bert_tf.text.input_packing import length_sorted_batches

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


def parse_layers(text, num_layers):
    """[-1, -2, ...] from '-1,-2'; each index must name one of the config's layers."""
    try:
        layers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise FlagValueError(f"--layers={text}: expected comma-separated integers") from None
    if not layers:
        raise FlagValueError("--layers is empty")
    for index in layers:
        if not -num_layers <= index < num_layers:
            raise FlagValueError(f"--layers={text}: layer {index} does not exist; the model has "
                                 f"num_hidden_layers={num_layers} (indices {-num_layers}.."
                                 f"{num_layers - 1})")
    return layers


def split_pair(line):
    """(text_a, text_b or None) of an input line."""
    match = _PAIR.match(line)
    return (match.group(1), match.group(2)) if match else (line, None)


def packed_input(tokenizer, line, max_seq_length):
    """(tokens, features) of one input line: [CLS] A [SEP] (B [SEP]), truncated to fit.

    tokens are the vocabulary's strings of the packed ids (WordPiece "##ing", byte-level BPE
    "Ġworld"; the tokenizer's own [CLS]/[SEP] tokens, e.g. "<s>" for a RoBERTa-style file).
    """
    text_a, text_b = split_pair(line)
    ids_a = tokenizer.encode(text_a)
    ids_b = tokenizer.encode(text_b) if text_b is not None else []
    budget = max_seq_length - (3 if ids_b else 2)
    kept_a, kept_b = truncated_lengths(len(ids_a), len(ids_b), budget)
    ids = [tokenizer.cls_id, *ids_a[:kept_a], tokenizer.sep_id]
    if kept_b:
        ids += [*ids_b[:kept_b], tokenizer.sep_id]
    features = pack_inputs(ids_a, ids_b or None, max_seq_length=max_seq_length,
                           cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                           pad_id=tokenizer.pad_id)
    return tokenizer.convert_ids_to_tokens(ids), features


def _rounded(values):
    return [round(float(v), 6) for v in values]


def output_record(index, tokens, layer_values, layers, pooled=None, per_token=True):
    """The JSON object of one input.

    Args:
      index: the input's line index (linex_index).
      tokens: its packed tokens (T of them).
      layer_values: float array [len(layers), T, H].
      layers: the layer indices.
      pooled: float array [H], or None to leave sentence embeddings out.
      per_token: include the per-token "features".
    """
    record = {"linex_index": index}
    if per_token:
        record["features"] = [
            {"token": token,
             "layers": [{"index": layer, "values": _rounded(layer_values[j, t])}
                        for j, layer in enumerate(layers)]}
            for t, token in enumerate(tokens)]
    if pooled is not None:
        record["pooled"] = _rounded(pooled)
        record["mean_pooled"] = [{"index": layer, "values": _rounded(layer_values[j].mean(0))}
                                 for j, layer in enumerate(layers)]
    return record


def _tokenizer_file(flag_value, init_checkpoint):
    """--vocab_file, else the tokenizer file beside --init_checkpoint (vocab.txt, or a
    byte-level BPE tokenizer.json: tokenizer_files.model_tokenizer_file), else None."""
    if flag_value:
        return flag_value
    directory = (init_checkpoint if fileio.isdir(init_checkpoint)
                 else os.path.dirname(init_checkpoint))
    return tokenizer_files.model_tokenizer_file(directory)


def extract_features(options):
    """Reads options.input_file and writes options.output_file; returns the number of lines.

    Args:
      options: the ExtractFeaturesConfig.

    Raises:
      FlagValueError naming the flag; ConfigError, CheckpointError for an unreadable model;
      OSError for a file that cannot be read or written (the output is written aside and
      moved into place only if --output_file did not appear or change meanwhile:
      fileio.TargetChangedError).
    """
    options.validate()
    expected = fileio.state(options.output_file)
    if options.bert_config_file:
        config = EncoderConfig.from_json_file(options.bert_config_file)
    else:
        config = interop.checkpoint_config(options.init_checkpoint)
        if config is None:
            raise FlagValueError(f"--bert_config_file is required: --init_checkpoint="
                                 f"{options.init_checkpoint} has no config beside it")
    if options.max_seq_length > config.max_position_embeddings:
        raise FlagValueError(f"--max_seq_length={options.max_seq_length} exceeds "
                             f"max_position_embeddings={config.max_position_embeddings} of the "
                             "model")
    tokenizer_setup.check_vocab_file_beside(options.vocab_file, options.init_checkpoint)
    vocab_file = _tokenizer_file(options.vocab_file, options.init_checkpoint)
    if vocab_file is None:
        raise FlagValueError(f"--vocab_file is required: no vocab.txt, tokenizer.json or "
                             f"spiece.model beside --init_checkpoint={options.init_checkpoint}")
    layers = parse_layers(options.layers, config.num_hidden_layers)
    try:
        buckets = length_buckets.parse_buckets(options.length_buckets,
                                               options.max_seq_length,
                                               config.max_position_embeddings)
    except length_buckets.BucketError as e:
        raise FlagValueError(str(e)) from None
    # Unset: the casing --init_checkpoint records (a set one must agree with it). A
    # tokenizer.json records its casing too: unset takes it, a set one must agree (a vocab.txt:
    # unset is true, the original's default).
    options = dataclasses.replace(options, do_lower_case=interop.casing_of(
        options.do_lower_case, options.init_checkpoint))
    tokenizer, do_lower_case = tokenizer_setup.load_tokenizer(vocab_file, options.do_lower_case)
    if tokenizer.vocab_size > config.vocab_size:
        raise FlagValueError(f"--vocab_file={vocab_file} has {tokenizer.vocab_size} tokens but "
                             f"vocab_size={config.vocab_size} in the model's config")
    # --input_file is a file: options.validate().
    with fileio.open_file(options.input_file, "rb") as f:
        lines = [line.strip() for line in decoded_lines(f, options.input_file)]
    if not lines:
        raise FlagValueError(f"--input_file={options.input_file} is empty; expected one input "
                             "per line")

    encoder = build_encoder(config)
    logging.info(interop.warm_start(options.init_checkpoint, encoder,
                                    do_lower_case=do_lower_case).summary())

    @tf.function(reduce_retracing=True, autograph=False)
    def forward(features):
        outputs = encoder(features, training=False)
        stacked_lbsh = tf.stack([outputs["encoder_outputs"][i] for i in layers])
        return tf.cast(stacked_lbsh, tf.float32), tf.cast(outputs["pooled_output"], tf.float32)

    if fileio.is_remote(options.output_file):
        local_dir = tempfile.mkdtemp(prefix="bert_tf_features_")
        tmp = os.path.join(local_dir, os.path.basename(options.output_file))
    else:
        local_dir = None
        tmp = os.path.join(os.path.dirname(os.path.abspath(options.output_file)),
                           f".tmp_{os.getpid()}_{os.path.basename(options.output_file)}")
    start = time.time()
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            # Chunks of lines in file order, length-sorted within: bounded memory, ordered
            # output.
            chunk = options.batch_size * 32
            for begin in range(0, len(lines), chunk):
                packed = [packed_input(tokenizer, line, options.max_seq_length)
                          for line in lines[begin:begin + chunk]]
                records = [None] * len(packed)
                lengths = [len(tokens) for tokens, _ in packed]
                for positions, width in length_sorted_batches(lengths, buckets,
                                                              options.batch_size):
                    features = {name: np.array([packed[i][1][name][:width] for i in positions],
                                               np.int32)
                                for name in ENCODER_INPUTS}
                    layer_values_lbsh, pooled_bh = (t.numpy() for t in forward(features))
                    for b, i in enumerate(positions):
                        tokens = packed[i][0]
                        records[i] = output_record(
                            begin + i, tokens, layer_values_lbsh[:, b, :len(tokens)], layers,
                            pooled=pooled_bh[b] if options.pooled else None,
                            per_token=options.per_token)
                for record in records:
                    out.write(json.dumps(record) + "\n")
                done = min(begin + chunk, len(lines))
                logging.info("%d/%d lines, %.1f lines/s", done, len(lines),
                             done / max(time.time() - start, 1e-9))
        fileio.publish_file(tmp, options.output_file, expected)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
        if local_dir:
            shutil.rmtree(local_dir, ignore_errors=True)
    return len(lines)
