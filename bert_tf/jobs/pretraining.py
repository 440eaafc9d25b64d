"""The pre-training job: checks, input, model, training loop, evaluation and run files.

`pretrain(PretrainingConfig(...))` is what `bert-tf-pretrain` (bert_tf.cli.pretrain) runs; its
module doc describes the inputs, the BERT-family objectives, packed rows and the tf.data service.
The config holds a task, a trainer and a runtime section (bert_tf.jobs.sections), each function
is handed the section it reads, and every field is named as its command-line flag, so every
error names the flag:

    job = from_flat(PretrainingConfig, bert_config_file=..., input_file=..., output_dir=...,
                    do_train=True, num_train_steps=1000)
    job.task.input_file, job.trainer.num_train_steps, job.runtime.dtype

--output_dir (a bert_tf.run_directory) receives: ckpt-<step> checkpoints, summaries/
(TensorBoard), bert_config.json, vocab.txt (when vocab_file is given), run_pretraining.flags
(the flags used), bert_tf_run.json (the run record a resume is checked against),
pretrainer.keras, encoder.keras and results.json. With objective "electra" the pretrainer is an
ElectraPretrainer (generator and discriminator) and encoder.keras its discriminator. A run
without --do_train evaluates the run's own checkpoints (else --init_checkpoint's weights) and
writes only what it found: a line of eval_only_results.jsonl and scalars under summaries/eval.
"""

import dataclasses
import functools
import hashlib
import json
import time

import tensorflow as tf
from absl import logging
from keras import ops

from bert_tf import fileio, interop, run_directory
from bert_tf.data.pretraining.masking_recipe import (MaskingRecipe, highest_masked_lm_prob,
                                                     resolve_instances_per_row,
                                                     resolve_max_predictions)
from bert_tf.fileio import write_text_atomic
from bert_tf.jobs import model_files, runtime_setup, tokenizer_setup
from bert_tf.interop import InteropError
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.pretraining_config import (budget_warmup_proportion, check_settings,
                                             input_flags, max_predictions, reads_text,
                                             time_budget_seconds)
from bert_tf.modeling import BertPretrainer, ElectraPretrainer, build_encoder
from bert_tf.modeling.electra import electra_metrics, generator_config
from bert_tf.modeling.pretraining_metrics import pretraining_metrics
from bert_tf.text import tokenizer_files
from bert_tf.training import checkpointing, controller, losses, runtime
from bert_tf.training.budget import format_duration
from bert_tf.training.logging_window import format_metrics, write_summaries
from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.optimization import create_optimizer

# Why a JAX run refuses --tf_data_service (a JAX run uses every local device and joins other
# processes through --coordinator_address).
_TF_DATA_SERVICE_NEEDS_TENSORFLOW = "it feeds TensorFlow's distributed loop"


def validate_options(job, config):
    """Checks the settings against each other, the files they name and the model config,
    before any work starts: check_settings (bert_tf.jobs.pretraining_config), then the checks
    that need the encoder's config or TensorFlow.

    Args:
      job: the PretrainingConfig.
      config: the encoder config read from --bert_config_file (or --init_checkpoint's).

    Raises:
      FlagValueError naming the flag, the value and what was expected.
    """
    check_settings(job)
    task = job.task
    runtime_setup.check_backend(job.runtime, {"tf_data_service": (
        task.tf_data_service, _TF_DATA_SERVICE_NEEDS_TENSORFLOW)})
    if task.max_seq_length > config.max_position_embeddings:
        raise FlagValueError(
            f"--max_seq_length={task.max_seq_length} exceeds max_position_embeddings="
            f"{config.max_position_embeddings} in {model_files.config_source(task)}")
    _validate_objective(task, config)
    # type_vocab_size 0 means no segment embeddings (ModernBERT): segment ids are ignored.
    if config.type_vocab_size == 1 and not task.full_sentences:
        raise FlagValueError(
            f"type_vocab_size={config.type_vocab_size} in {model_files.config_source(task)}"
            " has no segment id 1, which the sentence pairs of the pre-training inputs use; set "
            "type_vocab_size >= 2 (or train single sequences: --input_text_file with "
            "--full_sentences)")
    # Warm-started weights are indexed by the vocabulary beside them (tokens appended: fine).
    tokenizer_setup.check_vocab_file_beside(task.vocab_file, task.init_checkpoint)
    if task.init_checkpoint:
        interop.check_weights_readable(task.init_checkpoint)
    if task.vocab_file:
        try:
            vocab_size = tokenizer_files.vocab_size(task.vocab_file,
                                                    f"--vocab_file={task.vocab_file}")
        except ValueError as e:
            raise FlagValueError(str(e)) from None
        # Read as the run reads it (an empty vocab.txt, one without [CLS] or [MASK]): else
        # the first to read it is the run record's digest, with a traceback.
        tokenizer_setup.load_tokenizer(task.vocab_file, None)
        if config.vocab_size < vocab_size:
            raise FlagValueError(
                f"vocab_size={config.vocab_size} in {model_files.config_source(task)} is "
                f"smaller than the {vocab_size} tokens of --vocab_file={task.vocab_file}")


