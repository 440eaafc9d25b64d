"""Fine-tuning settings an unset flag takes from the run the model comes from, before
TensorFlow loads: --max_seq_length (bert_tf.jobs.finetuning_config.resolve_max_seq_length: the
run record's, else the task's default) and a multi-label run's --label_separator (its
task_info.json's, else ",")."""

import subprocess
import sys

import pytest
from absl import flags

from bert_tf import run_directory
from bert_tf.jobs import sections
from bert_tf.jobs.finetuning_config import (ClassificationConfig, SquadConfig, TaggingConfig,
                                            check_settings, resolve_max_seq_length)
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.serving import write_task_info


def _write_run(directory, command="run_classifier", job="finetuning", max_seq_length=48):
    directory.mkdir(parents=True, exist_ok=True)
    run_directory.write_record(directory, run_directory.RunRecord(
        job=job, command=command, settings={"max_seq_length": max_seq_length}))
    return directory


def _resolved(config_class, **values):
    job = sections.from_flat(config_class, **values)
    resolve_max_seq_length(job)
    return job.task.max_seq_length


def test_the_default_is_the_tasks_when_no_run_records_one(tmp_path):
    out = str(tmp_path / "fresh")
    assert _resolved(ClassificationConfig, output_dir=out) == 128
    assert _resolved(TaggingConfig, output_dir=out) == 128
    assert _resolved(SquadConfig, output_dir=out) == 384


def test_the_output_dirs_run_records_the_length_of_its_resume_and_predictions(tmp_path):
    run = _write_run(tmp_path / "run", max_seq_length=48)
    assert _resolved(ClassificationConfig, output_dir=str(run), do_predict=True) == 48
    # Given, the flag wins (a resume then compares it with the record).
    assert _resolved(ClassificationConfig, output_dir=str(run), max_seq_length=64) == 64


def test_the_init_checkpoints_run_and_a_best_models_run(tmp_path):
    run = _write_run(tmp_path / "run", command="run_tagging", max_seq_length=200)
    out = str(tmp_path / "predictions")
    assert _resolved(TaggingConfig, output_dir=out, init_checkpoint=str(run)) == 200
    assert _resolved(TaggingConfig, output_dir=out,
                     init_checkpoint=str(run / "model.keras")) == 200
    best = run / "best"
    best.mkdir()
    assert _resolved(TaggingConfig, output_dir=out,
                     init_checkpoint=str(best / "model-40")) == 200


def test_runs_of_another_command_or_job_are_not_read(tmp_path):
    squad = _write_run(tmp_path / "squad", command="run_squad", max_seq_length=256)
    pretrained = _write_run(tmp_path / "pretrained", command="run_pretraining",
                            job="pretraining", max_seq_length=512)
    out = str(tmp_path / "out")
    assert _resolved(ClassificationConfig, output_dir=out, init_checkpoint=str(squad)) == 128
    assert _resolved(ClassificationConfig, output_dir=out,
                     init_checkpoint=str(pretrained)) == 128
    assert _resolved(SquadConfig, output_dir=out, init_checkpoint=str(squad)) == 256


def test_an_unreadable_record_falls_back_to_the_next_run(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / run_directory.RECORD_FILE).write_text("{not json")
    init = _write_run(tmp_path / "init", max_seq_length=32)
    assert _resolved(ClassificationConfig, output_dir=str(broken),
                     init_checkpoint=str(init)) == 32


@pytest.mark.parametrize("command", ["classify", "tag", "squad"])
def test_the_command_line_leaves_it_unset_and_records_no_default(command):
    import importlib

    from bert_tf.cli import flags as cli_flags

    module = importlib.import_module(f"bert_tf.cli.{command}")
    flag_values = module.define_flags(flags.FlagValues())
    flag_values(["prog", "--output_dir=/tmp/x"])
    config_class = {"classify": ClassificationConfig, "tag": TaggingConfig,
                    "squad": SquadConfig}[command]
    assert cli_flags.to_config(config_class, flag_values).task.max_seq_length is None
    # The run's flagfile then says nothing of it: a rerun from it resolves the same way.
    assert "--max_seq_length" not in cli_flags.flagfile_text(module.define_flags, flag_values)


