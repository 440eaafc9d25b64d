"""The pre-training job: checks, input, model, training loop, evaluation and run files.

`pretrain(PretrainingConfig(...))` is what `bert-tf-pretrain` (bert_tf.cli.pretrain) runs; its
module doc describes the inputs, the BERT-family objectives, packed rows and the tf.data service.
The config's field names are the command-line flag names, so every error names the flag.

--output_dir (a bert_tf.run_directory) receives: ckpt-<step> checkpoints, summaries/
(TensorBoard), bert_config.json, vocab.txt (when vocab_file is given), run_pretraining.flags
(the flags used), bert_tf_run.json (the run record a resume is checked against),
pretrainer.keras, encoder.keras and results.json.
"""

import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import time

import keras
import tensorflow as tf
from absl import logging
from keras import ops

from bert_tf import fileio, interop, run_directory
from bert_tf.data.pretraining.masking_recipe import (DEFAULT_MAX_PREDICTIONS_PER_SEQ,
                                                     MaskingRecipe, MaskingSettings,
                                                     resolve_max_predictions)
from bert_tf.fileio import write_text_atomic
from bert_tf.jobs import run_setup
from bert_tf.interop import InteropError
from bert_tf.jobs.run_setup import FlagValueError, RuntimeConfig
from bert_tf.modeling import BertPretrainer, build_encoder
from bert_tf.modeling.models import pretraining_metrics
from bert_tf.text import tokenizer_files
from bert_tf.training import checkpointing
from bert_tf.training.logging_window import format_metrics
from bert_tf.training.loop import TrainLoopConfig, evaluate, train, write_summaries
from bert_tf.training.optimization import create_optimizer

@dataclasses.dataclass
class PretrainingConfig(MaskingSettings, RuntimeConfig):
    """Everything a pre-training run is told; field names and defaults are the flags'.

    See `bert-tf-pretrain --help` (bert_tf.cli.flags) for each field; the masking recipe's are
    MaskingSettings'. max_predictions_per_seq None means "not given": 20, or for packed input
    the records' own P / the packed-text default. do_lower_case None means "not given": see
    resolve_casing.
    """

    # Model and files.
    bert_config_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    init_checkpoint: str | None = None
    output_dir: str | None = None
    # What to do.
    do_train: bool = False
    do_eval: bool = False
    # Input: TFRecords, raw text or a TFDS text dataset.
    input_file: str | None = None
    eval_input_file: str | None = None
    input_text_file: str | None = None
    eval_input_text_file: str | None = None
    input_tfds: str | None = None
    tfds_data_dir: str | None = None
    tfds_split: str = "train"
    eval_tfds_split: str | None = None
    tfds_text_key: str = "text"
    tf_data_service: str | None = None
    # The Keras backend the run trains on (None: the one Keras runs on), and a JAX run's
    # processes (jax.distributed).
    backend: str | None = None
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    # Objectives.
    use_next_sentence_label: bool = True
    span_boundary_objective: bool = False
    full_sentences: bool = False
    # Schedule.
    train_batch_size: int = 32
    eval_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    save_checkpoints_steps: int = 1000
    max_eval_steps: int = 100
    optimizer: str = "adamw"
    lr_schedule: str = "linear"
    decay_proportion: float = 0.1
    weight_decay_rate: float = 0.01
    adam_bias_correction: bool = False


# Flags of the tf.distribute loop, which a JAX run refuses naming them (a JAX run uses every
# local device and joins other processes through --coordinator_address).
TENSORFLOW_ONLY_FLAGS = ("tf_data_service",)


def _predictions(options):
    """P of unpacked input: max_predictions_per_seq, or its default when not given."""
    value = options.max_predictions_per_seq
    return DEFAULT_MAX_PREDICTIONS_PER_SEQ if value is None else value


