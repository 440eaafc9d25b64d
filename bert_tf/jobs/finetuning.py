"""The fine-tuning driver: one run script for every task (classification, tagging, SQuAD).

`run_task(runner, job)` checks the settings, finds the model files, starts the runtime, owns
--output_dir, then runs the task through the same phases: read the training data (its labels)
-> check that a resumed run is the same run -> read and convert the other splits -> build the
model -> train (evaluating at every checkpoint, keeping the best weights) or restore -> evaluate
and predict -> write the run files. A task (bert_tf.jobs.classification, tagging, squad) is a
small `TaskRunner` subclass that says what is task-specific: its data, model, loss, metrics and
predictions. Every run leaves the same kind of directory (bert_tf.run_directory names its files):

  ckpt-<step>, checkpoint       training checkpoints (step-exact resume)
  best/                         the best weights by the task's metric and their metrics.json
  summaries/{train,eval}        TensorBoard scalars
  features/                     cached TFRecords of the converted examples (classifier, tagging)
  model.keras                   the final model (the best one when there was evaluation)
  bert_config.json, vocab.txt   the model's files, so the directory is an --init_checkpoint
    (or tokenizer.json)         (tokenizer.json: a byte-level BPE vocabulary, e.g. ModernBERT's)
  task_info.json                task, labels, casing and sequence length (for serving)
  --export_dir (optional)       a SavedModel of model.keras with serving signatures
  results.json                  metrics, steps, examples/s
  eval_results.txt              'name = value' metrics (classifier, tagging)
  <cli>.flags                   the flags of the run
  bert_tf_run.json              the run record: what a resumed run must share with this one
                                (written when training starts)
  .bert_tf_run.lock             held by the run while it runs (one run per directory)
  eval_only_results.jsonl       a line per run that evaluated or predicted without training
                                (such a run writes its predictions and this line, never the
                                files above)

The functions take the run's config (`job`: FinetuningConfig or a task's subclass of it, whose
task, trainer and runtime sections are bert_tf.jobs.sections'), or the one section or the few
values they read; the field names are the flag names, so errors name the flag at fault. Nothing
here reads flags.
"""
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf import fileio, model_directory, run_directory, serving
from bert_tf.jobs import model_files, runtime_setup, tokenizer_setup
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.finetuning_config import check_settings
from bert_tf.data.tasks import feature_records
from bert_tf.fileio import write_text_atomic
from bert_tf.interop import InteropError, casing_of, check_weights_readable, warm_start
from bert_tf.modeling import build_encoder
from bert_tf.training import checkpointing, task_loop
from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.optimization import create_optimizer


@dataclasses.dataclass
class RunContext:
    """What every phase of a fine-tuning run needs, resolved once from the flags."""

    runtime: object  # the training.runtime.Runtime
    config: object
    # The tokenizer file (vocab.txt or tokenizer.json) and its tokenizer: a WordpieceTokenizer
    # or a byte-level BpeTokenizer (bert_tf.text.load_tokenizer).
    vocab_file: str
    tokenizer: object
    # --length_buckets resolved (runtime_setup.resolve_length_buckets) for training batches and
    # for evaluation and prediction; None: off.
    length_buckets: list | None = None
    eval_length_buckets: list | None = None

    @property
    def chief(self):
        return self.runtime.chief



