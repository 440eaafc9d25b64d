"""The installed commands: console scripts, --help, and official_configs from any directory."""

import ast
import importlib.metadata
import os
import subprocess
import sys
import zipfile

import absl.flags
import pytest

from bert_tf import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMANDS = {
    "bert-tf-pretrain": "bert_tf.run_pretraining:run",
    "bert-tf-classify": "bert_tf.run_classifier:run",
    "bert-tf-tag": "bert_tf.run_tagging:run",
    "bert-tf-squad": "bert_tf.run_squad:run",
    "bert-tf-create-pretraining-data": "bert_tf.cli.create_pretraining_data:run",
    "bert-tf-build-vocab": "bert_tf.cli.build_vocab:run",
    "bert-tf-convert-checkpoint": "bert_tf.cli.convert_checkpoint:run",
    "bert-tf-export": "bert_tf.cli.export_saved_model:run",
    "bert-tf-extract-features": "bert_tf.cli.extract_features:run",
    "bert-tf-prepare-demo-data": "bert_tf.cli.prepare_demo_data:run",
}
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
VOCAB = os.path.join(REPO, "tests", "interop", "fixtures", "hf_bert_gelu", "vocab.txt")


def _script(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def test_every_command_is_an_installed_console_script():
    installed = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts")
                 if e.value.startswith("bert_tf.")}
    assert {name: installed.get(name) for name in COMMANDS} == COMMANDS
    for name in COMMANDS:
        assert os.access(_script(name), os.X_OK), name


@pytest.mark.parametrize("command,own_flags", [
    ("bert-tf-build-vocab", ["--vocab_size", "--input_file", "--output_file"]),
    ("bert-tf-create-pretraining-data", ["--max_predictions_per_seq", "--pack_sequences",
                                         "--num_workers"]),
])
def test_help_lists_the_commands_own_flags(command, own_flags, tmp_path):
    proc = subprocess.run([_script(command), "--help"], capture_output=True, text=True,
                          cwd=str(tmp_path), env=ENV, timeout=120)
    # Before the launcher a console script printed only "Try --helpfull ...", its flags being
    # defined outside __main__.
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr[-2000:]
    for flag in own_flags:
        assert f"  {flag}" in proc.stdout, flag
    # The module's docstring heads the usage, as for `python -m`.
    assert proc.stdout.lstrip().split("\n", 1)[0].endswith(".")


@pytest.mark.parametrize("target", sorted(set(COMMANDS.values())))
def test_help_shows_the_docstrings_line_continuations(target):
    """A backslash at a line's end in a docstring that is not raw joins the lines: --help then
    showed "--vocab_size=30522       --do_lower_case=true"."""
    module = importlib.import_module(target.split(":")[0])
    source = open(module.__file__, encoding="utf-8").read()
    docstring = ast.get_source_segment(source, ast.parse(source).body[0].value)
    assert "\\\n" not in docstring or docstring[:1] in "rR", module.__name__


@pytest.mark.parametrize("command, flag, said", [
    ("embed", "input_file", "bert-tf-embed: one text per line"),
    ("embed", "output_file", "bert-tf-embed: the vectors, .npy"),
    ("embed", "output_dir", "bert-tf-embed"),
    ("embed", "train_file", "bert-tf-embed: pairs or triplets"),
    ("convert_checkpoint", "output_dir", "bert-tf-convert-checkpoint: the files of --to"),
    ("convert_checkpoint", "bert_config_file", "bert-tf-convert-checkpoint: the one beside "
                                               "--checkpoint"),
    ("extract_features", "output_file", "bert-tf-extract-features: JSON lines"),
    ("build_vocab", "output_file", "bert-tf-build-vocab: vocab.txt"),
])
def test_a_shared_flags_help_says_what_it_is_to_each_command(command, flag, said):
    flag_values = absl.flags.FlagValues()
    importlib.import_module(f"bert_tf.cli.{command}").define_flags(flag_values)
    assert said in flag_values[flag].help


def test_official_configs_resolve_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = cli.resolve_official_path("official_configs/models/demo_tiny.json")
    assert os.path.isabs(path) and os.path.isfile(path)
    assert os.path.samefile(path, os.path.join(REPO, "official_configs", "models",
                                               "demo_tiny.json"))
    # Paths that exist, or are not official_configs/, are left alone.
    (tmp_path / "official_configs").mkdir()
    (tmp_path / "official_configs" / "mine.json").write_text("{}")
    assert cli.resolve_official_path("official_configs/mine.json") == "official_configs/mine.json"
    assert cli.resolve_official_path("configs/x.json") == "configs/x.json"
    assert cli.resolve_official_path("official_configs/none.json") == "official_configs/none.json"