def _validate_objective(task, config):
    """ELECTRA's generator against the encoder's config (its flags against the other
    objectives': pretraining_config.check_settings)."""
    if task.objective != "electra":
        return
    source = model_files.config_source(task)
    if config.architecture != "bert":
        raise FlagValueError(f"--objective=electra trains BERT's encoder: {source} declares "
                             f"architecture '{config.architecture}'")
    try:
        generator_config(config, task.generator_hidden_size, source=f" in {source}")
    except ValueError as e:
        raise FlagValueError(f"--{e}") from None


def _packed_layout(task, name, patterns):
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
        if task.pack_sequences:
            raise FlagValueError(
                f"--pack_sequences: the records of --{name} are not packed (no feature "
                f'"instance_ids" in {first}); make them with create_pretraining_data '
                "--pack_sequences, or drop --pack_sequences")
        return None
    seq_length, predictions, instances = layout
    if task.max_predictions_per_seq not in (None, predictions):
        raise FlagValueError(
            f"--max_predictions_per_seq={task.max_predictions_per_seq} does not match the "
            f"packed records of --{name}: {first} holds {predictions} masked positions per "
            f"row; pass --max_predictions_per_seq={predictions} or leave it unset")
    if seq_length != task.max_seq_length:
        raise FlagValueError(
            f"--max_seq_length={task.max_seq_length} does not match the packed records of "
            f"--{name}: {first} holds rows of {seq_length} tokens")
    logging.info("--%s holds packed rows: S=%d, P=%d masked positions and I=%d instances per "
                 "row", name, seq_length, predictions, instances)
    return predictions, instances


def text_packing(task):
    """(P, I) of packed raw text (--pack_sequences), or (--max_predictions_per_seq, None), of
    the task section's masking settings."""
    if not task.pack_sequences:
        return max_predictions(task), None
    highest = highest_masked_lm_prob(task.masked_lm_prob, task.masked_lm_prob_end)
    return resolve_max_predictions(task, highest), resolve_instances_per_row(task)


def masking_recipe(task):
    """The MaskingRecipe raw text is masked with: the task section's masking settings, P and I
    resolved for packing."""
    predictions, instances = text_packing(task)
    return MaskingRecipe(
        max_seq_length=task.max_seq_length, max_predictions_per_seq=predictions,
        masked_lm_prob=task.masked_lm_prob, masked_lm_prob_end=task.masked_lm_prob_end,
        do_whole_word_mask=task.do_whole_word_mask,
        sentence_order_prediction=task.sentence_order_prediction,
        do_span_mask=task.do_span_mask, ngram_mask=task.ngram_mask,
        pack_sequences=instances is not None,
        max_instances_per_row=instances or 0)


