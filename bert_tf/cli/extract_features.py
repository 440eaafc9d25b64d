r"""Writes BERT's per-token activations (and optionally sentence embeddings) as JSON lines.

    bert-tf-extract-features --input_file=input.txt --output_file=out.jsonl \
        --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt --layers=-1,-2,-3,-4 \
        --max_seq_length=128 [--pooled] [--noper_token]

The output is the original extract_features.py's: one JSON object per input line,
  {"linex_index": i, "features": [{"token": "[CLS]", "layers": [{"index": -1, "values": [...]},
   ...]}, ...]}
with every token of the packed input ([CLS] ... [SEP], padding left out) and the activations of
each --layers block (-1 = the last transformer layer), rounded to 6 decimals. An input line
"text_a ||| text_b" is a sentence pair. --pooled adds sentence embeddings:
  "pooled": the [CLS] vector through the pre-trained tanh pooler (what NSP and the classifier
            read), and
  "mean_pooled": [{"index": layer, "values": [...]}] the mean of each chosen layer over the
            tokens of the input;
--noper_token leaves the per-token "features" out (sentence embeddings only).

--init_checkpoint takes every format bert_tf reads (original TF1 checkpoint, bert_tf run
directory or .keras file, Hugging Face BERT or ModernBERT, or keras-hub directory);
--bert_config_file and --vocab_file default to the files beside it. --vocab_file is a vocab.txt
or a tokenizer.json (byte-level BPE, e.g. ModernBERT's, whose "token" fields are then the BPE
tokens in their byte-level form, "Ġworld"); --do_lower_case unset takes a tokenizer.json's
casing (a vocab.txt's default: true).
"""

import json
import os
import re
import sys
import time

import numpy as np
import tensorflow as tf
from absl import app, flags, logging

from bert_tf import cli, fileio, interop
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs
from bert_tf.config import BertConfig, ConfigError
from bert_tf.data.tasks import length_buckets
from bert_tf.modeling import build_encoder
from bert_tf.text import pack_inputs, tokenizer_files, truncated_lengths
from bert_tf.training.checkpointing import CheckpointError

FLAGS = flags.FLAGS

