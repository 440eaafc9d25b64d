r"""Fine-tunes BERT for token tagging (NER) on CoNLL-2003-style files.

    python -m bert_tf.run_tagging --data_dir=conll2003 --init_checkpoint=/path/to/cased \
      --do_lower_case=false --max_seq_length=128 --train_batch_size=32 --learning_rate=5e-5 \
      --num_train_epochs=3 --do_train --do_eval --do_predict --output_dir=/tmp/ner

--data_dir holds train.txt, dev.txt (or valid.txt) and test.txt; --train_file, --dev_file and
--test_file name other files. Each word's tag is learned and predicted on its first WordPiece
(bert_tf.data.tasks.tagging_data); sentences longer than --max_seq_length are split into windows.
The dev set is scored at every checkpoint with seqeval's entity F1 (conlleval chunking, so
IOB1, IOB2 and IOBES tags all work) and the best weights are kept. Besides what
bert_tf.jobs.finetuning lists, --output_dir receives dev_predictions.txt and test_predictions.txt
in CoNLL format (token, gold tag when the file has one, predicted tag; a blank line after each
sentence), which conlleval reads as they are.
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The fine-tuning flags, the labelled-data files and the CoNLL columns."""
    return cli_flags.define_tagging_flags(flag_values)


def main(argv):
    del argv
    # First: Keras fixes its backend when it is imported, and importing TensorFlow (which a
    # remote path's check does) imports it.
    cli.use_keras_backend(cli.requested_backend(), "bert_tf.run_tagging")
    from bert_tf.jobs.finetuning_config import (TaggingConfig, check_settings,
                                                resolved_settings)

    job = cli_flags.to_config(TaggingConfig, backend=cli.requested_backend())
    outputs.check_finetuning_dirs(job.output_dir, job.task.init_checkpoint, job.export_dir,
                                  "run_tagging")
    # Before TensorFlow loads (seconds): a mistyped flag or path is refused at once.
    check_settings(job)
    cli_flags.record_resolved(resolved_settings(job))

    from bert_tf.jobs.tagging import run_tagging

    run_tagging(job, flags_text=cli_flags.flagfile_text(define_flags))


def run():
    """Console-script entry point (bert-tf-tag)."""
    cli.run(main, "run_tagging", define_flags=define_flags,
            errors=cli.training_errors)


if __name__ == "__main__":
    run()