def validate_options(options, config):
    """Checks the settings against each other and the model config, before any work starts.

    Args:
      options: the PretrainingConfig (or any object with its attribute names).
      config: the BertConfig read from options.bert_config_file.

    Raises:
      FlagValueError naming the flag, the value and what was expected.
    """
    if not options.do_train and not options.do_eval:
        raise FlagValueError("at least one of --do_train or --do_eval must be set")
    run_setup.check_backend(options, TENSORFLOW_ONLY_FLAGS)
    run_setup.check_numeric_flags(options)
    if sum(bool(v) for v in (options.input_file, options.input_text_file,
                             options.input_tfds)) != 1:
        raise FlagValueError("give exactly one of --input_file (TFRecords), --input_text_file "
                             "(raw text masked on the fly) or --input_tfds (a prepared TFDS "
                             "text dataset, masked on the fly)")
    if options.eval_tfds_split and not options.input_tfds:
        raise FlagValueError("--eval_tfds_split is a split of --input_tfds, which is not set")
    for name in ("input_text_file", "eval_input_text_file", "input_tfds"):
        if getattr(options, name) and not options.vocab_file:
            raise FlagValueError(f"--{name} needs --vocab_file")
    if options.eval_input_file and options.eval_input_text_file:
        raise FlagValueError("give at most one of --eval_input_file or --eval_input_text_file")
    if options.max_seq_length > config.max_position_embeddings:
        raise FlagValueError(
            f"--max_seq_length={options.max_seq_length} exceeds max_position_embeddings="
            f"{config.max_position_embeddings} in {run_setup.config_source(options)}")
    if not 0 < _predictions(options) <= options.max_seq_length:
        raise FlagValueError(f"--max_predictions_per_seq={_predictions(options)} must "
                             f"be in [1, --max_seq_length={options.max_seq_length}]")
    for name in ("train_batch_size", "eval_batch_size", "num_train_steps",
                 "save_checkpoints_steps", "steps_per_loop", "max_eval_steps"):
        if getattr(options, name) < 1:
            raise FlagValueError(f"--{name}={getattr(options, name)} must be >= 1")
    if not 0 <= options.num_warmup_steps <= options.num_train_steps:
        raise FlagValueError(f"--num_warmup_steps={options.num_warmup_steps} must be in "
                             f"[0, --num_train_steps={options.num_train_steps}]")
    run_setup.check_lr_schedule(options, num_warmup_steps=options.num_warmup_steps,
                                num_train_steps=options.num_train_steps)
    _validate_family_options(options)
    # type_vocab_size 0 means no segment embeddings (ModernBERT): segment ids are ignored.
    if config.type_vocab_size == 1 and not options.full_sentences:
        raise FlagValueError(
            f"type_vocab_size={config.type_vocab_size} in {run_setup.config_source(options)}"
            " has no segment id 1, which the sentence pairs of the pre-training inputs use; set "
            "type_vocab_size >= 2 (or train single sequences: --input_text_file with "
            "--full_sentences)")
    run_setup.effective_train_batch_size(options)  # checks --gradient_accumulation_steps
    service = options.tf_data_service
    if service is not None:
        host, _, port = service[len("grpc://"):].rpartition(":")
        if not service.startswith("grpc://") or not host or not port.isdigit():
            raise FlagValueError(f"--tf_data_service={service} must look like "
                                 "grpc://HOST:PORT (the dispatcher's address)")
    # Warm-started weights are indexed by the vocabulary beside them (tokens appended: fine).
    run_setup.check_vocab_file_beside(options.vocab_file, options.init_checkpoint)
    if options.vocab_file:
        vocab_size = (_tokenizer_json(options).vocab_size
                      if tokenizer_files.is_tokenizer_json(options.vocab_file)
                      else _count_vocab(options.vocab_file))
        if config.vocab_size < vocab_size:
            raise FlagValueError(
                f"vocab_size={config.vocab_size} in {run_setup.config_source(options)} is "
                f"smaller than the {vocab_size} tokens of --vocab_file={options.vocab_file}")