def test_resolving_loads_no_tensorflow(tmp_path):
    run = _write_run(tmp_path / "run", max_seq_length=48)
    code = ("import sys; from bert_tf.jobs import sections, finetuning_config as c; "
            f"job = sections.from_flat(c.ClassificationConfig, output_dir={str(run)!r}); "
            "c.resolve_max_seq_length(job); "
            "print(job.task.max_seq_length, 'tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.split() == ["48", "False"]


def _multi_label_run(directory, separator):
    directory.mkdir(parents=True)
    write_task_info(str(directory), "multi_label", do_lower_case=True, max_seq_length=32,
                    labels=["sports", "politics"], label_separator=separator)
    return directory


def _separator(tmp_path, **values):
    data = tmp_path / "data.csv"
    data.write_text("sentence,topics\na match .,sports\n")
    job = sections.from_flat(ClassificationConfig, multi_label=True, text_a_column="sentence",
                             label_column="topics", dev_file=str(data), test_file=str(data),
                             train_file=str(data), **values)
    check_settings(job)
    return job.task.label_separator


def test_a_multi_label_runs_separator_is_its_evaluations_and_predictions(tmp_path):
    run = _multi_label_run(tmp_path / "run", "|")
    assert _separator(tmp_path, output_dir=str(run), do_eval=True) == "|"
    # Predicting with its model into another directory, and resuming it.
    other = str(tmp_path / "predictions")
    assert _separator(tmp_path, output_dir=other, init_checkpoint=str(run),
                      do_predict=True) == "|"
    assert _separator(tmp_path, output_dir=str(run), do_train=True) == "|"
    # A new run warm-started from it reads its own files: the default.
    assert _separator(tmp_path, output_dir=other, init_checkpoint=str(run),
                      do_train=True) == ","
    # Given, the flag wins.
    assert _separator(tmp_path, output_dir=str(run), do_eval=True, label_separator=";") == ";"
    assert _separator(tmp_path, output_dir=other, do_predict=True) == ","


def test_a_separator_without_multi_label_is_refused_but_the_old_default_reads(tmp_path):
    values = dict(output_dir=str(tmp_path / "out"), task_name="sst-2",
                  data_dir=str(tmp_path), do_eval=True)
    check_settings(sections.from_flat(ClassificationConfig, label_separator=",", **values))
    with pytest.raises(FlagValueError, match=r"^--label_separator='\|' goes with --multi_label"):
        check_settings(sections.from_flat(ClassificationConfig, label_separator="|", **values))


def test_a_squad_runs_windows_and_version_are_its_predictions(tmp_path):
    run = tmp_path / "squad"
    run.mkdir()
    write_task_info(str(run), "squad", do_lower_case=True, max_seq_length=96, doc_stride=32,
                    max_query_length=24, max_answer_length=12, version_2_with_negative=True)
    _write_run(run, command="run_squad", max_seq_length=96)
    data = tmp_path / "dev.json"
    data.write_text("{}")

    def resolved(**values):
        job = sections.from_flat(SquadConfig, predict_file=str(data), train_file=str(data),
                                 **values)
        check_settings(job)
        task = job.task
        return (task.max_seq_length, task.doc_stride, task.max_query_length,
                task.max_answer_length, task.version_2_with_negative)

    other = str(tmp_path / "predictions")
    assert resolved(output_dir=str(run), do_predict=True) == (96, 32, 24, 12, True)
    assert resolved(output_dir=other, init_checkpoint=str(run), do_predict=True) == (
        96, 32, 24, 12, True)
    # A new run trained from its weights keeps its windows (the same kind of data).
    assert resolved(output_dir=other, init_checkpoint=str(run), do_train=True) == (
        96, 32, 24, 12, True)
    assert resolved(output_dir=str(run), do_predict=True, doc_stride=16,
                    version_2_with_negative=False) == (96, 16, 24, 12, False)
    assert resolved(output_dir=other, do_predict=True) == (384, 128, 64, 30, False)
