r"""Fine-tunes BERT for sentence(-pair) classification (one label, or any number with
--multi_label) or regression, with the original's flags.

GLUE from its TSV files (or from TFDS `glue/*` prepared under --tfds_data_dir):

    python -m bert_tf.run_classifier --task_name=mrpc --data_dir=glue/MRPC \
      --init_checkpoint=/path/to/pretrained --max_seq_length=128 --train_batch_size=32 \
      --learning_rate=2e-5 --num_train_epochs=3 --do_train --do_eval --do_predict \
      --output_dir=/tmp/mrpc

Your own CSV (with a header row), TSV or JSONL data:

    python -m bert_tf.run_classifier --train_file=train.csv --dev_file=dev.csv \
      --text_a_column=review --label_column=stars --init_checkpoint=... --do_train --do_eval \
      --output_dir=/tmp/reviews

Evaluates the dev set at every checkpoint with the task's metric (the GLUE score of a GLUE
task: Matthews correlation for CoLA, F1/accuracy for MRPC and QQP, Pearson/Spearman for STS-B,
accuracy otherwise; accuracy for your own classes, micro-averaged F1 for --multi_label,
Pearson/Spearman for --regression) and keeps the best weights. Besides what
bert_tf.jobs.finetuning lists, --output_dir receives test_results.tsv (class probabilities per
test example, one line each, in --labels order: each label's own with --multi_label; the score
for regression) and the predictions in the GLUE submission format (<TASK>.tsv: CoLA.tsv,
MNLI-m.tsv, ...; predictions.tsv for other data: index<TAB>prediction with label names, those
above --multi_label_threshold (0.5) joined by --label_separator with --multi_label; each
evaluation also reports the dev set's best threshold).
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The original run_classifier.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_classifier_flags(flag_values)


def main(argv):
    del argv
    # First: Keras fixes its backend when it is imported, and importing TensorFlow (which a
    # remote path's check does) imports it.
    cli.use_keras_backend(cli.requested_backend(), "bert_tf.run_classifier")
    from bert_tf.jobs.finetuning_config import (ClassificationConfig, check_settings,
                                                resolved_settings)

    job = cli_flags.to_config(ClassificationConfig, backend=cli.requested_backend())
    outputs.check_finetuning_dirs(job.output_dir, job.task.init_checkpoint, job.export_dir,
                                  "run_classifier")
    # Before TensorFlow loads (seconds): a mistyped flag or path is refused at once.
    check_settings(job)
    cli_flags.record_resolved(resolved_settings(job))

    from bert_tf.jobs.classification import run_classifier

    run_classifier(job, flags_text=cli_flags.flagfile_text(define_flags))


def run():
    """Console-script entry point (bert-tf-classify)."""
    cli.run(main, "run_classifier", define_flags=define_flags,
            errors=cli.training_errors)


if __name__ == "__main__":
    run()