def _validate_family_options(options):
    """The BERT-family flags against the input and each other."""
    text_input = options.input_text_file or options.eval_input_text_file or options.input_tfds
    if options.sentence_order_prediction and not options.use_next_sentence_label:
        raise FlagValueError("--sentence_order_prediction trains the pair head: it needs "
                             "--use_next_sentence_label=true")
    for name in ("do_span_mask", "full_sentences"):
        if getattr(options, name) and not text_input:
            raise FlagValueError(f"--{name} masks or packs raw text: it needs --input_text_file, "
                                 "--eval_input_text_file or --input_tfds (TFRecords are made "
                                 "that way by "
                                 "create_pretraining_data)")
    if options.full_sentences and options.use_next_sentence_label:
        raise FlagValueError("--full_sentences packs single sequences: it needs "
                             "--use_next_sentence_label=false")
    pack, instances = options.pack_sequences, options.max_instances_per_row
    if instances and not pack:
        raise FlagValueError("--max_instances_per_row sets packed rows of raw text: it needs "
                             "--pack_sequences")
    if pack and options.full_sentences:
        raise FlagValueError("--pack_sequences packs sentence-pair instances: it cannot be "
                             "combined with --full_sentences (already full rows)")
    if instances < 0:
        raise FlagValueError(f"--max_instances_per_row={instances} must "
                             "be >= 0 (0 = the default)")
    if options.span_boundary_objective and text_input and not options.do_span_mask:
        raise FlagValueError("--span_boundary_objective needs span boundaries: add "
                             "--do_span_mask for raw text input")


def _tokenizer_json(options, do_lower_case=None):
    """The tokenizer of a --vocab_file tokenizer.json, checked against `do_lower_case`."""
    try:
        return tokenizer_files.load_tokenizer(options.vocab_file, do_lower_case)
    except (OSError, ValueError) as e:
        raise FlagValueError(f"--vocab_file={options.vocab_file}: {e}") from None


def _count_vocab(vocab_file):
    try:
        with tf.io.gfile.GFile(vocab_file) as f:
            return sum(1 for line in f if line.strip())
    except tf.errors.NotFoundError:
        raise FlagValueError(f"--vocab_file={vocab_file}: no such file") from None


def _input_flags(options, is_training):
    """(flag name, value) of the input a phase reads; eval falls back to the training input."""
    if not is_training:
        for name in ("eval_input_file", "eval_input_text_file"):
            if getattr(options, name):
                return name, getattr(options, name)
        if options.input_tfds and options.eval_tfds_split:
            return "input_tfds", f"{options.input_tfds}:{options.eval_tfds_split}"
    if options.input_file:
        return "input_file", options.input_file
    if options.input_tfds:
        return "input_tfds", f"{options.input_tfds}:{options.tfds_split}"
    return "input_text_file", options.input_text_file


def _packed_layout(options, name, patterns):
    """(P, I) of the packed records of --<name>, or None for unpacked records.

    Packed records are recognized by the feature instance_ids in the first record of the first
    file; the reader then checks every file against that. Raises FlagValueError when the
    records contradict --pack_sequences or --max_predictions_per_seq.
    """
    from bert_tf.data.pretraining.record_dataset import expand_input_patterns, record_layout

    try:
        first = expand_input_patterns(patterns)[0]
        layout = record_layout(first)
    except ValueError as e:
        raise FlagValueError(f"--{name}={patterns}: {e}") from None
    if layout is None:
        if options.pack_sequences:
            raise FlagValueError(
                f"--pack_sequences: the records of --{name} are not packed (no feature "
                f'"instance_ids" in {first}); make them with create_pretraining_data '
                "--pack_sequences, or drop --pack_sequences")
        return None
    seq_length, predictions, instances = layout
    if options.max_predictions_per_seq not in (None, predictions):
        raise FlagValueError(
            f"--max_predictions_per_seq={options.max_predictions_per_seq} does not match the "
            f"packed records of --{name}: {first} holds {predictions} masked positions per "
            f"row; pass --max_predictions_per_seq={predictions} or leave it unset")
    if seq_length != options.max_seq_length:
        raise FlagValueError(
            f"--max_seq_length={options.max_seq_length} does not match the packed records of "
            f"--{name}: {first} holds rows of {seq_length} tokens")
    logging.info("--%s holds packed rows: S=%d, P=%d masked positions and I=%d instances per "
                 "row", name, seq_length, predictions, instances)
    return predictions, instances