def prepare(job):
    """Checks the settings (finetuning_config.check_settings, then those that need the model's
    files or TensorFlow), finds the model files, starts the runtime; returns a context.

    The command checks --output_dir and --export_dir against the output rule first
    (bert_tf.cli.outputs.check_finetuning_dirs: never another command's run, never an input).
    An unset job.task.do_lower_case (None) is set to the casing in force (what
    --init_checkpoint records, else the tokenizer file's; True for a vocab.txt), so every later
    phase reads one value.

    Raises:
      FlagValueError naming the flag at fault.
    """
    check_settings(job)
    task, trainer = job.task, job.trainer
    if runtime_setup.check_backend(job.runtime) == "jax" and job.export_dir and not job.do_train:
        # A JAX run's export is bert-tf-export of the model.keras it writes (see export_run).
        raise FlagValueError("--export_dir on a --backend=jax run exports the model it trains: "
                             "add --do_train, or export a trained run with bert-tf-export "
                             "--model_dir=RUN_DIR")
    files_from = task
    if not (job.do_train or task.init_checkpoint or task.bert_config_file) and (
            fileio.isfile(run_directory.path(job.output_dir, run_directory.CONFIG_FILE))):
        # Evaluating or predicting with a run's own weights: its config, tokenizer and casing.
        files_from = dataclasses.replace(task, init_checkpoint=job.output_dir)
    source = files_from.init_checkpoint
    try:
        # What the model starts from, before any file is looked up beside it.
        if source:
            check_weights_readable(source)
    except (ValueError, InteropError) as e:
        raise FlagValueError(str(e)) from None
    config_file, vocab_file = model_files.resolve_model_files(files_from)
    try:
        if source and fileio.exists(_checkpoint_dir(source)):
            task.do_lower_case = casing_of(task.do_lower_case, source)
    except (ValueError, InteropError) as e:
        raise FlagValueError(str(e)) from None
    tokenizer, task.do_lower_case = tokenizer_setup.load_tokenizer(vocab_file,
                                                                   task.do_lower_case)
    config = model_files.load_config(config_file, task.max_seq_length)
    buckets = runtime_setup.resolve_length_buckets(task.length_buckets, task.max_seq_length,
                                                   config)
    run_directory.check_writable(job.output_dir)
    # The strategy comes before any TensorFlow op: multi-worker collectives must be configured
    # before the runtime starts.
    job_runtime = runtime_setup.make_runtime(
        job.runtime, {"train_batch_size": trainer.train_batch_size}, trains=job.do_train,
        varying_shapes=task.length_buckets not in ("off", None))
    if tokenizer.vocab_size > config.vocab_size:
        raise FlagValueError(f"vocab_size={config.vocab_size} in {config_file} is smaller than "
                             f"the {tokenizer.vocab_size} tokens of {vocab_file}")
    eval_buckets = None
    if buckets is not None:
        buckets = runtime_setup.resolve_length_buckets(
            task.length_buckets, task.max_seq_length, config, job_runtime)
        eval_buckets = runtime_setup.resolve_length_buckets(
            task.length_buckets, task.max_seq_length, config, job_runtime, training=False)
    return RunContext(job_runtime, config, vocab_file, tokenizer, buckets, eval_buckets)


def _checkpoint_dir(path):
    return path if fileio.isdir(path) else os.path.dirname(path) or "."


def owned(context, output_dir):
    """Holds --output_dir's lock (`run_directory.owned`, taken by the chief) for the body.

    A second run on the same --output_dir fails with DirectoryInUseError naming the run that
    holds it, before it reads or writes anything there; a killed run's lock is taken over.
    """
    return run_directory.owned(output_dir, context.chief)


def run_record(context, job, cli_name, task_name, labels, task_settings=None):
    """The RunRecord of this fine-tuning run (bert_tf.run_directory): what a resume of
    --output_dir must share with it: the command, the task, the labels (the head's outputs),
    the model config, the tokenizer (its tokens' digest: a CRLF copy is the same), the casing,
    --max_seq_length, --trainable_encoder, --optimizer (the optimizer's slots),
    --train_batch_size and --gradient_accumulation_steps (what a step means, for an exact
    resume).

    Args:
      task_name: the task as the record names it (e.g. "sst-2", "tagging", "squad");
      labels: list of str or None.
      task_settings: the task's own settings a resume must share (e.g. --multi_label).
    """
    task, trainer = job.task, job.trainer
    return run_directory.RunRecord(
        job="finetuning", command=cli_name, model_config=context.config.to_dict(),
        tokenizer_sha256=context.tokenizer.digest(),
        do_lower_case=bool(task.do_lower_case), task=task_name,
        labels=None if labels is None else list(labels),
        settings={"max_seq_length": int(task.max_seq_length),
                  "trainable_encoder": bool(task.trainable_encoder),
                  "optimizer": trainer.optimizer,
                  "train_batch_size": int(trainer.train_batch_size),
                  "gradient_accumulation_steps": int(trainer.gradient_accumulation_steps),
                  **(task_settings or {})},
        init_checkpoint=task.init_checkpoint)