def _make_dataset_fn(job, config, *, is_training, batch_size, masking_progress=None):
    """(InputContext) -> tf.data.Dataset of the pre-training feature dict; raw text masked at
    the rate `masking_progress` (a tf.Variable, with --masked_lm_prob_end) says."""
    task = job.task
    name, patterns = input_flags(task, is_training)
    seed = job.runtime.seed
    if seed is None and is_training and task.tf_data_service:
        # Every trainer of the shared service job must build the same pipeline graph.
        seed = int(_data_service_job_name(job)[-8:], 16) % 2**31
    if name.endswith("input_file"):
        from bert_tf.data import pretraining_dataset

        layout = _packed_layout(task, name, patterns)
        predictions, instances = layout or (max_predictions(task), None)

        def dataset_fn(input_context=None):
            return pretraining_dataset(
                patterns, batch_size=batch_size,
                max_seq_length=task.max_seq_length,
                max_predictions_per_seq=predictions,
                is_training=is_training, seed=seed, input_context=input_context,
                use_next_sentence_label=task.use_next_sentence_label,
                vocab_size=config.vocab_size, span_boundaries=task.span_boundary_objective,
                max_instances_per_row=instances)
        return dataset_fn

    from bert_tf.data import text_pretraining_dataset

    tfds_args = {}
    if name == "input_tfds":
        tfds_name, _, split = patterns.rpartition(":")
        tfds_args = dict(tfds_name=tfds_name, tfds_data_dir=task.tfds_data_dir,
                         tfds_split=split, tfds_text_key=task.tfds_text_key)
        patterns = None

    recipe = masking_recipe(task)

    def text_dataset_fn(input_context=None):
        return text_pretraining_dataset(
            patterns, **tfds_args, vocab_file=task.vocab_file,
            do_lower_case=task.do_lower_case, batch_size=batch_size, recipe=recipe,
            use_next_sentence_label=task.use_next_sentence_label, seed=seed,
            is_training=is_training, input_context=input_context,
            full_sentences=task.full_sentences, masking_progress=masking_progress)
    return text_dataset_fn


def _data_service_job_name(job):
    """The tf.data service job of a run (a PretrainingConfig): its output dir and everything
    that shapes its input.

    Trainers of one run (workers, or a restart) share the job; a run whose input changed gets
    a new one (the dispatcher refuses a job name with a different pipeline).
    """
    task = job.task
    shape = [fileio.abspath(job.output_dir), task.input_file, task.input_text_file,
             task.input_tfds, task.tfds_split, task.tfds_data_dir,
             task.max_seq_length, max_predictions(task), job.trainer.train_batch_size,
             job.runtime.seed, task.masked_lm_prob, task.do_whole_word_mask,
             task.use_next_sentence_label, task.do_lower_case,
             task.sentence_order_prediction, task.do_span_mask, task.full_sentences]
    # Packing and n-grams join the name only when used: a run without them keeps the name every
    # release gives it, so a trainer restarted under a newer bert_tf re-attaches to its job.
    if task.pack_sequences:
        shape += [True, task.max_instances_per_row]
    if task.ngram_mask:
        shape += ["ngram_mask", task.ngram_mask]
    return "bert_tf_pretraining_" + hashlib.sha1(json.dumps(shape).encode()).hexdigest()[:16]


def _through_data_service(dataset_fn, job):
    """Wraps a training dataset_fn so its pipeline runs on the tf.data service.

    Every trainer registers the same, unsharded pipeline (one input pipeline, this replica's
    batch size): the service, not the file shard, splits the input between trainers.
    """
    job_name = _data_service_job_name(job)
    service = job.task.tf_data_service
    logging.info("Training input from the tf.data service at %s, job %s", service, job_name)

    def service_dataset_fn(input_context):
        whole = tf.distribute.InputContext(
            num_input_pipelines=1, input_pipeline_id=0,
            num_replicas_in_sync=input_context.num_replicas_in_sync)
        return dataset_fn(whole).apply(tf.data.experimental.service.distribute(
            processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC,
            service=service, job_name=job_name))
    return service_dataset_fn