def text_packing(options):
    """(P, I) of packed raw text (--pack_sequences), or (--max_predictions_per_seq, None)."""
    from bert_tf.data.pretraining import row_packing

    if not options.pack_sequences:
        return _predictions(options), None
    predictions = resolve_max_predictions(
        options.max_predictions_per_seq, max_seq_length=options.max_seq_length,
        masked_lm_prob=options.masked_lm_prob, pack_sequences=True,
        max_instances_per_row=options.max_instances_per_row)
    return predictions, (options.max_instances_per_row
                         or row_packing.default_max_instances_per_row(options.max_seq_length))


def masking_recipe(options):
    """The MaskingRecipe raw text is masked with: the config's, P and I resolved for packing."""
    predictions, instances = text_packing(options)
    return MaskingRecipe(
        max_seq_length=options.max_seq_length, max_predictions_per_seq=predictions,
        masked_lm_prob=options.masked_lm_prob, do_whole_word_mask=options.do_whole_word_mask,
        sentence_order_prediction=options.sentence_order_prediction,
        do_span_mask=options.do_span_mask, pack_sequences=instances is not None,
        max_instances_per_row=instances or 0)


def _make_dataset_fn(options, config, *, is_training, batch_size):
    """(InputContext) -> tf.data.Dataset of the pre-training feature dict."""
    name, patterns = _input_flags(options, is_training)
    seed = options.seed
    if seed is None and is_training and options.tf_data_service:
        # Every trainer of the shared service job must build the same pipeline graph.
        seed = int(_data_service_job_name(options)[-8:], 16) % 2**31
    if name.endswith("input_file"):
        from bert_tf.data import pretraining_dataset

        layout = _packed_layout(options, name, patterns)
        predictions, instances = layout or (_predictions(options), None)

        def dataset_fn(input_context=None):
            return pretraining_dataset(
                patterns, batch_size=batch_size,
                max_seq_length=options.max_seq_length,
                max_predictions_per_seq=predictions,
                is_training=is_training, seed=seed, input_context=input_context,
                use_next_sentence_label=options.use_next_sentence_label,
                vocab_size=config.vocab_size, span_boundaries=options.span_boundary_objective,
                max_instances_per_row=instances)
        return dataset_fn

    from bert_tf.data import text_pretraining_dataset

    tfds_args = {}
    if name == "input_tfds":
        tfds_name, _, split = patterns.rpartition(":")
        tfds_args = dict(tfds_name=tfds_name, tfds_data_dir=options.tfds_data_dir,
                         tfds_split=split, tfds_text_key=options.tfds_text_key)
        patterns = None

    recipe = masking_recipe(options)

    def text_dataset_fn(input_context=None):
        return text_pretraining_dataset(
            patterns, **tfds_args, vocab_file=options.vocab_file,
            do_lower_case=options.do_lower_case, batch_size=batch_size, recipe=recipe,
            use_next_sentence_label=options.use_next_sentence_label, seed=seed,
            is_training=is_training, input_context=input_context,
            full_sentences=options.full_sentences)
    return text_dataset_fn


def _data_service_job_name(options):
    """The tf.data service job of a run: its output dir and everything that shapes its input.

    Trainers of one run (workers, or a restart) share the job; a run whose input changed gets
    a new one (the dispatcher refuses a job name with a different pipeline).
    """
    shape = [fileio.abspath(options.output_dir), options.input_file, options.input_text_file,
             options.input_tfds, options.tfds_split, options.tfds_data_dir,
             options.max_seq_length, _predictions(options), options.train_batch_size,
             options.seed, options.masked_lm_prob, options.do_whole_word_mask,
             options.use_next_sentence_label, options.do_lower_case,
             options.sentence_order_prediction, options.do_span_mask, options.full_sentences]
    # Packing joins the name only when packing: an unpacked run's name is the one every release
    # gives it, so a trainer restarted under a newer bert_tf re-attaches to its job.
    if options.pack_sequences:
        shape += [True, options.max_instances_per_row]
    return "bert_tf_pretraining_" + hashlib.sha1(json.dumps(shape).encode()).hexdigest()[:16]


