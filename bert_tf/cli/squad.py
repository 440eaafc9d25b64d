r"""Fine-tunes BERT for SQuAD v1.1 / v2.0 span question answering with the original's flags.

    python -m bert_tf.run_squad --vocab_file=... --bert_config_file=... \
      --init_checkpoint=... --train_file=train-v1.1.json --predict_file=dev-v1.1.json \
      --do_train --do_predict --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad

Reads SQuAD JSON, splits long contexts into sliding windows (bert_tf.data.tasks.squad), trains a
BertSpanLabeler with the shared fine-tuning loop (bert_tf.training.task_loop) and answers the
--predict_file questions with the original's post-processing (bert_tf.data.tasks.squad_postprocess).
When the --predict_file has gold answers (SQuAD dev sets do), every checkpoint is evaluated
with the official EM/F1 (bert_tf.metrics.squad) and the weights with the best F1 are kept.

--output_dir receives: ckpt-<step> checkpoints, best/ (best weights and metrics),
summaries/{train,eval} (TensorBoard), predictions.json, nbest_predictions.json, null_odds.json
(v2.0), results.json, model.keras (the final, best model), bert_config.json, vocab.txt (or a
byte-level BPE model's tokenizer.json), task_info.json and run_squad.flags (the flags used); with
--export_dir, a SavedModel of the final model whose serve_text signature answers raw
question/context pairs (bert_tf.serving; with byte-level BPE answers are whole words).
"""

from absl import flags, logging

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The original run_squad.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_squad_flags(flag_values)


def main(argv):
    del argv
    # First: Keras fixes its backend when it is imported, and importing TensorFlow (which a
    # remote path's check does) imports it.
    cli.use_keras_backend(cli.requested_backend(), "bert_tf.run_squad")
    from bert_tf.jobs.finetuning_config import (SquadConfig, check_settings,
                                                resolved_settings)

    job = cli_flags.to_config(SquadConfig, backend=cli.requested_backend())
    if job.task.verbose_logging:
        logging.set_verbosity(logging.DEBUG)
    outputs.check_finetuning_dirs(job.output_dir, job.task.init_checkpoint, job.export_dir,
                                  "run_squad")
    # Before TensorFlow loads (seconds): a mistyped flag or path is refused at once.
    check_settings(job)
    cli_flags.record_resolved(resolved_settings(job))

    from bert_tf.jobs.squad import run_squad

    run_squad(job, flags_text=cli_flags.flagfile_text(define_flags))


def run():
    """Console-script entry point (bert-tf-squad)."""
    cli.run(main, "run_squad", define_flags=define_flags,
            errors=cli.training_errors)


if __name__ == "__main__":
    run()