def check_resume(context, output_dir, record):
    """Before training: a run resuming --output_dir's checkpoints must be the run that wrote
    them (bert_tf.run_directory.check_resume against `record`, this run's run_record). Reads
    only; a run that does not train has nothing to check.

    Raises:
      ResumeMismatchError naming every difference with both values.
    """
    run_directory.check_resume(output_dir, record, context.vocab_file,
                               backend=context.runtime.backend)


def build_model(context, job, make_model, num_train_steps=None):
    """The task model (and its optimizer when training) under the runtime's scope.

    Args:
      context: the RunContext.
      job: the run's config: job.task.trainable_encoder, and the optimizer's settings in
        job.trainer (learning_rate, warmup_proportion and its optimizer_options()).
      make_model: `(encoder) -> task model`.
      num_train_steps: steps of the learning-rate schedule; None: no optimizer.

    Returns:
      (model, optimizer or None). With --trainable_encoder=false the encoder is frozen, so
      only the head is in model.trainable_variables and only it is trained.
    """
    trainer = job.trainer
    with context.runtime.scope():
        encoder = build_encoder(context.config)
        model = make_model(encoder)
        if not job.task.trainable_encoder:
            encoder.trainable = False
            logging.info("--trainable_encoder=false: training only the %d head variable(s)",
                         len(model.trainable_variables))
        optimizer = None
        if num_train_steps:
            optimizer = create_optimizer(
                trainer.learning_rate, num_train_steps,
                task_loop.num_warmup_steps(num_train_steps, trainer.warmup_proportion),
                **trainer.optimizer_options())
    return model, optimizer


def warm_start_fn(do_lower_case):
    """`(init_checkpoint, model) -> report`: bert_tf.interop.warm_start with the run's casing
    (--do_lower_case as prepare resolved it).

    Reads every format --init_checkpoint may name (bert_tf run directories, checkpoints and
    .keras files, original TF1 checkpoints, Hugging Face and keras-hub directories); the encoder
    must load completely, a task head loads only from a checkpoint with the same kind of head.
    """
    def load(init_checkpoint, model):
        return warm_start(init_checkpoint, model, do_lower_case=do_lower_case)
    return load


def train(context, job, *, model, optimizer, loss_fn, dataset_fn, num_train_steps,
          steps_per_epoch, evaluate_fn=None, best_metric=None):
    """task_loop.fine_tune with the run's settings; checkpoints once per epoch by default.

    num_train_steps and steps_per_epoch count optimizer steps of
    runtime_setup.effective_train_batch_size examples (micro-batches x accumulation).
    """
    task, trainer = job.task, job.trainer
    loop_config = TrainLoopConfig(
        num_train_steps=num_train_steps, steps_per_loop=runtime_setup.steps_per_loop(trainer),
        save_checkpoints_steps=trainer.save_checkpoints_steps or steps_per_epoch,
        log_steps=trainer.log_steps, global_batch_size=trainer.train_batch_size,
        gradient_accumulation_steps=trainer.gradient_accumulation_steps,
        jit_compile=job.runtime.jit_compile, init_checkpoint=task.init_checkpoint)
    return task_loop.fine_tune(
        model=model, optimizer=optimizer, loss_fn=loss_fn, train_dataset_fn=dataset_fn,
        runtime=context.runtime, output_dir=job.output_dir, loop_config=loop_config,
        evaluate_fn=evaluate_fn, best_metric=best_metric,
        warm_start_fn=warm_start_fn(task.do_lower_case))


