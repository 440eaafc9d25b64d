"""The sections of the training jobs' configs (bert_tf.jobs.sections): every setting in one
section, flat flag names routed to it, the commands' flags building the same config."""

import dataclasses
import importlib

import pytest
from absl import flags

from bert_tf.jobs import sections

# (command module, its driver's config class)
TRAINING_JOBS = [
    ("pretrain", "bert_tf.jobs.pretraining_config", "PretrainingConfig"),
    ("classify", "bert_tf.jobs.finetuning_config", "ClassificationConfig"),
    ("tag", "bert_tf.jobs.finetuning_config", "TaggingConfig"),
    ("squad", "bert_tf.jobs.finetuning_config", "SquadConfig"),
    ("embed", "bert_tf.jobs.embedding_config", "EmbeddingConfig"),
]


def _config_class(module, name):
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("command, module, name", TRAINING_JOBS)
def test_every_training_job_has_the_three_sections_and_unique_setting_names(command, module,
                                                                           name):
    config_class = _config_class(module, name)
    assert issubclass(config_class, sections.Job)
    classes = sections.section_classes(config_class)
    assert list(classes) == ["task", "trainer", "runtime"]
    assert classes["runtime"] is sections.RuntimeConfig
    assert issubclass(classes["trainer"], sections.TrainerConfig)
    names = sections.field_names(config_class)
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("command, module, name", TRAINING_JOBS)
def test_the_command_line_builds_the_sections(command, module, name):
    from bert_tf.cli import flags as cli_flags

    flag_values = importlib.import_module(f"bert_tf.cli.{command}").define_flags(
        flags.FlagValues())
    flag_values(["prog", "--learning_rate=0.003", "--dtype=mixed_bfloat16",
                 "--output_dir=/tmp/run", "--gradient_accumulation_steps=2",
                 "--init_checkpoint=/models/base"])
    job = cli_flags.to_config(_config_class(module, name), flag_values)
    assert job.trainer.learning_rate == 0.003
    assert job.trainer.gradient_accumulation_steps == 2
    assert job.runtime.dtype == "mixed_bfloat16"
    assert job.task.init_checkpoint == "/models/base"
    assert job.output_dir == "/tmp/run"
    # Every other setting is its flag's default.
    values = sections.flat_values(job)
    given = {"learning_rate", "dtype", "output_dir", "gradient_accumulation_steps",
             "init_checkpoint"}
    assert {n: v for n, v in values.items() if n not in given} == {
        n: flag_values[n].default for n in values if n not in given}


def test_from_flat_routes_each_setting_and_round_trips():
    from bert_tf.jobs.finetuning_config import SquadConfig, SquadTask

    job = sections.from_flat(SquadConfig, max_seq_length=256, doc_stride=64,
                             num_train_epochs=2.0, seed=7, do_train=True)
    assert isinstance(job.task, SquadTask)
    assert (job.task.max_seq_length, job.task.doc_stride) == (256, 64)
    assert job.trainer.num_train_epochs == 2.0
    assert job.runtime.seed == 7
    assert job.do_train is True
    # Sections are separate objects: changing one job's section leaves a new job's alone.
    job.task.do_lower_case = False
    assert SquadConfig().task.do_lower_case is None
    assert sections.from_flat(SquadConfig, **sections.flat_values(job)) == job


def test_an_unknown_setting_is_named():
    from bert_tf.jobs.pretraining_config import PretrainingConfig

    with pytest.raises(TypeError) as error:
        sections.from_flat(PretrainingConfig, num_train_step=10)
    assert str(error.value) == "PretrainingConfig has no setting num_train_step"


def test_a_config_without_sections_is_built_flat():
    from bert_tf.jobs.export import ExportConfig

    config = sections.from_flat(ExportConfig, model_dir="/runs/a", export_dir="/exports/1")
    assert (config.model_dir, config.export_dir) == ("/runs/a", "/exports/1")
    assert sections.section_classes(ExportConfig) == {}
    assert set(sections.field_names(ExportConfig)) == {
        f.name for f in dataclasses.fields(ExportConfig)}


def test_the_numeric_check_reads_every_section_it_is_given():
    from bert_tf.jobs.finetuning_config import ClassificationConfig
    from bert_tf.jobs.flag_checks import FlagValueError, check_numeric_flags

    job = sections.from_flat(ClassificationConfig, warmup_proportion=1.5)
    check_numeric_flags(job.task, job.runtime)  # the trainer's value is not looked at
    with pytest.raises(FlagValueError) as error:
        check_numeric_flags(*sections.sections_of(job))
    assert str(error.value) == "--warmup_proportion=1.5 must be in [0, 1]"
