"""The sections of a training job's config: what it trains on (task), how it trains (trainer)
and where it runs (runtime), as Model Garden's ExperimentConfig(task, trainer, runtime).

A training job's config (PretrainingConfig, FinetuningConfig and its tasks' subclasses,
EmbeddingConfig) holds a `task`, a `trainer` and a `runtime` section and the run's own fields
(--output_dir, the --do_* modes). Every field keeps its command-line flag's name, unique across
a config's sections, so an error names the flag, and the command line stays flat:
`from_flat(ClassificationConfig, learning_rate=1e-4, train_file=...)` and the commands
(bert_tf.cli.flags.to_config) route each name to the section that has it. A function is handed
the section it reads (`check_backend(job.runtime)`, `effective_train_batch_size(job.trainer)`),
never the whole config as a bag of attribute names.

>>> job = from_flat(Job, learning_rate=1e-4, dtype="mixed_bfloat16", output_dir="/tmp/run")
>>> job.trainer.learning_rate, job.runtime.dtype, job.output_dir
(0.0001, 'mixed_bfloat16', '/tmp/run')
>>> from_flat(Job, learning_rte=1e-4)
Traceback (most recent call last):
...
TypeError: Job has no setting learning_rte
"""

import dataclasses

from bert_tf.jobs import flag_checks

SECTIONS = ("task", "trainer", "runtime")


@dataclasses.dataclass
class RuntimeConfig:
    """Where a job runs: backend, devices and distribution, precision, compilation, seed.

    Field names and defaults are the flags' (bert_tf.cli.flags RUNTIME group).
    """

    distribution_strategy: str = "one_device"
    num_gpus: int = 0
    tpu: str | None = None
    use_tpu: bool = False
    tpu_name: str | None = None
    dtype: str = "float32"
    jit_compile: bool | str = "auto"
    seed: int | None = None
    # The Keras backend the job runs on (None: the one Keras runs on), and a JAX run's
    # processes (jax.distributed).
    backend: str | None = None
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None


@dataclasses.dataclass
class ModelFilesConfig:
    """The encoder a job starts from: the part of a task section that names its files.

    Args:
      bert_config_file: the model's bert_config.json (None: the one beside init_checkpoint, or
        the checkpoint's own config: bert_tf.jobs.model_files).
      vocab_file: its vocab.txt or tokenizer.json (None: the one beside init_checkpoint).
      do_lower_case: the casing (None: what init_checkpoint or the tokenizer file records).
      init_checkpoint: the weights to start from (a run, a Hugging Face or keras-hub
        directory, an original checkpoint, a .keras file; None: random initialisation).
    """

    bert_config_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    init_checkpoint: str | None = None


@dataclasses.dataclass
class TrainerConfig:
    """How a job trains: the batch, the optimizer's rate and decay, and the loop's cadence
    (checkpoints, host round trips, logs). A job's subclass adds its length of training.

    Args:
      train_batch_size: examples per step, over all replicas (before accumulation).
      learning_rate: the schedule's peak.
      warmup_proportion: the warmup's share of the training steps (None: the job decides).
      weight_decay_rate: decoupled weight decay of kernels and embeddings.
      save_checkpoints_steps: steps between checkpoints (None: the job decides).
      gradient_accumulation_steps: micro-batches summed per optimizer step.
      steps_per_loop: optimizer steps per host round trip; iterations_per_loop is the
        original's name of it and wins when set.
      log_steps: steps between log lines (None: every loop).
    """

    train_batch_size: int = 32
    learning_rate: float = 5e-5
    warmup_proportion: float | None = 0.1
    weight_decay_rate: float = 0.01
    save_checkpoints_steps: int | None = None
    gradient_accumulation_steps: int = 1
    steps_per_loop: int = 100
    iterations_per_loop: int | None = None
    log_steps: int | None = None


@dataclasses.dataclass
class ScheduledTrainerConfig(TrainerConfig):
    """A trainer whose optimizer and schedule shape are chosen by flag, with evaluation batches
    (pre-training and fine-tuning; bert_tf.training.optimization.create_optimizer).

    Args:
      adam_beta1, adam_beta2, adam_epsilon: the optimizer's moment decays and epsilon;
        adam_beta2 None: the optimizer's own (0.999; stable_adamw 0.98).
      clip_norm: the global norm the all-reduced gradients are clipped to; 0: no clipping.
    """

    eval_batch_size: int = 8
    optimizer: str = "adamw"
    lr_schedule: str = "linear"
    decay_proportion: float = 0.1
    adam_bias_correction: bool = False
    adam_beta1: float = 0.9
    adam_beta2: float | None = None
    adam_epsilon: float = 1e-6
    clip_norm: float = 1.0

    def optimizer_options(self):
        """The create_optimizer keyword arguments this trainer sets (all but the rate, the
        steps and a time budget's warmup share). Called once per run, where the optimizer is
        made: a --decay_proportion it does not use is said there, once."""
        flag_checks.warn_unused_decay_proportion(self)
        return dict(optimizer_type=self.optimizer, weight_decay_rate=self.weight_decay_rate,
                    lr_schedule=self.lr_schedule, decay_proportion=self.decay_proportion,
                    bias_correction=self.adam_bias_correction, beta_1=self.adam_beta1,
                    beta_2=self.adam_beta2, epsilon=self.adam_epsilon,
                    clip_norm=self.clip_norm or None)


@dataclasses.dataclass
class Job:
    """What every training job's config has: its sections and its run directory. A job's
    config subclasses it, declaring its own task and trainer types (and its modes)."""

    task: object = None
    trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
    output_dir: str | None = None


def section_classes(config_class):
    """{section name: its dataclass} of a job's config class, from its fields' defaults."""
    classes = {}
    for field in dataclasses.fields(config_class):
        if field.name in SECTIONS and field.default_factory is not dataclasses.MISSING:
            classes[field.name] = field.default_factory
    return classes


def field_names(config_class):
    """Every setting's name of a job's config class: its own fields and its sections'; a
    config class without sections has its fields."""
    classes = section_classes(config_class)
    names = [field.name for field in dataclasses.fields(config_class)
             if field.name not in classes]
    for section in classes.values():
        names.extend(field.name for field in dataclasses.fields(section))
    return names


def from_flat(config_class, **values):
    """The job's config with each setting routed to the section that has it; the ones not given
    keep their defaults.

    Raises:
      TypeError naming a setting no section has.
    """
    classes = section_classes(config_class)
    owner = {name: section for section, cls in classes.items()
             for name in (field.name for field in dataclasses.fields(cls))}
    own = {field.name for field in dataclasses.fields(config_class)} - set(classes)
    by_section = {section: {} for section in classes}
    top = {}
    for name, value in values.items():
        if name in own:
            top[name] = value
        elif name in owner:
            by_section[owner[name]][name] = value
        else:
            raise TypeError(f"{config_class.__name__} has no setting {name}")
    return config_class(**top, **{section: classes[section](**given)
                                  for section, given in by_section.items()})


def flat_values(job):
    """{setting name: value} of a job's config, its sections' settings included: what
    from_flat takes back."""
    classes = section_classes(type(job))
    values = {field.name: getattr(job, field.name) for field in dataclasses.fields(job)
              if field.name not in classes}
    for section in classes:
        part = getattr(job, section)
        values.update({field.name: getattr(part, field.name)
                       for field in dataclasses.fields(part)})
    return values


def sections_of(job):
    """The section objects of a job's config, in SECTIONS order."""
    return [getattr(job, name) for name in section_classes(type(job))]