def restore_trained(job, model, best_metric, job_runtime):
    """Weights for a run without --do_train: --output_dir's best, else its newest readable
    checkpoint, else --init_checkpoint, which must hold the task's head unless
    --allow_untrained_head. Returns the step.

    A checkpoint that cannot be read (truncated, corrupt) is skipped with a warning naming it,
    in favour of the one before it (the runtime's restore_latest).
    """
    task, output_dir = job.task, job.output_dir
    best = task_loop.BestModelKeeper(model, output_dir, best_metric, write=False).restore()
    latest = None if best is not None else job_runtime.restore_latest(output_dir, model)
    if best is not None or latest:
        if task.init_checkpoint:
            logging.warning("--init_checkpoint=%s is not read: --output_dir=%s holds the run's "
                            "own fine-tuned weights, which are used", task.init_checkpoint,
                            output_dir)
        if best is not None:
            return best["step"]
        logging.info("Restored %s", latest)
        return run_directory.checkpoint_step(latest)
    if task.init_checkpoint:
        logging.warning("No fine-tuned weights in --output_dir=%s: using --init_checkpoint=%s",
                        output_dir, task.init_checkpoint)
        report = warm_start_fn(task.do_lower_case)(task.init_checkpoint, model)
        if report.newly_initialized and not task.allow_untrained_head:
            raise FlagValueError(
                f"--do_eval/--do_predict without --do_train: --output_dir={output_dir} "
                f"holds no fine-tuned weights and --init_checkpoint={task.init_checkpoint} "
                f"has no {type(model).__name__} head ({len(report.newly_initialized)} head "
                "variables would be random, e.g. "
                f"{report.newly_initialized[0]}); fine-tune first (--do_train), point "
                "--init_checkpoint at a fine-tuned run, or pass --allow_untrained_head")
        return 0
    raise FlagValueError(f"--do_eval/--do_predict without --do_train need fine-tuned weights in "
                         f"--output_dir={output_dir} or an --init_checkpoint")


def read_task_info(output_dir, init_checkpoint=None, quiet=False):
    """The task_info.json of --output_dir or, failing that, of the --init_checkpoint directory
    (for prediction runs that need the label list of an earlier training run); for an
    --init_checkpoint that is a Hugging Face task model, the task and labels its config.json
    names (its id2label, logged unless `quiet`); None if none."""
    path = task_info_path(output_dir, init_checkpoint)
    if path is not None:
        return task_info_at(path)
    if not model_directory.is_huggingface(init_checkpoint):
        return None
    from bert_tf.interop import huggingface

    task, labels = huggingface.task_labels(init_checkpoint)
    if task is None:
        return None
    if labels and not quiet:
        logging.info("Labels %s: the id2label of %s", ",".join(labels),
                     os.path.join(init_checkpoint, huggingface.CONFIG_FILE))
    return {"task": task, "labels": labels}


def task_info_at(path):
    """The JSON object of the task_info.json at `path` (from `task_info_path`)."""
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)


def task_info_path(output_dir, init_checkpoint=None):
    """The path `read_task_info` reads (its run's, or RUN/best/model-N's run's), or None."""
    for directory in run_directory.model_runs(output_dir, init_checkpoint):
        path = run_directory.path(directory, run_directory.TASK_INFO_FILE)
        if tf.io.gfile.exists(path):
            return path
    return None


def free_names(directory, names, overwrite):
    """The names a prediction's files take in `directory`: `names`, or (an earlier
    prediction's files being there and kept, `overwrite` False: --overwrite) the first
    `<stem>-<n><ext>` of each that none of them takes yet."""
    if overwrite or not any(fileio.exists(os.path.join(directory, n)) for n in names):
        return names
    number = 2
    while True:
        numbered = [f"{stem}-{number}{ext}" for stem, ext in map(os.path.splitext, names)]
        if not any(fileio.exists(os.path.join(directory, n)) for n in numbered):
            # A script reading the first names would read the earlier prediction.
            logging.warning("%s holds an earlier prediction (%s): kept; this one is %s "
                            "(--overwrite replaces it)", directory, ", ".join(names),
                            ", ".join(numbered))
            return numbered
        number += 1


def timed(function):
    """Wraps a metrics function; the wrapper's `.seconds` is the last call's duration."""
    def wrapper(*args, **kwargs):
        start = time.time()
        result = function(*args, **kwargs)
        wrapper.seconds = time.time() - start
        return result
    wrapper.seconds = 0.0
    return wrapper


def sigmoid(logits):
    """Element-wise sigmoid in float64 (multi-label probabilities), no overflow."""
    return np.exp(-np.logaddexp(0.0, -np.asarray(logits, np.float64)))