def _check_input(dataset_fn, task, is_training):
    """Builds the pipeline once up front so a bad glob or record fails before training.

    Returns a dataset_fn that hands this pipeline to its first caller with a single input
    pipeline and replica (the same pipeline: nothing to shard, the per-replica batch is the
    global one) instead of building it again; a raw-text pipeline takes seconds to build.
    """
    name, patterns = input_flags(task, is_training)
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
    # The whole pipeline, without handing it over (a tf.data.Dataset reads anew each time).
    reusing_dataset_fn.pipeline = lambda: unused[0] if unused else dataset_fn(None)
    return reusing_dataset_fn


def resolve_casing(job):
    """The casing the run tokenizes with: --do_lower_case when given, else the casing
    --output_dir's run recorded (a resume), else --init_checkpoint's, else a tokenizer.json
    --vocab_file's, else True for raw text and None (not known) for TFRecords, which
    create_pretraining_data tokenized.

    Raises:
      FlagValueError: a given --do_lower_case contradicts --init_checkpoint's or the
        tokenizer.json's recorded casing (naming both).
    """
    task = job.task
    casing = task.do_lower_case
    if casing is None and run_directory.has_checkpoint(job.output_dir or ""):
        casing, where = run_directory.recorded_casing(job.output_dir)
        if casing is not None:
            logging.info("--do_lower_case unset: %s, as --output_dir=%s records (its %s)",
                         casing, job.output_dir, where)
    try:
        casing = interop.casing_of(casing, task.init_checkpoint)
    except InteropError as e:
        raise FlagValueError(str(e)) from None
    if task.vocab_file:
        try:
            recorded = tokenizer_files.file_casing(task.vocab_file, casing,
                                                   f"--vocab_file={task.vocab_file}")
        except ValueError as e:
            raise FlagValueError(str(e)) from None
        if recorded is not None:
            casing = recorded
    if casing is None and reads_text(task):
        casing = True
    return casing


def run_record(job, config):
    """The RunRecord of this run (bert_tf.run_directory): what a resume of --output_dir must
    share with it. Takes the resolved casing (resolve_casing) and backend."""
    task, trainer = job.task, job.trainer
    return run_directory.RunRecord(
        job="pretraining", command=run_directory.PRETRAINING_COMMAND,
        model_config=config.to_dict(),
        tokenizer_sha256=(run_directory.tokenizer_digest(task.vocab_file)
                          if task.vocab_file else None),
        do_lower_case=task.do_lower_case,
        settings={"max_seq_length": task.max_seq_length,
                  "max_predictions_per_seq": max_predictions(task),
                  "train_batch_size": trainer.train_batch_size,
                  "gradient_accumulation_steps": trainer.gradient_accumulation_steps,
                  # What each step trains on: a resume continues the run's ramp.
                  "batch_size_ramp": trainer.batch_size_ramp or "none",
                  "use_next_sentence_label": task.use_next_sentence_label,
                  "sentence_order_prediction": task.sentence_order_prediction,
                  "span_boundary_objective": task.span_boundary_objective,
                  "bag_of_words_weight": task.bag_of_words_weight,
                  "full_sentences": task.full_sentences,
                  "pack_sequences": task.pack_sequences, "optimizer": trainer.optimizer,
                  "backend": job.runtime.backend, "objective": task.objective,
                  **_electra_settings(task, config),
                  # Seconds; a schedule on steps and one on time cannot continue each other.
                  "time_budget": time_budget_seconds(trainer) or "none"},
        init_checkpoint=task.init_checkpoint)


def _electra_settings(task, config):
    """The generator's width and the loss weight an ELECTRA run records (none for MLM)."""
    if task.objective != "electra":
        return {}
    width = generator_config(config, task.generator_hidden_size).hidden_size
    return {"generator_hidden_size": width,
            "discriminator_weight": task.discriminator_weight}


def _build_pretrainer(task, encoder):
    """The model --objective trains on `encoder`."""
    if task.objective == "electra":
        return ElectraPretrainer(encoder, generator_hidden_size=task.generator_hidden_size,
                                 discriminator_weight=task.discriminator_weight)
    return BertPretrainer(encoder, use_next_sentence_label=task.use_next_sentence_label,
                          sentence_order_prediction=task.sentence_order_prediction,
                          span_boundary_objective=task.span_boundary_objective,
                          bag_of_words_weight=task.bag_of_words_weight)