def _through_data_service(dataset_fn, options):
    """Wraps a training dataset_fn so its pipeline runs on the tf.data service.

    Every trainer registers the same, unsharded pipeline (one input pipeline, this replica's
    batch size): the service, not the file shard, splits the input between trainers.
    """
    job_name = _data_service_job_name(options)
    logging.info("Training input from the tf.data service at %s, job %s",
                 options.tf_data_service, job_name)

    def service_dataset_fn(input_context):
        whole = tf.distribute.InputContext(
            num_input_pipelines=1, input_pipeline_id=0,
            num_replicas_in_sync=input_context.num_replicas_in_sync)
        return dataset_fn(whole).apply(tf.data.experimental.service.distribute(
            processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC,
            service=options.tf_data_service, job_name=job_name))
    return service_dataset_fn


def _check_input(dataset_fn, options, is_training):
    """Builds the pipeline once up front so a bad glob or record fails before training.

    Returns a dataset_fn that hands this pipeline to its first caller with a single input
    pipeline and replica (the same pipeline: nothing to shard, the per-replica batch is the
    global one) instead of building it again; a raw-text pipeline takes seconds to build.
    """
    name, patterns = _input_flags(options, is_training)
    try:
        unused = [dataset_fn(None)]
    except ValueError as e:
        raise FlagValueError(f"--{name}={patterns}: {e}") from None

    def reusing_dataset_fn(input_context=None):
        single = input_context is None or (input_context.num_input_pipelines == 1
                                           and input_context.num_replicas_in_sync == 1)
        if unused and single:
            return unused.pop()
        return dataset_fn(input_context)
    return reusing_dataset_fn


def _reads_text(options):
    return bool(options.input_text_file or options.eval_input_text_file or options.input_tfds)


def resolve_casing(options):
    """The casing the run tokenizes with: --do_lower_case when given, else the casing
    --output_dir's run recorded (a resume), else --init_checkpoint's, else a tokenizer.json
    --vocab_file's, else True for raw text and None (not known) for TFRecords, which
    create_pretraining_data tokenized.

    Raises:
      FlagValueError: a given --do_lower_case contradicts --init_checkpoint's or the
        tokenizer.json's recorded casing (naming both).
    """
    casing = options.do_lower_case
    if casing is None and run_directory.has_checkpoint(options.output_dir or ""):
        casing, where = run_directory.recorded_casing(options.output_dir)
        if casing is not None:
            logging.info("--do_lower_case unset: %s, as --output_dir=%s records (its %s)",
                         casing, options.output_dir, where)
    try:
        casing = interop.casing_of(casing, options.init_checkpoint)
    except InteropError as e:
        raise FlagValueError(str(e)) from None
    if options.vocab_file and tokenizer_files.is_tokenizer_json(options.vocab_file):
        casing = _tokenizer_json(options, casing).do_lower_case
    if casing is None and _reads_text(options):
        casing = True
    return casing


def run_record(options, config):
    """The RunRecord of this run (bert_tf.run_directory): what a resume of --output_dir must
    share with it. Takes the resolved casing (resolve_casing)."""
    return run_directory.RunRecord(
        job="pretraining", command=run_directory.PRETRAINING_COMMAND,
        model_config=config.to_dict(),
        tokenizer_sha256=(run_directory.tokenizer_digest(options.vocab_file)
                          if options.vocab_file else None),
        do_lower_case=options.do_lower_case,
        settings={"max_seq_length": options.max_seq_length,
                  "max_predictions_per_seq": _predictions(options),
                  "train_batch_size": options.train_batch_size,
                  "use_next_sentence_label": options.use_next_sentence_label,
                  "sentence_order_prediction": options.sentence_order_prediction,
                  "span_boundary_objective": options.span_boundary_objective,
                  "full_sentences": options.full_sentences,
                  "pack_sequences": options.pack_sequences, "optimizer": options.optimizer,
                  "backend": options.backend},
        init_checkpoint=options.init_checkpoint)


def _pretraining_loss_fn(model, batch, training):
    outputs = model(batch, training=training)
    parts = model.compute_pretraining_losses(batch, outputs)
    if "input_instance_ids" in batch:
        # Packed rows: count instances (the highest instance id of a row) as well as rows, so
        # throughput and NSP accuracy are reported per instance.
        instance_ids = batch["input_instance_ids"]
        parts = dict(parts,
                     instances=ops.sum(ops.cast(ops.max(instance_ids, axis=1), "float32")),
                     rows=ops.cast(ops.shape(instance_ids)[0], "float32"))
    return parts