def softmax(logits):
    """Row-wise softmax in float64, stable for large logits."""
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def write_run_files(context, job, model, kind, labels, cli_name, flags_text, export_fields,
                    **task_info):
    """The chief of a run that trained writes model.keras, bert_config.json, vocab.txt,
    task_info.json (the task `kind`, labels and the extra `task_info` fields, e.g. text_pair)
    and the flags; of every TensorFlow run, the --export_dir SavedModel (`export_fields`: its
    serving.export arguments; a JAX run's export: export_run). A run that did not train
    writes none of the run's files: they are the training run's."""
    if not context.chief:
        return
    output_dir, task = job.output_dir, job.task
    if job.do_train:
        # A file that cannot be written (a full disk) loses no training: the same command
        # resumes with nothing left to train and writes them.
        files = (f"the run's files in {output_dir} ({run_directory.CONFIG_FILE}, the tokenizer "
                 f"file, {run_directory.TASK_INFO_FILE}, {run_directory.flags_file(cli_name)})")
        model_file = run_directory.path(output_dir, run_directory.MODEL_FILE)
        with run_directory.writing_after_training(output_dir, files):
            model_files.copy_model_files(output_dir, context.runtime, context.config,
                                         context.vocab_file, context.tokenizer)
        with run_directory.writing_after_training(output_dir, model_file):
            checkpointing.save_keras_model(model, model_file)
        with run_directory.writing_after_training(output_dir, files):
            serving.write_task_info(output_dir, kind, do_lower_case=bool(task.do_lower_case),
                                    max_seq_length=task.max_seq_length, labels=labels,
                                    **task_info)
            if flags_text:
                write_text_atomic(run_directory.path(output_dir,
                                                     run_directory.flags_file(cli_name)),
                                  flags_text)
    # A JAX run's export comes last (export_run), once everything else is written.
    if job.export_dir and context.runtime.backend != "jax":
        serving.export(model, job.export_dir, tokenizer=context.tokenizer,
                       max_seq_length=task.max_seq_length, labels=labels, **export_fields)
        logging.info("Exported the model as a SavedModel to %s", job.export_dir)


def export_run(output_dir, export_dir, overrides):
    """A JAX run's --export_dir: bert-tf-export --model_dir=output_dir in a TensorFlow process
    (the text signatures are TensorFlow Text graphs, which a JAX process does not trace), once
    the run's files and results are written, so a failure loses none of them.

    Args:
      overrides: {bert-tf-export flag name: value} for the export settings that differ from
        what the run records in task_info.json.

    Raises:
      FlagValueError naming --export_dir and the command that retries the export.
    """
    command = [sys.executable, "-m", "bert_tf.cli.export_saved_model",
               f"--model_dir={output_dir}", f"--export_dir={export_dir}",
               *(f"--{k}={v}" for k, v in sorted(overrides.items()))]
    logging.info("Exporting under TensorFlow: bert-tf-export %s", " ".join(command[3:]))
    env = dict(os.environ, KERAS_BACKEND="tensorflow",
               # JAX holds the GPUs' memory; TensorFlow would claim it too, and exports on CPU.
               CUDA_VISIBLE_DEVICES="")
    # Flags for JAX's XLA; TensorFlow's XLA may not know them, and an export needs none.
    env.pop("XLA_FLAGS", None)
    done = subprocess.run(command, env=env, check=False)
    if done.returncode != 0:
        raise FlagValueError(
            f"--export_dir={export_dir}: the export under TensorFlow failed (exit status "
            f"{done.returncode}, its error above); the run's other files are written: retry "
            f"with bert-tf-export {' '.join(command[3:])}")
    logging.info("Exported the model as a SavedModel to %s", export_dir)