def _metrics_fn(task):
    """metrics_fn(sums, count) of the training loop for --objective."""
    if task.objective == "electra":
        return electra_metrics
    return functools.partial(pretraining_metrics,
                             sentence_order_prediction=task.sentence_order_prediction)


def pretrain(job, flags_text=None):
    """Runs pre-training and/or evaluation as the flags say; returns the results dict.

    Args:
      job: the PretrainingConfig (not changed: the run resolves its backend and casing in a
        copy).
      flags_text: the command line as a flagfile, saved to output_dir/run_pretraining.flags
        so the run's every setting is on record next to its checkpoints.

    Returns:
      dict written to output_dir/results.json; of a run without --do_train (evaluation only),
      the line it adds to output_dir/eval_only_results.jsonl (_evaluate_only).
    """
    start = time.time()
    config = model_files.read_model_config(model_files.config_source(job.task))
    validate_options(job, config)
    # A copy with the backend and casing resolved, in the sections that hold them.
    job = dataclasses.replace(
        job, runtime=dataclasses.replace(job.runtime,
                                         backend=runtime.resolve_backend(job.runtime)),
        task=dataclasses.replace(job.task, do_lower_case=resolve_casing(job)))
    task, trainer = job.task, job.trainer
    record = run_record(job, config)
    if job.do_train:
        run_directory.check_resume(job.output_dir, record, task.vocab_file,
                                   backend=job.runtime.backend)
    else:
        _check_evaluation_source(job)
    # The strategy (or JAX's processes and devices) comes before any TensorFlow op:
    # multi-worker collectives must be configured before the runtime starts.
    job_runtime = runtime_setup.make_runtime(
        job.runtime, {"train_batch_size": trainer.train_batch_size,
                      "eval_batch_size": trainer.eval_batch_size}, trains=job.do_train)
    if job.do_train and _budget_spent(job, job_runtime):
        return None
    run_directory.check_writable(job.output_dir)
    # Every input is built (and so checked) before the directory is taken: a refused run
    # leaves nothing behind.
    phases = [(True, trainer.train_batch_size)] if job.do_train else []
    phases += [(False, trainer.eval_batch_size)] if job.do_eval else []
    dataset_fns = {}
    masking_progress = _masking_progress(task)
    for is_training, batch_size in phases:
        dataset_fns[is_training] = _check_input(
            _make_dataset_fn(job, config, is_training=is_training, batch_size=batch_size,
                             masking_progress=masking_progress),
            task, is_training)
    if job.do_train and task.tf_data_service:
        dataset_fns[True] = _through_data_service(dataset_fns[True], job)
    # The chief owns the directory for the run; workers share its ownership.
    with run_directory.owned(job.output_dir, job_runtime.chief):
        if job.do_train:
            # Again, now that no other run can change the record meanwhile.
            run_directory.check_resume(job.output_dir, record, task.vocab_file,
                                       backend=job.runtime.backend)
        try:
            if not job.do_train:
                return _evaluate_only(job, config, job_runtime, dataset_fns[False], start)
            return _pretrain(job, config, job_runtime, dataset_fns, record, flags_text, start,
                             masking_progress)
        except tf.errors.InvalidArgumentError as e:
            from bert_tf.data.pretraining import record_dataset

            problem = record_dataset.out_of_vocabulary(e)
            if problem is None:
                raise
            raise FlagValueError(f"--input_file: {problem}") from None


def _masking_progress(task):
    """The share of training done that a masking schedule (--masked_lm_prob_end) reads, a
    float32 scalar on the host the input pipeline runs on; None without a schedule."""
    if task.masked_lm_prob_end is None:
        return None
    logging.info("--masked_lm_prob_end=%g: raw text is masked at %g%% at the start of training "
                 "and %g%% at its end", task.masked_lm_prob_end, 100 * task.masked_lm_prob,
                 100 * task.masked_lm_prob_end)
    with tf.device("/cpu:0"):
        return tf.Variable(0.0, trainable=False, dtype=tf.float32, name="masking_progress")


