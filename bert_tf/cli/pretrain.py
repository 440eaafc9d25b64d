r"""Pre-trains BERT (masked LM + next-sentence prediction) with the original script's flags.

    python -m bert_tf.run_pretraining --flagfile=official_configs/pretraining/demo_tiny.flags

Reads TFRecords of masked examples (--input_file, as written by create_pretraining_data) or raw
text masked afresh every epoch (--input_text_file with --vocab_file: a vocab.txt or a
tokenizer.json, WordPiece or byte-level BPE). Trains with a custom
tf.distribute loop (bert_tf.training.loop) that resumes step-exactly from --output_dir, then
optionally evaluates. --output_dir receives: ckpt-<step> checkpoints, summaries/ (TensorBoard),
bert_config.json, vocab.txt (when --vocab_file is given), run_pretraining.flags (the flags
used), pretrainer.keras, encoder.keras and results.json.

The BERT family from the same flags: any bert_config.json variant (ALBERT's embedding_size and
share_parameters, sinusoidal positions), --sentence_order_prediction (ALBERT),
--span_boundary_objective with --do_span_mask (SpanBERT), --full_sentences without
--use_next_sentence_label (RoBERTa); official_configs/pretraining/{roberta,albert,spanbert}_
style_*.flags hold the recipes.

Packed pre-training (docs/packing.md): records written by create_pretraining_data
--pack_sequences are detected (feature instance_ids in the first record) and trained on with
each instance attending only to itself; --pack_sequences packs raw text the same way. Metrics
then count instances: instances_per_row, instances_per_second, NSP accuracy over instances.

Exit codes: 0 done, 1 a flag, input or checkpoint error (message on stderr), 143 preempted:
SIGTERM made training save a checkpoint at the step reached; rerun the same command to resume.

--tf_data_service=grpc://HOST:PORT moves the training input pipeline (reading, tokenization,
masking, batching) to a tf.data service cluster: a tf.data.experimental.service.DispatchServer
and WorkerServers started in Pythons that have imported tensorflow_text (the pipelines use its
tokenizer ops), on machines that can read the input files. The service shards dynamically:
the dispatcher hands out the input files one at a time, so each is read by one worker per pass
and workers may join or leave (in "parallel_epochs" mode every worker would produce the whole,
identically seeded stream, so the trainer would see each batch once per worker). All trainers
of a run share one named job. The order batches arrive in then depends on timing, so a resumed
run cannot skip exactly the batches it trained on; instead it re-attaches to the job, which
continues where it was if the dispatcher still holds it (it drops jobs a few minutes after
their last trainer left) and otherwise starts a new pass over the files. Evaluation input is
read locally.
"""

from absl import flags

from bert_tf import cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import outputs

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """The original run_pretraining.py's flags (same names and defaults) and bert_tf's."""
    return cli_flags.define_pretraining_flags(flag_values)


def pretraining_config(flag_values=FLAGS):
    """The PretrainingConfig of the parsed flags; --max_predictions_per_seq left unset is None
    (the packed input's own or derived P, else 20)."""
    from bert_tf.jobs.pretraining import PretrainingConfig

    given = flag_values["max_predictions_per_seq"].present
    return cli_flags.to_config(
        PretrainingConfig, flag_values,
        max_predictions_per_seq=flag_values.max_predictions_per_seq if given else None)


def _take_tokenizer_casing(flag_values=FLAGS):
    """--do_lower_case left unset with a --vocab_file tokenizer.json: the file's casing, set
    on the flags so that run_pretraining.flags records it (exports and resumes read it there)."""
    vocab_file = flag_values.vocab_file
    if vocab_file and vocab_file.endswith(".json") and not flag_values["do_lower_case"].present:
        from bert_tf.jobs.run_setup import FlagValueError
        from bert_tf.text import tokenizer_files

        try:
            tokenizer = tokenizer_files.load_tokenizer(vocab_file)
        except (OSError, ValueError) as e:
            raise FlagValueError(f"--vocab_file={vocab_file}: {e}") from None
        flag_values.do_lower_case = tokenizer_files.tokenizer_casing(tokenizer)


def main(argv):
    from bert_tf.jobs.pretraining import pretrain

    del argv
    _take_tokenizer_casing()
    config = pretraining_config()
    outputs.check_pretraining_output_dir(config.output_dir)
    pretrain(config, flags_text=FLAGS.flags_into_string())


def run():
    """Console-script entry point (bert-tf-pretrain)."""
    cli.run(main, "run_pretraining", required=["output_dir"], define_flags=define_flags,
            errors=cli.training_errors)


if __name__ == "__main__":
    run()