def write_results(context, output_dir, trained, results, eval_metrics):
    """results.json, and eval_results.txt ('name = value' lines as the original writes), in
    --output_dir; of a run that did not train (`trained` false), a line of
    eval_only_results.jsonl instead, beside them."""
    if not context.chief:
        return
    if not trained:
        run_directory.append_eval_only_results(output_dir, results)
        return
    results_file = run_directory.path(output_dir, run_directory.RESULTS_FILE)
    with run_directory.writing_after_training(output_dir, results_file):
        write_text_atomic(results_file, json.dumps(results, indent=2, sort_keys=True) + "\n")
    if eval_metrics is not None:
        lines = [f"{name} = {value}" for name, value in sorted(eval_metrics.items())
                 if isinstance(value, (int, float))]
        lines.append(f"global_step = {results['global_step']}")
        text_file = run_directory.path(output_dir, run_directory.EVAL_RESULTS_TEXT_FILE)
        with run_directory.writing_after_training(output_dir, text_file):
            write_text_atomic(text_file, "\n".join(lines) + "\n")


def records_train_dataset_fn(path, spec, batch_size, seed, length_buckets, per_example=()):
    """The training `dataset_fn(input_context=None)` over cached feature records at `path`
    (feature_records.records_dataset: shuffled with `seed` (--seed), repeating, the global
    `batch_size` (--train_batch_size) batched per replica, in `length_buckets`; the
    `per_example` features never cut)."""
    def dataset_fn(input_context=None):
        return feature_records.records_dataset(
            path, spec, batch_size=batch_size, is_training=True, seed=seed,
            input_context=input_context, length_buckets=length_buckets,
            per_example=per_example)
    return dataset_fn


class TaskRunner:
    """A fine-tuning task as run_task runs it: what differs between tasks, phase by phase.

    A subclass sets `cli_name` (names <cli_name>.flags and the command of the run record),
    `best_metric` (the evaluation metric that picks the best checkpoint) and `loss_fn` (a
    bert_tf.training.task_loop *_loss_fn), and implements the methods below, which run_task
    calls in the order they are listed. `labels` (None: no label set, e.g. regression or
    SQuAD) and `num_train_examples` (what training steps and epochs count) are set on the way.
    """

    cli_name = None
    best_metric = None
    loss_fn = None
    # The task of task_info.json when the class fixes it ("tagging", "squad"); None: it
    # depends on the data (classification or regression).
    run_kind = None

    def __init__(self, job):
        """Checks the task's own settings (of `job`, the run's config) before any work;
        raises FlagValueError."""
        self.job = job
        self.labels = None
        self.num_train_examples = None

    def read_training_data(self, context):
        """Reads what fixes the model's outputs (the training split and its labels)."""

    @property
    def resume_name(self):
        """The task as the run record holds it (a resumed run must match)."""
        raise NotImplementedError

    def resume_settings(self):
        """The task's own settings the run record holds (a resumed run must match)."""
        return {}

    def prepare_inputs(self, context):
        """Reads and converts every split the run needs; sets num_train_examples."""
        raise NotImplementedError

    def make_model(self, encoder):
        """The task model on `encoder`."""
        raise NotImplementedError

    def attach(self, model, context):
        """Keeps `model` for evaluation and prediction (called once it is built)."""
        self.model = model

    def results(self):
        """The results.json fields known before training (data sizes, settings)."""
        raise NotImplementedError

    def train_dataset_fn(self, context):
        """`(InputContext) -> repeating dataset` of training batches."""
        raise NotImplementedError

    def evaluate_fn(self):
        """`() -> metrics` of the current weights on the dev data, or None (no evaluation)."""
        return None

    def record_training(self, results, outcome, num_train_steps):
        """Adds fine_tune's outcome to results."""
        results.update(global_step=outcome["step"], num_train_steps=num_train_steps,
                       train=outcome["train"], evaluations=outcome["evaluations"])
        if outcome["best"] is not None:
            results["best_step"] = outcome["best"]["step"]

    def evaluate_and_predict(self, context, results, outcome):
        """Final evaluation and predictions (files written by the chief); returns the metrics
        for eval_results.txt, or None."""
        raise NotImplementedError

    def run_files(self):
        """(task kind, export_fields: the export's serving.export arguments, or None for the
        task_info fields; extra task_info fields) for write_run_files."""
        raise NotImplementedError