def _budget_spent(job, job_runtime):
    """True (after saying so) when --output_dir's run already spent its --time_budget: the
    resume has nothing left to train and writes nothing."""
    budget = time_budget_seconds(job.trainer)
    if budget is None:
        return False
    state = job_runtime.saved_run_state(job.output_dir)
    spent = state.get("seconds_spent", 0.0)
    if spent < budget and state.get("schedule_fraction", 0.0) < 1.0:
        return False
    logging.info("--output_dir=%s already spent its --time_budget=%s (%s): nothing is left to "
                 "train; nothing was written. To train more, start a new run with "
                 "--init_checkpoint=%s", job.output_dir, job.trainer.time_budget,
                 format_duration(spent), job.output_dir)
    return True


def _pretrain(job, config, job_runtime, dataset_fns, record, flags_text, start,
              masking_progress=None):
    """pretrain() of a run that trains, once the flags and inputs are checked and the directory
    is owned; `masking_progress` (a tf.Variable or None) is what the masking schedule reads."""
    task, trainer = job.task, job.trainer
    budget = time_budget_seconds(trainer)
    encoder, model, optimizer = _build_model(job, config, job_runtime, budget)

    chief = job_runtime.chief
    output = functools.partial(run_directory.path, job.output_dir)

    def write_run_files():
        # Once the run's checkpoint is restored: a resume refused for it writes nothing.
        if not chief:
            return
        config.to_json_file(output(run_directory.CONFIG_FILE))
        if flags_text:
            write_text_atomic(output(run_directory.PRETRAINING_FLAGS_FILE), flags_text)
        run_directory.write_record(job.output_dir, record)
        if task.vocab_file:
            # vocab.txt for a WordPiece file, tokenizer.json for byte-level BPE.
            tokenizer_files.write_tokenizer_file(job.output_dir, None, task.vocab_file)

    results = {"num_train_steps": trainer.num_train_steps}
    if budget:
        logging.info("--time_budget=%s: training stops when it is spent and the learning rate "
                     "follows it (warmup %.0f%% of it); --num_train_steps and "
                     "--num_warmup_steps are not used", trainer.time_budget,
                     100 * budget_warmup_proportion(trainer))
        del results["num_train_steps"]
    loop_config = TrainLoopConfig(
        num_train_steps=trainer.num_train_steps,
        steps_per_loop=runtime_setup.steps_per_loop(trainer),
        save_checkpoints_steps=trainer.save_checkpoints_steps, log_steps=trainer.log_steps,
        global_batch_size=trainer.train_batch_size,
        gradient_accumulation_steps=trainer.gradient_accumulation_steps,
        jit_compile=job.runtime.jit_compile, init_checkpoint=task.init_checkpoint,
        time_budget_seconds=budget, batch_size_ramp=trainer.batch_size_ramp)
    train_results = controller.train(
        runtime=job_runtime, model=model, optimizer=optimizer, loss_fn=losses.pretraining_loss_fn,
        dataset_fn=dataset_fns[True], output_dir=job.output_dir, loop_config=loop_config,
        metrics_fn=_metrics_fn(task),
        warm_start_fn=functools.partial(_warm_start, task.do_lower_case),
        skip_consumed_input=not task.tf_data_service, start_time=start,
        budget_reserve_fn=(_budget_reserve_fn(job, budget, dataset_fns.get(False))
                           if budget else None),
        on_restored=write_run_files,
        on_progress=None if masking_progress is None else masking_progress.assign)
    results["global_step"] = train_results.pop("step")
    if budget and results["global_step"] == 0:
        # Models of random weights and exit 0 would pass for a trained run.
        raise FlagValueError(
            f"--time_budget={trainer.time_budget} was spent before the first training step "
            f"({train_results['seconds_spent']:.0f} s of set-up: reading the input, building "
            "and compiling the model); give a longer budget")
    if "instances_per_row" in train_results and "examples_per_second" in train_results:
        train_results["instances_per_second"] = (train_results["examples_per_second"]
                                                 * train_results["instances_per_row"])
        logging.info("Packed rows: %.2f instances per row, %.1f instances/s",
                     train_results["instances_per_row"], train_results["instances_per_second"])
    results["train"] = train_results
    if masking_progress is not None:
        # The rate of the last batches made: the schedule's end only when training ran to it.
        done = min(1.0, max(0.0, float(masking_progress.numpy())))
        results["masking_rate"] = {"first": task.masked_lm_prob,
                                   "last": masking_recipe(task).masked_lm_prob_at(done)}
    results["tokens"] = (train_results["micro_batches"] * trainer.train_batch_size
                         * task.max_seq_length)
    seconds_before = train_results["seconds_spent"] - train_results["wall_time_seconds"]

    if job.do_eval:
        results["eval"] = _evaluate(job, model, job_runtime, dataset_fns[False],
                                    results["global_step"])

    if chief:
        for keras_model, name in ((model, run_directory.PRETRAINER_FILE),
                                  (encoder, run_directory.ENCODER_FILE)):
            with run_directory.writing_after_training(job.output_dir, output(name)):
                checkpointing.save_keras_model(keras_model, output(name))
    results["wall_time_seconds"] = time.time() - start
    if budget:
        results["time_budget_seconds"] = budget
        results["seconds_spent"] = seconds_before + results["wall_time_seconds"]
    if chief:
        with run_directory.writing_after_training(job.output_dir,
                                                  output(run_directory.RESULTS_FILE)):
            write_text_atomic(output(run_directory.RESULTS_FILE),
                              json.dumps(results, indent=2, sort_keys=True) + "\n")
    return results


