"""Fine-tuning settings an unset flag takes from the run the model comes from, before
TensorFlow loads (bert_tf.jobs.finetuning_config.resolve_from_run): --max_seq_length, a
multi-label run's --label_separator, a SQuAD run's windows and version, each from the run
record (bert_tf_run.json, written when training starts) or task_info.json (written when it
ends), else the default."""

import subprocess
import sys

import pytest
from absl import flags

from bert_tf import run_directory
from bert_tf.jobs import sections
from bert_tf.jobs.finetuning_config import (ClassificationConfig, SquadConfig, TaggingConfig,
                                            check_settings, resolve_from_run)
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.serving import write_task_info


def _write_run(directory, command="run_classifier", job="finetuning", **settings):
    """A run record in `directory` (settings default: max_seq_length 48)."""
    directory.mkdir(parents=True, exist_ok=True)
    run_directory.write_record(directory, run_directory.RunRecord(
        job=job, command=command, settings=settings or {"max_seq_length": 48}))
    return directory


# What a SQuAD run's record holds (run_squad's resume_settings and the length).
SQUAD_RECORD = dict(max_seq_length=96, doc_stride=40, max_query_length=20,
                    version_2_with_negative=True)


def _resolved(config_class, **values):
    job = sections.from_flat(config_class, **values)
    resolve_from_run(job, ("max_seq_length",))
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
def test_the_command_line_leaves_it_unset_and_the_flagfile_holds_the_run_value(command,
                                                                              tmp_path):
    import importlib

    from bert_tf.cli import flags as cli_flags
    from bert_tf.jobs.finetuning_config import resolved_settings

    module = importlib.import_module(f"bert_tf.cli.{command}")
    config_class = {"classify": ClassificationConfig, "tag": TaggingConfig,
                    "squad": SquadConfig}[command]
    init = _write_run(tmp_path / "init", command=config_class.COMMAND, max_seq_length=48)
    flag_values = module.define_flags(flags.FlagValues())
    flag_values(["prog", f"--output_dir={tmp_path / 'out'}", f"--init_checkpoint={init}"])
    job = cli_flags.to_config(config_class, flag_values)
    assert job.task.max_seq_length is None
    assert "--max_seq_length" not in cli_flags.flagfile_text(module.define_flags, flag_values)
    # Resolved (as check_settings does; the commands then call record_resolved: see
    # tests/finetuning/test_run_classifier.py's "jsonl" run), the flagfile the run writes
    # holds the value it used, so a rerun from it uses the same.
    squad = ["doc_stride", "max_query_length", "max_answer_length", "version_2_with_negative"]
    resolve_from_run(job, ["max_seq_length", "train_batch_size"]
                     + (squad if command == "squad" else []))
    cli_flags.record_resolved(resolved_settings(job), flag_values)
    text = cli_flags.flagfile_text(module.define_flags, flag_values)
    assert "--max_seq_length=48\n" in text
    # The batch too (that run records none: the default).
    assert "--train_batch_size=32\n" in text
    if command == "squad":
        assert "--doc_stride=128\n" in text and "--noversion_2_with_negative\n" in text