def run_task(runner, job, flags_text=None):
    """Runs a fine-tuning task as its config says; returns the results dict (results.json).

    Args:
      runner: the task's TaskRunner made with `job` (it has checked its own settings).
      job: the run's config (a FinetuningConfig subclass with the task's section).
      flags_text: the command line as a flagfile, saved to output_dir/<cli_name>.flags.
    """
    start = time.time()
    context = prepare(job)
    # What can refuse the run is read before the directory is taken: a refused run leaves
    # nothing behind.
    runner.read_training_data(context)
    record = run_record(context, job, runner.cli_name, runner.resume_name, runner.labels,
                        runner.resume_settings())
    if job.do_train:
        check_resume(context, job.output_dir, record)
    # Some inputs are read only once the directory is owned (the dev and test data, a SQuAD
    # file's windows): a run refused there, in a directory that held nothing, leaves nothing.
    fresh = context.chief and (not fileio.exists(job.output_dir)
                               or not fileio.listdir(job.output_dir))
    with owned(context, job.output_dir):
        try:
            if job.do_train:
                # Again, now that no other run can change the record meanwhile.
                check_resume(context, job.output_dir, record)
                if context.chief:
                    run_directory.write_record(job.output_dir, record)
            prepared = _prepare(runner, job, context)
        except BaseException:
            if fresh:
                # Best effort: the refusal, not a failed removal, is what the user must read.
                with contextlib.suppress(OSError):
                    for name in fileio.listdir(job.output_dir):
                        if name.rstrip("/") != run_directory.LOCK_FILE:
                            fileio.remove_tree(run_directory.path(job.output_dir,
                                                                  name.rstrip("/")))
            raise
        return _run_task(runner, job, flags_text, start, context, *prepared)


def _prepare(runner, job, context):
    """The model (restored, or built with its optimizer to train) and the task's inputs:
    (model, optimizer or None, the restored step or None, num_train_steps or None, the
    effective train batch size or None)."""
    if not job.do_train:
        # The weights first: a run that cannot have them is refused before it writes anything
        # (the feature records of its inputs included).
        model, _ = build_model(context, job, runner.make_model)
        step = restore_trained(job, model, runner.best_metric, context.runtime)
        runner.prepare_inputs(context)
        return model, None, step, None, None
    runner.prepare_inputs(context)
    batch = runtime_setup.effective_train_batch_size(job.trainer)
    num_train_steps = task_loop.num_train_steps(runner.num_train_examples, batch,
                                                job.trainer.num_train_epochs)
    model, optimizer = build_model(context, job, runner.make_model, num_train_steps)
    return model, optimizer, None, num_train_steps, batch


def _run_task(runner, job, flags_text, start, context, model, optimizer, step,
              num_train_steps, batch):
    """run_task once --output_dir is owned, the run recorded and its inputs prepared."""
    runner.attach(model, context)
    results = runner.results()
    outcome = None
    if job.do_train:
        evaluate_fn = runner.evaluate_fn()
        outcome = train(context, job, model=model, optimizer=optimizer,
                        loss_fn=runner.loss_fn, dataset_fn=runner.train_dataset_fn(context),
                        num_train_steps=num_train_steps,
                        steps_per_epoch=task_loop.steps_per_epoch(runner.num_train_examples,
                                                                  batch),
                        evaluate_fn=evaluate_fn,
                        best_metric=runner.best_metric if evaluate_fn else None)
        runner.record_training(results, outcome, num_train_steps)
    else:
        results["global_step"] = step
    # The trained model is saved before the predictions are written: nothing after can lose
    # it (a prediction file that cannot be written, e.g. a full disk).
    kind, export_fields, task_info = runner.run_files()
    export_fields = task_info if export_fields is None else export_fields
    write_run_files(context, job, model, kind, runner.labels, runner.cli_name, flags_text,
                    export_fields, **task_info)
    eval_metrics = runner.evaluate_and_predict(context, results, outcome)
    results["wall_time_seconds"] = time.time() - start
    write_results(context, job.output_dir, job.do_train, results, eval_metrics)
    if job.export_dir and context.chief and context.runtime.backend == "jax":
        export_run(job.output_dir, job.export_dir,
                   {k: v for k, v in export_fields.items() if task_info.get(k) != v})
    return results