@pytest.mark.slow
def test_recipe_flagfile_runs_outside_the_checkout(tmp_path):
    # The flagfile and the bert_config_file it names are found from another directory: the run
    # gets as far as the input files (which this test leaves missing).
    proc = subprocess.run(
        [_script("bert-tf-pretrain"), "--flagfile=official_configs/pretraining/demo_tiny.flags",
         f"--input_file={tmp_path}/missing-*.tfrecord", f"--output_dir={tmp_path}/run",
         f"--vocab_file={VOCAB}"],
        capture_output=True, text=True, cwd=str(tmp_path), env=ENV, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("run_pretraining: error: ") and "missing-*.tfrecord" in last, last
    assert "official_configs" not in last


@pytest.mark.slow
def test_wheel_ships_the_commands_and_official_configs(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(tmp_path), REPO],
                          capture_output=True, text=True, cwd=str(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel = next(p for p in os.listdir(tmp_path) if p.endswith(".whl"))
    with zipfile.ZipFile(tmp_path / wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    for config in os.listdir(os.path.join(REPO, "official_configs", "models")):
        assert f"bert_tf/official_configs/models/{config}" in names
    for flagfile in os.listdir(os.path.join(REPO, "official_configs", "pretraining")):
        assert f"bert_tf/official_configs/pretraining/{flagfile}" in names
    for module in ("build_vocab", "create_pretraining_data", "export_saved_model"):
        assert f"bert_tf/cli/{module}.py" in names
    for name, target in COMMANDS.items():
        assert f"{name} = {target}" in entry_points


def test_export_check_of_a_missing_directory_is_one_line(tmp_path):
    proc = subprocess.run([_script("bert-tf-export"), f"--check={tmp_path / 'nothing'}"],
                          capture_output=True, text=True, cwd=str(tmp_path), env=ENV,
                          timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"export_saved_model: error: --check={tmp_path / 'nothing'}: {tmp_path / 'nothing'}: "
        "no saved_model.pb; expected a SavedModel version directory such as EXPORT/1")


# Every command's module imports its library when it runs: --help loads no TensorFlow (it
# took 20-30 s where one imported its driver at the top).
_HELP_WITHOUT_TENSORFLOW = ["bert_tf.run_pretraining", "bert_tf.run_classifier",
                            "bert_tf.run_tagging", "bert_tf.run_squad",
                            "bert_tf.cli.export_saved_model", "bert_tf.cli.build_vocab",
                            "bert_tf.cli.create_pretraining_data", "bert_tf.cli.prepare_demo_data",
                            "bert_tf.cli.convert_checkpoint", "bert_tf.cli.extract_features",
                            "bert_tf.cli.embed"]
_HELP_PROBE = """
import runpy, sys
sys.argv = [sys.argv[1], "--help"]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
finally:
    print("imported:", sorted(m for m in ("tensorflow", "keras") if m in sys.modules))
"""


@pytest.mark.parametrize("module", _HELP_WITHOUT_TENSORFLOW)
def test_help_exits_0_without_importing_tensorflow(module, tmp_path):
    # TF_CPP_MIN_LOG_LEVEL unset, as in a user's shell.
    env = {k: v for k, v in ENV.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-c", _HELP_PROBE, module], capture_output=True,
                          text=True, cwd=str(tmp_path), env=env, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "imported: []"
    assert "--output_dir" in proc.stdout or "--output_file" in proc.stdout or \
        "--export_dir" in proc.stdout


_REFUSAL_PROBE = """
import runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
finally:
    print("imported:", sorted(m for m in ("tensorflow", "keras", "jax") if m in sys.modules))
"""


@pytest.mark.parametrize("flag, message", [
    ("--bert_config_file={tmp}/missing.json", "--bert_config_file={tmp}/missing.json: no such "
     "file"),
    ("--input_file={tmp}/train-*.tfrecord", '--input_file={tmp}/train-*.tfrecord: No files match '
     'input pattern "{tmp}/train-*.tfrecord".'),
    ("--vocab_file={tmp}/vocab.txt", "--vocab_file={tmp}/vocab.txt: tokenizer file "
     "'{tmp}/vocab.txt' does not exist (expected a vocab.txt, a tokenizer.json, a SentencePiece "
     ".model or a directory holding one)."),
    ("--time_budget=10 minutes", "--time_budget='10 minutes' does not parse: expected a duration "
     "such as 600s, 45m, 24h or 1h30m"),
    ("--learning_rate=nan", "--learning_rate=nan must be >= 0 and finite"),
    ("--gradient_accumulation_steps=0", "--gradient_accumulation_steps=0 must be >= 1"),
    ("--objective=electra", "--objective=electra trains replaced-token detection only: "
     "--use_next_sentence_label adds a sentence-pair head; pass --use_next_sentence_label=false"),
])
def test_a_bad_pretraining_flag_is_refused_before_tensorflow_loads(flag, message, tmp_path):
    """bert-tf-pretrain checks its flags and the local files they name before it imports
    TensorFlow (5 s on 2 CPU cores): the error comes at once, --backend=jax too, and nothing is
    written."""
    tmp = str(tmp_path)
    config = _tiny_config(tmp_path)
    (tmp_path / "train.tfrecord").write_bytes(b"")
    args = [f"--bert_config_file={config}", f"--input_file={tmp}/train.tfrecord",
            f"--output_dir={tmp}/run", "--do_train", "--backend=jax", flag.format(tmp=tmp)]
    _assert_refused_before_tensorflow("bert_tf.run_pretraining", args,
                                      f"run_pretraining: error: {message.format(tmp=tmp)}",
                                      tmp_path)


def _assert_refused_before_tensorflow(module, args, line, tmp_path):
    before = sorted(os.listdir(tmp_path))
    proc = subprocess.run([sys.executable, "-c", _REFUSAL_PROBE, module, *args],
                          capture_output=True, text=True, cwd=str(tmp_path), env=ENV,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.strip() == line
    assert proc.stdout.strip() == "imported: []"
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("module, flags, message", [
    ("bert_tf.run_classifier", ["--text_a_column=text", "--label_column=label",
                                "--train_file={tmp}/train.csv"],
     "run_classifier: error: --train_file={tmp}/train.csv: no such file"),
    ("bert_tf.run_classifier", ["--task_name=sst-2", "--data_dir={tmp}",
                                "--init_checkpoint={tmp}/run"],
     "run_classifier: error: --init_checkpoint={tmp}/run does not exist (expected a run "
     "directory, a .keras file, a checkpoint prefix with its .index file, or a Hugging Face or "
     "keras-hub directory)"),
    ("bert_tf.run_classifier", ["--text_a_column=text", "--label_column=topics",
                                "--multi_label", "--regression"],
     "run_classifier: error: --multi_label and --regression exclude each other: multi-label "
     "predicts label names, regression a number"),
    ("bert_tf.run_classifier", ["--task_name=sst-2", "--data_dir={tmp}", "--multi_label"],
     "run_classifier: error: --multi_label reads your own data: give --text_a_column and "
     "--label_column (GLUE tasks have one label per example)"),
    ("bert_tf.run_tagging", ["--train_file={tmp}/train.txt", "--num_train_epochs=0"],
     "run_tagging: error: --num_train_epochs=0.0 must be > 0 and finite"),
    ("bert_tf.run_tagging", ["--train_file={tmp}/train.txt", "--vocab_file={tmp}/vocab.txt"],
     "run_tagging: error: --vocab_file={tmp}/vocab.txt: tokenizer file '{tmp}/vocab.txt' does "
     "not exist (expected a vocab.txt, a tokenizer.json, a SentencePiece .model or a directory "
     "holding one)."),
    ("bert_tf.run_squad", ["--train_file={tmp}/train.json", "--doc_stride=400"],
     "run_squad: error: --doc_stride=400 must be in [1, 317]: a window holds 317 context pieces "
     "(--max_seq_length=384 minus --max_query_length=64 minus 3), and a larger stride would "
     "skip context between windows"),
    ("bert_tf.run_squad", ["--train_file={tmp}/train.json"],
     "run_squad: error: --train_file={tmp}/train.json: no such file"),
])
def test_a_bad_fine_tuning_flag_is_refused_before_tensorflow_loads(module, flags, message,
                                                                   tmp_path):
    """bert-tf-classify, -tag and -squad check their flags and the local files they name (the
    model's, the data the run reads) before they import TensorFlow; --backend=jax too."""
    tmp = str(tmp_path)
    args = [f"--output_dir={tmp}/out", "--do_train", "--backend=jax",
            f"--bert_config_file={_tiny_config(tmp_path)}"]
    _assert_refused_before_tensorflow(module, args + [f.format(tmp=tmp) for f in flags],
                                      message.format(tmp=tmp), tmp_path)


@pytest.mark.parametrize("made, message", [
    (False, "no such directory or .keras file"),
    (True, "found none of model.keras, pretrainer.keras, encoder.keras; expected the output "
     "directory of run_pretraining, run_classifier, run_squad or run_tagging"),
])
def test_bert_tf_export_refuses_a_model_dir_without_a_model_before_tensorflow_loads(
        made, message, tmp_path):
    if made:
        (tmp_path / "run").mkdir()
    _assert_refused_before_tensorflow(
        "bert_tf.cli.export_saved_model",
        [f"--model_dir={tmp_path}/run", f"--export_dir={tmp_path}/export/1"],
        f"export_saved_model: error: --model_dir={tmp_path}/run: {message}", tmp_path)


@pytest.mark.parametrize("flags, message", [
    (["--input_file={tmp}/texts.txt", "--output_file={tmp}/vectors.npy"],
     "--input_file={tmp}/texts.txt: no such file"),
    (["--train_file={tmp}/pairs.tsv", "--output_dir={tmp}/run", "--train_batch_size=1"],
     "--train_batch_size=1: in-batch negatives need at least 2 rows per batch"),
    (["--input_file={tmp}/in.txt", "--output_file={tmp}/vectors.npy"],
     "--init_checkpoint={tmp}/model does not exist (expected a run directory, a .keras file, a "
     "checkpoint prefix with its .index file, or a Hugging Face or keras-hub directory)"),
    (["--input_file={tmp}/in.txt", "--output_file={tmp}/vectors.npy", "--pooling=meen"],
     "--pooling: pooling modes ['meen']; expected one or more distinct of cls, max, mean, "
     "mean_sqrt_len_tokens"),
])
def test_bert_tf_embed_refuses_a_bad_flag_before_tensorflow_loads(flags, message, tmp_path):
    tmp = str(tmp_path)
    (tmp_path / "in.txt").write_text("a sentence\n")
    _assert_refused_before_tensorflow(
        "bert_tf.cli.embed", [f"--init_checkpoint={tmp}/model", "--backend=jax"]
        + [f.format(tmp=tmp) for f in flags], f"embed: error: {message.format(tmp=tmp)}",
        tmp_path)


def test_bert_tf_extract_features_refuses_a_missing_checkpoint_before_tensorflow_loads(
        tmp_path):
    (tmp_path / "in.txt").write_text("a sentence\n")
    _assert_refused_before_tensorflow(
        "bert_tf.cli.extract_features",
        [f"--input_file={tmp_path}/in.txt", f"--output_file={tmp_path}/out.jsonl",
         f"--init_checkpoint={tmp_path}/run"],
        f"extract_features: error: --init_checkpoint={tmp_path}/run does not exist (expected a "
        "run directory, a .keras file, a checkpoint prefix with its .index file, or a Hugging "
        "Face or keras-hub directory)", tmp_path)


def _tiny_config(directory):
    config = directory / "bert_config.json"
    config.write_text('{"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, '
                      '"num_attention_heads": 1, "intermediate_size": 8}')
    return config


def test_only_help_flags_exit_0():
    assert cli._asks_for_help(["--helpfull"]) and cli._asks_for_help(["-?"])
    assert cli._asks_for_help(["--x=1", "--help=true"])
    assert not cli._asks_for_help(["--helper=1", "--", "--help"])


@pytest.mark.parametrize("module, program", [("bert_tf.run_classifier", "run_classifier"),
                                             ("bert_tf.cli.extract_features",
                                              "extract_features")])
def test_an_unsupported_keras_backend_is_one_line(module, program, tmp_path):
    args = {"bert_tf.run_classifier": ["--task_name=sst-2", f"--data_dir={tmp_path}",
                                       f"--output_dir={tmp_path / 'out'}", "--do_train"],
            "bert_tf.cli.extract_features": [f"--input_file={tmp_path / 'in.txt'}",
                                             f"--output_file={tmp_path / 'out.jsonl'}",
                                             f"--init_checkpoint={tmp_path}"]}[module]
    (tmp_path / "in.txt").write_text("a sentence\n")
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, cwd=str(tmp_path), env=dict(ENV, KERAS_BACKEND="torch"),
                          timeout=300)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"{program}: error: KERAS_BACKEND=torch: bert_tf's models run on the Keras backends "
        "tensorflow and jax; set KERAS_BACKEND=tensorflow (the default) or KERAS_BACKEND=jax"]