def pretrain(options, flags_text=None):
    """Runs pre-training and/or evaluation as the flags say; returns the results dict.

    Args:
      options: the PretrainingConfig (or any object with its attribute names).
      flags_text: the command line as a flagfile, saved to output_dir/run_pretraining.flags
        so the run's every setting is on record next to its checkpoints.

    Returns:
      dict written to output_dir/results.json.
    """
    start = time.time()
    config = run_setup.read_model_config(run_setup.config_source(options))
    options = copy.copy(options)
    options.backend = options.backend or keras.backend.backend()
    validate_options(options, config)
    options.do_lower_case = resolve_casing(options)
    record = run_record(options, config)
    if options.do_train:
        run_directory.check_resume(options.output_dir, record, options.vocab_file,
                                   backend=options.backend)
    run_directory.check_writable(options.output_dir)
    # The strategy (or JAX's processes and devices) comes before any TensorFlow op:
    # multi-worker collectives must be configured before the runtime starts.
    strategy = run_setup.make_devices(options, ("train_batch_size", "eval_batch_size"))
    # Every input is built (and so checked) before the directory is taken: a refused run
    # leaves nothing behind.
    phases = [(True, options.train_batch_size)] if options.do_train else []
    phases += [(False, options.eval_batch_size)] if options.do_eval else []
    dataset_fns = {}
    for is_training, batch_size in phases:
        dataset_fns[is_training] = _check_input(
            _make_dataset_fn(options, config, is_training=is_training, batch_size=batch_size),
            options, is_training)
    if options.do_train and options.tf_data_service:
        dataset_fns[True] = _through_data_service(dataset_fns[True], options)
    # The chief owns the directory for the run; workers share its ownership.
    with run_directory.owned(options.output_dir, run_setup.is_chief_process(strategy)):
        if options.do_train:
            # Again, now that no other run can change the record meanwhile.
            run_directory.check_resume(options.output_dir, record, options.vocab_file,
                                       backend=options.backend)
        try:
            return _pretrain(options, config, strategy, dataset_fns, record, flags_text, start)
        except tf.errors.InvalidArgumentError as e:
            from bert_tf.data.pretraining import record_dataset

            problem = record_dataset.out_of_vocabulary(e)
            if problem is None:
                raise
            raise FlagValueError(f"--input_file: {problem}") from None