def test_resolving_loads_no_tensorflow(tmp_path):
    run = _write_run(tmp_path / "run", max_seq_length=48)
    code = ("import sys; from bert_tf.jobs import sections, finetuning_config as c; "
            f"job = sections.from_flat(c.ClassificationConfig, output_dir={str(run)!r}); "
            "c.resolve_from_run(job, ('max_seq_length',)); "
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


@pytest.mark.parametrize("given, value", [(" ", " "), ("\\s", " "), ("\t", "\t"),
                                          ("\\t", "\t"), ("|", "|"), ("\\", "\\"),
                                          ("a\\xb", "a\\xb")])
def test_a_separator_survives_the_runs_flagfile(given, value, tmp_path):
    # absl strips every flagfile line: a space or tab survives only written as an escape.
    from bert_tf.cli import classify
    from bert_tf.cli import flags as cli_flags

    flag_values = classify.define_flags(flags.FlagValues())
    flag_values(["prog", "--multi_label", f"--label_separator={given}"])
    assert flag_values.label_separator == value
    flagfile = tmp_path / "run_classifier.flags"
    flagfile.write_text(cli_flags.flagfile_text(classify.define_flags, flag_values))
    again = classify.define_flags(flags.FlagValues())
    again(["prog", f"--flagfile={flagfile}"])
    assert again.label_separator == value


def test_a_space_a_run_records_is_in_the_flagfile_its_resume_writes(tmp_path):
    from bert_tf.cli import classify
    from bert_tf.cli import flags as cli_flags
    from bert_tf.jobs.finetuning_config import resolved_settings

    run = _multi_label_run(tmp_path / "run", " ")
    flag_values = classify.define_flags(flags.FlagValues())
    flag_values(["prog", "--multi_label", "--text_a_column=sentence", "--label_column=topics",
                 f"--output_dir={run}", "--do_eval"])
    job = cli_flags.to_config(ClassificationConfig, flag_values)
    check_settings(job)
    cli_flags.record_resolved(resolved_settings(job), flag_values)
    text = cli_flags.flagfile_text(classify.define_flags, flag_values)
    assert "--label_separator=\\s\n" in text


def test_a_separator_without_multi_label_is_refused_but_the_old_default_reads(tmp_path):
    values = dict(output_dir=str(tmp_path / "out"), task_name="sst-2",
                  data_dir=str(tmp_path), do_eval=True)
    check_settings(sections.from_flat(ClassificationConfig, label_separator=",", **values))
    with pytest.raises(FlagValueError, match=r"^--label_separator='\|' goes with --multi_label"):
        check_settings(sections.from_flat(ClassificationConfig, label_separator="|", **values))


def test_a_multi_label_runs_threshold_is_its_evaluations_predictions_and_resumes(tmp_path):
    """--multi_label_threshold unset: the run's (task_info.json, else the record a run writes
    when training starts), else 0.5; a new run that trains from it starts at 0.5; the flag
    wins; outside (0, 1), or without --multi_label, refused naming the flag or the file."""
    run = tmp_path / "run"
    run.mkdir()
    write_task_info(str(run), "multi_label", do_lower_case=True, max_seq_length=32,
                    labels=["sports", "politics"], multi_label_threshold=0.35)

    def threshold(**values):
        data = tmp_path / "data.csv"
        data.write_text("sentence,topics\na match .,sports\n")
        job = sections.from_flat(ClassificationConfig, multi_label=True,
                                 text_a_column="sentence", label_column="topics",
                                 dev_file=str(data), test_file=str(data), train_file=str(data),
                                 **values)
        check_settings(job)
        return job.task.multi_label_threshold

    other = str(tmp_path / "predictions")
    assert threshold(output_dir=str(run), do_eval=True) == 0.35
    assert threshold(output_dir=other, init_checkpoint=str(run), do_predict=True) == 0.35
    assert threshold(output_dir=str(run), do_train=True) == 0.35
    assert threshold(output_dir=other, init_checkpoint=str(run), do_train=True) == 0.5
    assert threshold(output_dir=str(run), do_eval=True, multi_label_threshold=0.7) == 0.7
    # task_info.json, which the exports and load_task read too, wins over the record a run
    # writes when training starts; an interrupted run has the record alone.
    _write_run(run, max_seq_length=32, multi_label=True, label_separator=",",
               multi_label_threshold=0.25)
    assert threshold(output_dir=str(run), do_eval=True) == 0.35
    interrupted = _write_run(tmp_path / "interrupted", max_seq_length=32, multi_label=True,
                             label_separator=",", multi_label_threshold=0.25)
    assert threshold(output_dir=str(interrupted), do_train=True) == 0.25
    # A task_info.json that cannot be read is refused, naming it (not decided around).
    info = run / "task_info.json"
    info.write_text(info.read_text().replace("0.35", "1.5"))
    with pytest.raises(FlagValueError) as error:
        threshold(output_dir=str(run), do_eval=True)
    assert str(error.value) == (f"{info}: multi_label_threshold=1.5 must be a number in (0, 1) "
                                "(a probability a label must exceed)")
    for bad in (0.0, 1.0, 1.5, float("nan")):
        with pytest.raises(FlagValueError) as error:
            threshold(output_dir=other, do_predict=True, multi_label_threshold=bad)
        assert str(error.value) == (f"--multi_label_threshold={bad!r} must be a number in "
                                    "(0, 1) (a probability a label must exceed)")
    with pytest.raises(FlagValueError) as error:
        check_settings(sections.from_flat(ClassificationConfig, task_name="sst-2",
                                          data_dir=str(tmp_path), do_eval=True,
                                          output_dir=other, multi_label_threshold=0.3))
    assert str(error.value) == ("--multi_label_threshold=0.3 goes with --multi_label (a "
                                "single-label classifier predicts its most probable class, a "
                                "regression a number)")


def test_a_squad_runs_windows_and_version_are_its_predictions(tmp_path):
    run = tmp_path / "squad"
    run.mkdir()
    write_task_info(str(run), "squad", do_lower_case=True, max_seq_length=96, doc_stride=32,
                    max_query_length=24, max_answer_length=12, version_2_with_negative=True,
                    null_score_diff_threshold=-1.5, n_best_size=5)
    _write_run(run, command="run_squad", max_seq_length=96)
    data = tmp_path / "dev.json"
    data.write_text("{}")

    def resolved(**values):
        job = sections.from_flat(SquadConfig, predict_file=str(data), train_file=str(data),
                                 **values)
        check_settings(job)
        task = job.task
        return (task.max_seq_length, task.doc_stride, task.max_query_length,
                task.max_answer_length, task.version_2_with_negative,
                task.null_score_diff_threshold)

    other = str(tmp_path / "predictions")
    assert resolved(output_dir=str(run), do_predict=True) == (96, 32, 24, 12, True, -1.5)
    assert resolved(output_dir=other, init_checkpoint=str(run), do_predict=True) == (
        96, 32, 24, 12, True, -1.5)
    # A new run trained from its weights keeps its windows, not the version of the data it
    # read (SQuAD 2.0) nor the threshold tuned on it: its own data says.
    assert resolved(output_dir=other, init_checkpoint=str(run), do_train=True) == (
        96, 32, 24, 12, False, 0.0)
    assert resolved(output_dir=str(run), do_predict=True, doc_stride=16,
                    version_2_with_negative=False, null_score_diff_threshold=2.0) == (
        96, 16, 24, 12, False, 2.0)
    assert resolved(output_dir=other, do_predict=True) == (384, 128, 64, 30, False, 0.0)


def test_an_interrupted_run_resumes_with_what_its_record_holds(tmp_path):
    """A run killed before it wrote task_info.json: its record (written when training starts)
    holds the separator and the SQuAD windows its resume reads its files with."""
    run = _write_run(tmp_path / "topics", max_seq_length=40, multi_label=True,
                     label_separator="|")
    assert _separator(tmp_path, output_dir=str(run), do_train=True) == "|"
    squad = _write_run(tmp_path / "squad", command="run_squad", **SQUAD_RECORD)
    data = tmp_path / "train.json"
    data.write_text("{}")
    job = sections.from_flat(SquadConfig, output_dir=str(squad), train_file=str(data),
                             do_train=True)
    check_settings(job)
    assert (job.task.max_seq_length, job.task.doc_stride, job.task.max_query_length,
            job.task.max_answer_length, job.task.version_2_with_negative) == (
                96, 40, 20, 30, True)


def test_a_saved_model_of_another_task_gives_no_setting(tmp_path):
    """A directory bert_tf.tasks saved (task_info.json only) of a classifier does not set a
    SQuAD run's length; a tagger's sets a tagging run's."""
    classifier = tmp_path / "classifier"
    classifier.mkdir()
    write_task_info(str(classifier), "classification", do_lower_case=True, max_seq_length=64,
                    labels=["a", "b"])
    tagger = tmp_path / "tagger"
    tagger.mkdir()
    write_task_info(str(tagger), "tagging", do_lower_case=True, max_seq_length=200,
                    labels=["O", "B-PER"])
    out = str(tmp_path / "out")
    assert _resolved(SquadConfig, output_dir=out, init_checkpoint=str(classifier)) == 384
    assert _resolved(ClassificationConfig, output_dir=out, init_checkpoint=str(classifier)) == 64
    assert _resolved(TaggingConfig, output_dir=out, init_checkpoint=str(tagger)) == 200


def test_a_run_that_does_not_record_a_setting_ran_with_the_default(tmp_path):
    """--output_dir's run of an earlier release records the length, not the SQuAD windows:
    its resume (and evaluation) use the defaults it ran with, never those of the run it
    started from; a recorded value of the wrong type is not taken either."""
    init = _write_run(tmp_path / "init", command="run_squad", **SQUAD_RECORD)
    old = _write_run(tmp_path / "old", command="run_squad", max_seq_length=256,
                     doc_stride="40")
    data = tmp_path / "train.json"
    data.write_text("{}")
    for mode in ("do_train", "do_eval"):
        job = sections.from_flat(SquadConfig, output_dir=str(old), init_checkpoint=str(init),
                                 train_file=str(data), predict_file=str(data), **{mode: True})
        check_settings(job)
        assert (job.task.max_seq_length, job.task.doc_stride, job.task.max_query_length,
                job.task.version_2_with_negative) == (256, 128, 64, False), mode


def test_the_runs_flagfile_names_its_files_by_absolute_paths(tmp_path, monkeypatch):
    # docs/resume.md reruns a run with --flagfile=RUN/run_pretraining.flags from anywhere.
    from bert_tf.cli import flags as cli_flags
    from bert_tf.cli import pretrain

    monkeypatch.chdir(tmp_path)
    for name in ("vocab.txt", "tiny.json", "a.txt", "train-0.tfrecord",
                 "uncased/bert_model.ckpt.index"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x\n")
    flag_values = pretrain.define_flags(flags.FlagValues())
    flag_values(["prog", "--vocab_file=vocab.txt", "--bert_config_file=tiny.json",
                 "--input_text_file=a.txt,gs://bucket/b.txt", "--output_dir=runs/lr=3e-5,bs=32",
                 "--eval_input_file=train-*.tfrecord"])
    text = cli_flags.flagfile_text(pretrain.define_flags, flag_values)
    for line in (f"--vocab_file={tmp_path}/vocab.txt", f"--bert_config_file={tmp_path}/tiny.json",
                 f"--input_text_file={tmp_path}/a.txt,gs://bucket/b.txt",
                 # A directory's name may hold a comma: only the input lists are lists.
                 f"--output_dir={tmp_path}/runs/lr=3e-5,bs=32",
                 f"--eval_input_file={tmp_path}/train-*.tfrecord"):
        assert line + "\n" in text
    # A TF1 checkpoint is a prefix; a name that is no file here (a preset's) is kept.
    for given, written in (("uncased/bert_model.ckpt", f"{tmp_path}/uncased/bert_model.ckpt"),
                           ("bert_base_en", "bert_base_en")):
        flag_values(["prog", f"--init_checkpoint={given}"])
        assert (f"--init_checkpoint={written}\n"
                in cli_flags.flagfile_text(pretrain.define_flags, flag_values))


def test_a_resume_trains_with_the_batch_its_run_records(tmp_path):
    """--train_batch_size unset: a resume of --output_dir takes the batch its run record holds
    (before, 32, and the resume was refused as another run: '--train_batch_size=16 then, 32
    now'); a new run trained from another run's model the default 32; a given one wins."""
    run = _write_run(tmp_path / "run", max_seq_length=48, train_batch_size=16)

    def batch(**values):
        job = sections.from_flat(ClassificationConfig, task_name="sst-2",
                                 data_dir=str(tmp_path), **values)
        resolve_from_run(job, ("train_batch_size",))
        return job.trainer.train_batch_size

    assert batch(output_dir=str(run), do_train=True) == 16
    assert batch(output_dir=str(tmp_path / "new"), init_checkpoint=str(run), do_train=True) == 32
    assert batch(output_dir=str(run), do_train=True, train_batch_size=8) == 8
    assert batch(output_dir=str(tmp_path / "new"), do_train=True) == 32
