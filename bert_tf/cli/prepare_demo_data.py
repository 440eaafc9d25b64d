"""Prepares the demo pre-training data from the corpus every Python install carries.

Writes corpus_{train,eval}.txt (the stdlib's reference manual, `pydoc_data.topics`, one sentence
per line), vocab.txt (WordPiece learned on it) and {train,eval}.tfrecord (pre-training records in
the original format) to --output_dir, for official_configs/pretraining/demo_tiny.flags:

  bert-tf-prepare-demo-data --output_dir=/tmp/bert_tf_demo
  python -m bert_tf.run_pretraining --flagfile=official_configs/pretraining/demo_tiny.flags

and classify/{train,dev,test}.csv (columns text,label): sentences of the manual labelled
"statement" or "type" by the kind of topic they come from, to fine-tune the demo encoder on
(bert-tf-classify --data_dir=/tmp/bert_tf_demo/classify); and embed/pairs.tsv, dev_pairs.tsv
(columns query,passage: a sentence of a paragraph and the rest of it) and corpus.txt (the dev
passages), for sentence embeddings (bert-tf-embed --train_file=/tmp/bert_tf_demo/embed/pairs.tsv).
"""

import json
import sys

from absl import flags
from absl import logging

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs
from bert_tf.data.pretraining import demo_corpus

FLAGS = flags.FLAGS

def define_flags(flag_values=FLAGS):
    """Where the demo data goes and how it is made."""
    return cli_flags.define_prepare_demo_data_flags(flag_values)


def main(argv):
    del argv
    config = cli_flags.to_config(demo_corpus.DemoDataConfig)
    try:
        # Its vocab.txt would replace the one a pre-training run there resumes with.
        outputs.check_not_a_model_dir("--output_dir", config.output_dir)
        outputs.check_writable_dir("--output_dir", config.output_dir)
    except outputs.OutputError as e:
        sys.exit(f"prepare_demo_data: error: {e}")
    summary = demo_corpus.prepare_demo_data(config)
    logging.info("Demo data ready: %s", json.dumps(summary, indent=2))


def run():
    """Console-script entry point (bert-tf-prepare-demo-data)."""
    cli.run(main, define_flags=define_flags)


if __name__ == "__main__":
    run()