def _pretrain(options, config, strategy, dataset_fns, record, flags_text, start):
    """pretrain() once the flags and inputs are checked and the directory is owned."""
    run_setup.set_seed_and_policy(options, strategy)

    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        encoder = build_encoder(config)
        model = BertPretrainer(encoder, use_next_sentence_label=options.use_next_sentence_label,
                               sentence_order_prediction=options.sentence_order_prediction,
                               span_boundary_objective=options.span_boundary_objective)
        optimizer = create_optimizer(options.learning_rate, options.num_train_steps,
                                     options.num_warmup_steps, optimizer_type=options.optimizer,
                                     weight_decay_rate=options.weight_decay_rate,
                                     lr_schedule=options.lr_schedule,
                                     decay_proportion=options.decay_proportion,
                                     bias_correction=options.adam_bias_correction)

    chief = run_setup.is_chief_process(strategy)
    output = functools.partial(run_directory.path, options.output_dir)
    if chief:
        config.to_json_file(output(run_directory.CONFIG_FILE))
        if flags_text:
            write_text_atomic(output(run_directory.PRETRAINING_FLAGS_FILE), flags_text)
        if options.do_train:
            run_directory.write_record(options.output_dir, record)
        if options.vocab_file and tokenizer_files.is_tokenizer_json(options.vocab_file):
            # vocab.txt for a WordPiece file, tokenizer.json for byte-level BPE.
            tokenizer_files.write_tokenizer_file(options.output_dir, _tokenizer_json(options),
                                                 options.vocab_file)
        elif options.vocab_file:
            with tf.io.gfile.GFile(options.vocab_file) as f:
                write_text_atomic(output(run_directory.VOCAB_FILE), f.read())

    results = {"num_train_steps": options.num_train_steps}
    metrics_fn = functools.partial(pretraining_metrics,
                                   sentence_order_prediction=options.sentence_order_prediction)
    steps_per_loop = run_setup.steps_per_loop(options)
    if options.do_train:
        loop_config = TrainLoopConfig(
            num_train_steps=options.num_train_steps, steps_per_loop=steps_per_loop,
            save_checkpoints_steps=options.save_checkpoints_steps, log_steps=options.log_steps,
            global_batch_size=options.train_batch_size,
            gradient_accumulation_steps=options.gradient_accumulation_steps,
            jit_compile=options.jit_compile, init_checkpoint=options.init_checkpoint)
        warm_start_fn = functools.partial(_warm_start, options.do_lower_case)
        if strategy is None:
            train_results = jax_loop().train(
                model=model, optimizer=optimizer, loss_fn=_pretraining_loss_fn,
                dataset_fn=dataset_fns[True], output_dir=options.output_dir,
                loop_config=loop_config, metrics_fn=metrics_fn, warm_start_fn=warm_start_fn)
        else:
            train_results = train(
                model=model, optimizer=optimizer, loss_fn=_pretraining_loss_fn,
                dataset_fn=dataset_fns[True], strategy=strategy, output_dir=options.output_dir,
                loop_config=loop_config, metrics_fn=metrics_fn, warm_start_fn=warm_start_fn,
                skip_consumed_input=not options.tf_data_service)
        results["global_step"] = train_results.pop("step")
        if "instances_per_row" in train_results and "examples_per_second" in train_results:
            train_results["instances_per_second"] = (train_results["examples_per_second"]
                                                     * train_results["instances_per_row"])
            logging.info("Packed rows: %.2f instances per row, %.1f instances/s",
                         train_results["instances_per_row"],
                         train_results["instances_per_second"])
        results["train"] = train_results
    else:
        results["global_step"] = _restore_for_eval(options, model, optimizer)

    if options.do_eval:
        if strategy is None:
            results["eval"] = jax_loop().evaluate(
                model=model, loss_fn=_pretraining_loss_fn, dataset_fn=dataset_fns[False],
                max_steps=options.max_eval_steps, metrics_fn=metrics_fn)
        else:
            results["eval"] = evaluate(model=model, loss_fn=_pretraining_loss_fn,
                                       dataset_fn=dataset_fns[False], strategy=strategy,
                                       max_steps=options.max_eval_steps,
                                       metrics_fn=metrics_fn)
        logging.info("Eval at step %d: %s", results["global_step"],
                     format_metrics(results["eval"]))
        if chief:
            write_summaries(output(run_directory.SUMMARIES_DIR, "eval"),
                            results["global_step"], results["eval"])

    results["wall_time_seconds"] = time.time() - start
    if chief:
        checkpointing.save_keras_model(model, output(run_directory.PRETRAINER_FILE))
        checkpointing.save_keras_model(encoder, output(run_directory.ENCODER_FILE))
        write_text_atomic(output(run_directory.RESULTS_FILE),
                          json.dumps(results, indent=2, sort_keys=True) + "\n")
    return results


def jax_loop():
    """bert_tf.training.jax_loop, imported by JAX runs only (it imports jax)."""
    from bert_tf.training import jax_loop as loop

    return loop


def _warm_start(do_lower_case, path, target):
    return interop.warm_start(path, target, do_lower_case=do_lower_case)


def _restore_for_eval(options, model, optimizer):
    """Eval-only runs use the latest checkpoint in output_dir, else --init_checkpoint."""
    if keras.backend.backend() == "jax":
        optimizer.build(model.trainable_variables)
        latest = jax_loop().restore_latest(options.output_dir, model, optimizer)
    else:
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
        manager = tf.train.CheckpointManager(checkpoint, options.output_dir, max_to_keep=None)
        latest = checkpointing.restore_latest(manager, checkpoint)
    if latest:
        logging.info("Evaluating %s", latest)
        return int(ops.convert_to_numpy(optimizer.iterations))
    if options.init_checkpoint:
        interop.warm_start(options.init_checkpoint, model, do_lower_case=options.do_lower_case)
        return 0
    raise FlagValueError(f"--do_eval without --do_train needs a checkpoint in "
                         f"--output_dir={options.output_dir} or --init_checkpoint")