def _budget_reserve_fn(job, budget, eval_dataset_fn):
    """The controller's `budget_reserve_fn` of a budgeted run (`_seconds_after_training`),
    warning once when it keeps back more than half of `budget` (seconds)."""
    eval_batches = _eval_batches(job, eval_dataset_fn) if job.do_eval else 0
    warned = []

    def reserve(seconds_per_batch, compile_seconds):
        seconds = _seconds_after_training(job, eval_batches, seconds_per_batch,
                                          compile_seconds)
        if seconds > budget / 2 and not warned:
            warned.append(seconds)
            logging.warning(
                "--time_budget=%s: the evaluation after training (%d batches of %d) and the "
                "model files are estimated at %.0f s, more than half the budget; fewer "
                "--max_eval_steps leave training more", job.trainer.time_budget, eval_batches,
                job.trainer.eval_batch_size, seconds)
        return seconds
    return reserve


def _eval_batches(job, dataset_fn):
    """The batches the evaluation after training reads: --max_eval_steps, or fewer when the
    held-out input ends first (counted by reading it once, before training)."""
    dataset = dataset_fn.pipeline().take(job.trainer.max_eval_steps)
    return int(dataset.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))


def _seconds_after_training(job, eval_batches, seconds_per_batch, compile_seconds):
    """What a budgeted run needs after its last step, estimated from the training step's
    speed and compilation: the evaluation of `eval_batches` batches (forward passes only:
    about a third of a training step per batch of the same size, and half the compilation)
    and the two model files."""
    seconds = 2.0
    if job.do_eval:
        trainer = job.trainer
        batches = eval_batches * trainer.eval_batch_size / trainer.train_batch_size
        seconds += compile_seconds / 2 + batches * seconds_per_batch / 3
    return seconds


def _warm_start(do_lower_case, path, target):
    return interop.warm_start(path, target, do_lower_case=do_lower_case)


def _build_model(job, config, job_runtime, budget=None):
    """(encoder, pretrainer, optimizer) of the run, in the runtime's scope; the learning
    rate follows `budget` (seconds) when given."""
    trainer = job.trainer
    with job_runtime.scope():
        encoder = build_encoder(config)
        model = _build_pretrainer(job.task, encoder)
        optimizer = create_optimizer(
            trainer.learning_rate, trainer.num_train_steps, trainer.num_warmup_steps,
            budget_warmup_proportion=budget_warmup_proportion(trainer) if budget else None,
            **trainer.optimizer_options())
    return encoder, model, optimizer


