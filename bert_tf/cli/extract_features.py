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

import sys

from absl import flags, logging

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The original extract_features.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_extract_features_flags(flag_values)


def main(argv):
    # The driver (and TensorFlow) load once the flags are checked: --help and a mistyped flag
    # or path answer without them.
    from bert_tf.config import ConfigError
    from bert_tf.data.tasks.task_errors import DataError
    from bert_tf.jobs.extract_features_config import ExtractFeaturesConfig
    from bert_tf.jobs.flag_checks import FlagValueError
    from bert_tf.training.step_runner import CheckpointError

    del argv
    config = cli_flags.to_config(ExtractFeaturesConfig)
    try:
        config.validate()
        outputs.check_output_files(
            {"--output_file": config.output_file},
            {"--input_file": config.input_file, "--vocab_file": config.vocab_file,
             "--init_checkpoint": config.init_checkpoint,
             "--bert_config_file": config.bert_config_file},
            beside={"--init_checkpoint": config.init_checkpoint})
        from bert_tf.jobs.extract_features import extract_features

        count = extract_features(config)
    except (FlagValueError, DataError, outputs.OutputError, ConfigError, CheckpointError,
            OSError) as e:
        print(f"extract_features: error: {e}", file=sys.stderr)
        sys.exit(1)
    logging.info("Wrote %d lines to %s", count, config.output_file)


def run():
    """Console-script entry point (bert-tf-extract-features)."""
    cli.run(main, required=["input_file", "output_file", "init_checkpoint"],
            define_flags=define_flags)


if __name__ == "__main__":
    run()