def define_flags(flag_values=FLAGS):
    """The original extract_features.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_extract_features_flags(flag_values)

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


class UsageError(ValueError):
    """A flag value that cannot work, with the flag named."""


def parse_layers(text, num_layers):
    """[-1, -2, ...] from '-1,-2'; each index must name one of the config's layers."""
    try:
        layers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--layers={text}: expected comma-separated integers") from None
    if not layers:
        raise UsageError("--layers is empty")
    for index in layers:
        if not -num_layers <= index < num_layers:
            raise UsageError(f"--layers={text}: layer {index} does not exist; the model has "
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


def bucketed_batches(lengths, buckets, batch_size):
    """(positions, width) batches covering every input once: with buckets, inputs of one
    bucket together, cut to that bucket's length; without, consecutive inputs at full length.

    Args:
      lengths: packed length of each input (padding excluded).
      buckets: increasing bucket lengths ending with --max_seq_length, or None.
      batch_size: inputs per batch (a bucket's last batch may be smaller).
    """
    if buckets is None:
        return [(list(range(i, min(i + batch_size, len(lengths)))), None)
                for i in range(0, len(lengths), batch_size)]
    members = {}
    for position, length in enumerate(lengths):
        members.setdefault(next(b for b in buckets if b >= length), []).append(position)
    return [(positions[i:i + batch_size], width) for width, positions in sorted(members.items())
            for i in range(0, len(positions), batch_size)]


def _tokenizer_file(flag_value, init_checkpoint):
    """--vocab_file, else the tokenizer file beside --init_checkpoint (vocab.txt, or a
    byte-level BPE tokenizer.json: tokenizer_files.model_tokenizer_file), else None."""
    if flag_value:
        return flag_value
    directory = (init_checkpoint if fileio.isdir(init_checkpoint)
                 else os.path.dirname(init_checkpoint))
    return tokenizer_files.model_tokenizer_file(directory)


def extract(options):
    """Reads --input_file and writes --output_file; returns the number of lines written."""
    if options.batch_size < 1:
        raise UsageError(f"--batch_size={options.batch_size} must be >= 1")
    if not options.per_token and not options.pooled:
        raise UsageError("--noper_token leaves nothing to write without --pooled")
    try:
        outputs.check_output_files(
            {"--output_file": options.output_file},
            {"--input_file": options.input_file, "--vocab_file": options.vocab_file,
             "--init_checkpoint": options.init_checkpoint,
             "--bert_config_file": options.bert_config_file})
    except outputs.OutputError as e:
        raise UsageError(str(e)) from None
    if options.bert_config_file:
        config = BertConfig.from_json_file(options.bert_config_file)
    else:
        config = interop.checkpoint_config(options.init_checkpoint)
        if config is None:
            raise UsageError(f"--bert_config_file is required: --init_checkpoint="
                             f"{options.init_checkpoint} has no config beside it")
    if options.max_seq_length > config.max_position_embeddings:
        raise UsageError(f"--max_seq_length={options.max_seq_length} exceeds "
                         f"max_position_embeddings={config.max_position_embeddings} of the model")
    vocab_file = _tokenizer_file(options.vocab_file, options.init_checkpoint)
    if vocab_file is None:
        raise UsageError(f"--vocab_file is required: no vocab.txt or tokenizer.json beside "
                         f"--init_checkpoint={options.init_checkpoint}")
    layers = parse_layers(options.layers, config.num_hidden_layers)
    try:
        buckets = length_buckets.parse_buckets(getattr(options, "length_buckets", "off"),
                                               options.max_seq_length,
                                               config.max_position_embeddings)
    except length_buckets.BucketError as e:
        raise UsageError(str(e)) from None
    # Unset: the casing --init_checkpoint records (a set one must agree with it).
    casing = interop.casing_of(options.do_lower_case, options.init_checkpoint)
    try:
        # A tokenizer.json records its casing: --do_lower_case unset takes it, a set one must
        # agree (a vocab.txt: unset is true, the original's default).
        tokenizer = tokenizer_files.load_tokenizer(vocab_file, casing)
    except (OSError, ValueError) as e:
        raise UsageError(f"--vocab_file={vocab_file}: {e}") from None
    do_lower_case = tokenizer_files.tokenizer_casing(tokenizer)
    missing = [role for role in ("cls", "sep", "pad") if getattr(tokenizer, f"{role}_id") is None]
    if missing:
        raise UsageError(f"--vocab_file={vocab_file} has no {'/'.join(missing)} token (inputs "
                         "are packed as [CLS] text [SEP] and padded)")
    if tokenizer.vocab_size > config.vocab_size:
        raise UsageError(f"--vocab_file={vocab_file} has {tokenizer.vocab_size} tokens but "
                         f"vocab_size={config.vocab_size} in the model's config")
    if not tf.io.gfile.exists(options.input_file):
        raise UsageError(f"--input_file={options.input_file}: no such file")
    with tf.io.gfile.GFile(options.input_file) as f:
        lines = [line.rstrip("\n").strip() for line in f]
    if not lines:
        raise UsageError(f"--input_file={options.input_file} is empty; expected one input per "
                         "line")

    encoder = build_encoder(config)
    logging.info(interop.warm_start(options.init_checkpoint, encoder,
                                    do_lower_case=do_lower_case).summary())

    @tf.function(reduce_retracing=True)
    def forward(features):
        outputs = encoder(features, training=False)
        stacked_lbsh = tf.stack([outputs["encoder_outputs"][i] for i in layers])
        return tf.cast(stacked_lbsh, tf.float32), tf.cast(outputs["pooled_output"], tf.float32)

    tmp = f"{options.output_file}.tmp-{os.getpid()}"
    start = time.time()
    try:
        with tf.io.gfile.GFile(tmp, "w") as out:
            # Chunks of lines in file order, bucketed within: bounded memory, ordered output.
            chunk = options.batch_size * 32
            for begin in range(0, len(lines), chunk):
                packed = [packed_input(tokenizer, line, options.max_seq_length)
                          for line in lines[begin:begin + chunk]]
                records = [None] * len(packed)
                for positions, width in bucketed_batches([len(p[0]) for p in packed], buckets,
                                                         options.batch_size):
                    features = {name: np.array([packed[i][1][name][:width] for i in positions],
                                               np.int32)
                                for name in ("input_word_ids", "input_mask", "input_type_ids")}
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
        tf.io.gfile.rename(tmp, options.output_file, overwrite=True)
    finally:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
    return len(lines)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    try:
        count = extract(FLAGS)
    except (UsageError, ConfigError, CheckpointError, OSError) as e:
        print(f"extract_features: error: {e}", file=sys.stderr)
        sys.exit(1)
    logging.info("Wrote %d lines to %s", count, FLAGS.output_file)


def run():
    """Console-script entry point (bert-tf-extract-features)."""
    cli.run(main, required=["input_file", "output_file", "init_checkpoint"],
            define_flags=define_flags)


if __name__ == "__main__":
    run()
