r"""Pre-trains BERT (masked LM + next-sentence prediction) with the original script's flags.

    python -m bert_tf.run_pretraining --flagfile=official_configs/pretraining/demo_tiny.flags

Reads TFRecords of masked examples (--input_file, as written by create_pretraining_data) or raw
text masked afresh every epoch (--input_text_file with --vocab_file: a vocab.txt or a
tokenizer.json, WordPiece or byte-level BPE). Trains with bert_tf's run controller
(bert_tf.training.controller) on a tf.distribute strategy, resuming step-exactly from
--output_dir, to --num_train_steps or for --time_budget, then optionally evaluates.
--output_dir receives: ckpt-<step> checkpoints, summaries/ (TensorBoard), bert_config.json,
vocab.txt (when --vocab_file is given), run_pretraining.flags (the flags used),
pretrainer.keras, encoder.keras and results.json.

The BERT family from the same flags: any bert_config.json variant (ALBERT's embedding_size and
share_parameters, sinusoidal positions), --sentence_order_prediction and --ngram_mask (ALBERT),
--span_boundary_objective with --do_span_mask (SpanBERT), --full_sentences without
--use_next_sentence_label (RoBERTa); official_configs/pretraining/{roberta,albert,spanbert}_
style_*.flags hold the recipes. --bag_of_words_weight adds a [CLS] bag-of-words loss (the
masked-LM head at [CLS] predicts its row's words), so the [CLS] vector summarises the text.

--objective=electra (with --use_next_sentence_label=false) trains ELECTRA's replaced-token
detection instead: a generator a quarter as wide (--generator_hidden_size) shares the
encoder's embeddings and fills the masked positions with samples, and the encoder, the
discriminator, learns which tokens were replaced (loss: generator masked LM +
--discriminator_weight x discriminator); encoder.keras is the discriminator, and
bert-tf-convert-checkpoint --to=huggingface writes it as ElectraForPreTraining
(docs/pretraining.md).

Packed pre-training (docs/packing.md): records written by create_pretraining_data
--pack_sequences are detected (feature instance_ids in the first record) and trained on with
each instance attending only to itself; --pack_sequences packs raw text the same way. Metrics
then count instances: instances_per_row, instances_per_second, NSP accuracy over instances.

--backend=jax (or KERAS_BACKEND=jax) trains with the JAX step runner (bert_tf.training.jax_runner)
on every local GPU, TPU or CPU device, and on several hosts with --coordinator_address,
--num_processes and --process_id (or the environment JAX reads); the same flags, inputs and run
directory, with ckpt-<step>.orbax checkpoints (Orbax; docs/scaling.md).

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
    """The PretrainingConfig of the parsed flags, each in its section (task, trainer, runtime);
    --max_predictions_per_seq left unset is None (the packed input's own or derived P, else
    20), --do_lower_case left unset None (the driver's resolve_casing)."""
    from bert_tf.jobs.pretraining_config import PretrainingConfig

    return cli_flags.to_config(PretrainingConfig, flag_values,
                               unset=("max_predictions_per_seq", "do_lower_case"),
                               backend=cli.requested_backend(flag_values))


def main(argv):
    del argv
    # First: Keras fixes its backend when it is imported, and importing TensorFlow (which a
    # remote path's check does) imports it.
    cli.use_keras_backend(cli.requested_backend(), "bert_tf.run_pretraining")
    from bert_tf.jobs.pretraining_config import check_settings

    job = pretraining_config()
    outputs.check_pretraining_output_dir(job.output_dir)
    # Before TensorFlow loads (seconds): a mistyped flag or path is refused at once.
    check_settings(job)

    from bert_tf.jobs.pretraining import pretrain, resolve_casing

    casing = resolve_casing(job)
    if casing is not None:
        # run_pretraining.flags then records the casing the run tokenizes with, and pretrain()
        # takes it as given (resolving it again would log where it came from twice).
        FLAGS.do_lower_case = job.task.do_lower_case = casing
    pretrain(job, flags_text=cli_flags.flagfile_text(define_flags))


def run():
    """Console-script entry point (bert-tf-pretrain)."""
    cli.run(main, "run_pretraining", required=["output_dir"], define_flags=define_flags,
            errors=cli.training_errors)


if __name__ == "__main__":
    run()