def _evaluate(job, model, job_runtime, dataset_fn, step):
    """The evaluation metrics of `model` at `step`, logged and (by the chief) written as
    TensorBoard scalars under summaries/eval."""
    metrics = job_runtime.evaluate(
        model=model, loss_fn=losses.pretraining_loss_fn, dataset_fn=dataset_fn,
        max_steps=job.trainer.max_eval_steps, metrics_fn=_metrics_fn(job.task))
    logging.info("Eval at step %d: %s", step, format_metrics(metrics))
    if job_runtime.chief:
        write_summaries(run_directory.path(job.output_dir, run_directory.SUMMARIES_DIR,
                                           "eval"), step, metrics)
    return metrics


def _check_evaluation_source(job):
    """Before anything is written: an evaluation-only run (--do_eval without --do_train)
    evaluates --output_dir's own checkpoints, which must be this backend's loop's, else the
    weights of --init_checkpoint.

    Raises:
      run_directory.ResumeMismatchError naming both backends; FlagValueError when there is
      nothing to evaluate.
    """
    run_directory.check_checkpoints_backend(job.output_dir, job.runtime.backend,
                                            evaluating=True)
    if not (job.task.init_checkpoint or run_directory.has_checkpoint(job.output_dir)):
        raise FlagValueError(f"--do_eval without --do_train needs a checkpoint in "
                             f"--output_dir={job.output_dir} or --init_checkpoint")


def _evaluate_only(job, config, job_runtime, dataset_fn, start):
    """--do_eval without --do_train, once the directory is owned: evaluates --output_dir's
    newest readable checkpoint (else --init_checkpoint's weights) and writes only what it
    found, beside the run's own results: a line of eval_only_results.jsonl and TensorBoard
    scalars under summaries/eval. The run's results.json, record, flags and models are never
    written.

    Returns:
      The results: evaluated (the checkpoint or --init_checkpoint), global_step, eval_input,
      eval (the metrics) and wall_time_seconds.
    """
    _, model, optimizer = _build_model(job, config, job_runtime)
    evaluated, step = _restore_for_eval(job, model, optimizer, job_runtime)
    name, patterns = input_flags(job.task, is_training=False)
    results = {"evaluated": evaluated, "global_step": step, "eval_input": f"--{name}={patterns}",
               "eval": _evaluate(job, model, job_runtime, dataset_fn, step)}
    results["wall_time_seconds"] = time.time() - start
    if job_runtime.chief:
        run_directory.append_eval_only_results(job.output_dir, results)
    return results


def _restore_for_eval(job, model, optimizer, job_runtime):
    """(what was restored, its step): the newest readable checkpoint of --output_dir (the
    run's own are evaluated whatever --init_checkpoint says), else --init_checkpoint at step 0.

    Raises:
      CheckpointError: --output_dir holds checkpoints and none of them can be read.
    """
    output_dir, init_checkpoint = job.output_dir, job.task.init_checkpoint
    if run_directory.has_checkpoint(output_dir):
        latest = job_runtime.restore_latest(output_dir, model, optimizer)
        if latest is None:
            raise checkpointing.CheckpointError(
                f"none of the checkpoints in --output_dir={output_dir} could be read "
                f"({', '.join(run_directory.checkpoint_names(output_dir))}; the warnings above "
                "say why): nothing was evaluated")
        if init_checkpoint:
            logging.warning("--init_checkpoint=%s is not read: --output_dir=%s holds the run's "
                            "own checkpoints, which are evaluated", init_checkpoint, output_dir)
        logging.info("Evaluating %s", latest)
        return latest, int(ops.convert_to_numpy(optimizer.iterations))
    interop.warm_start(init_checkpoint, model, do_lower_case=job.task.do_lower_case)
    return init_checkpoint, 0
