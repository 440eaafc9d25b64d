"""Every command module imports into one process, in any order, and two commands run there."""

import json
import os
import re
import subprocess
import textwrap

import pytest
from absl import flags

from bert_tf.cli import flags as cli_flags

import zygote

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMAND_MODULES = [
    "bert_tf.cli.pretrain", "bert_tf.cli.classify", "bert_tf.cli.tag", "bert_tf.cli.squad",
    "bert_tf.cli.create_pretraining_data", "bert_tf.cli.build_vocab",
    "bert_tf.cli.convert_checkpoint", "bert_tf.cli.export_saved_model",
    "bert_tf.cli.extract_features", "bert_tf.cli.prepare_demo_data", "bert_tf.cli.embed",
    # The original script names, aliases of the commands above.
    "bert_tf.run_pretraining", "bert_tf.run_classifier", "bert_tf.run_tagging",
    "bert_tf.run_squad",
]

# In a fresh process: import every command module in the order given (nothing may be defined
# by an import), then run build-vocab and create-pretraining-data through their run().
_SCRIPT = textwrap.dedent("""
    import importlib, json, sys
    from absl import flags
    from bert_tf.cli import flags as cli_flags

    modules, corpus, out = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    for name in modules:
        importlib.import_module(name)
    defined = sorted(set(cli_flags._DEFINITIONS) & set(flags.FLAGS))
    assert not defined, f"defined at import: {defined}"

    from bert_tf.cli import build_vocab, create_pretraining_data

    def run(command, *args):
        sys.argv = [command.__name__, *args]
        try:
            command.run()
        except SystemExit as e:
            assert not e.code, f"{command.__name__} exited with {e.code}"

    run(build_vocab, f"--input_file={corpus}", "--vocab_size=120", "--nodo_lower_case",
        f"--output_file={out}/vocab.txt")
    run(create_pretraining_data, f"--input_file={corpus}", f"--vocab_file={out}/vocab.txt",
        f"--output_file={out}/train.tfrecord", "--max_seq_length=32",
        "--max_predictions_per_seq=5", "--dupe_factor=2")
    # The second command ran with its own defaults, not the first one's values.
    print(json.dumps({"do_lower_case": flags.FLAGS.do_lower_case,
                      "output_file": flags.FLAGS.output_file,
                      "dupe_factor_default": flags.FLAGS["dupe_factor"].default}))
""")


def _corpus(path):
    sentences = [f"The {a} river runs past the {b} stone near town number {n}."
                 for n, (a, b) in enumerate(zip(["green", "cold", "quiet", "old"] * 8,
                                                ["grey", "small", "round", "wet"] * 8))]
    documents = ["\n".join(sentences[i:i + 4]) for i in range(0, len(sentences), 4)]
    path.write_text("\n\n".join(documents) + "\n")


@pytest.mark.parametrize("order", ["forward", "reversed"])
def test_all_command_modules_import_in_both_orders_and_two_commands_run(order, tmp_path):
    modules = COMMAND_MODULES if order == "forward" else COMMAND_MODULES[::-1]
    corpus = tmp_path / "corpus.txt"
    _corpus(corpus)
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([zygote.shared_python(), "-c", _SCRIPT, json.dumps(modules), str(corpus),
                           str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads(proc.stdout.strip().splitlines()[-1])
    assert state == {"do_lower_case": True, "output_file": f"{tmp_path}/train.tfrecord",
                     "dupe_factor_default": 10}
    vocab = (tmp_path / "vocab.txt").read_text().split()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert "The" in vocab  # cased, as --nodo_lower_case asked
    records = (tmp_path / "train.tfrecord").read_bytes()
    assert records.count(b"masked_lm_positions") >= 8


def test_every_flag_name_has_one_definition_and_groups_name_only_defined_flags():
    groups = [getattr(cli_flags, name) for name in dir(cli_flags) if name.isupper()
              and isinstance(getattr(cli_flags, name), tuple)]
    assert all(name in cli_flags._DEFINITIONS for group in groups for name in group)
    source = open(cli_flags.__file__, encoding="utf-8").read()
    for name in cli_flags._DEFINITIONS:
        assert len(re.findall(rf'_flag\([\w.]+, "{name}",', source)) == 1, name
    package = os.path.join(REPO, "bert_tf")
    for root, _, files in os.walk(package):
        for file in files:
            path = os.path.join(root, file)
            if file.endswith(".py") and path != cli_flags.__file__:
                assert "DEFINE_" not in open(path, encoding="utf-8").read(), path


def test_groups_are_idempotent_and_each_command_keeps_its_defaults():
    from bert_tf.cli import export_saved_model, prepare_demo_data, pretrain, squad

    flag_values = flags.FlagValues()
    pretrain.define_flags(flag_values)
    assert flag_values["max_seq_length"].default == 128
    assert flag_values["save_checkpoints_steps"].default == 1000
    squad.define_flags(flag_values)
    # Unset: the run's recorded length, else 384 (finetuning_config.resolve_from_run).
    assert flag_values["max_seq_length"].default is None
    assert flag_values["save_checkpoints_steps"].default is None
    export_saved_model.define_flags(flag_values)
    assert flag_values["max_seq_length"].default is None
    assert flag_values["do_lower_case"].default is None
    prepare_demo_data.define_flags(flag_values)
    assert (flag_values["output_dir"].default, flag_values["dupe_factor"].default) == (
        "/tmp/bert_tf_demo", 5)
    pretrain.define_flags(flag_values)
    assert flag_values["max_seq_length"].default == 128
    assert flag_values["do_lower_case"].default is True
    assert flag_values["output_dir"].default is None


# A field left None when its flag is not given (the driver decides) differs from the flag's
# default; --from and --to are Python keywords, so their fields are from_format and to_format.
_UNSET_FIELDS = {
    "pretrain": {"max_predictions_per_seq": (20, None), "do_lower_case": (True, None)},
    "create_pretraining_data": {"max_predictions_per_seq": (20, None),
                                "do_lower_case": (True, None)},
    "build_vocab": {"max_input_chars_per_word": (200, None), "max_unique_chars": (1000, None),
                    "min_frequency": (2, None)},
    "export_saved_model": {"signatures": (["ids", "text", "examples"], None)},
    "embed": {"pooling": (["mean"], None), "normalize": (True, None)},
}
_RENAMED_FIELDS = {"from_format": "from", "to_format": "to"}


@pytest.mark.parametrize("command, config", [
    ("pretrain", "bert_tf.jobs.pretraining_config.PretrainingConfig"),
    ("classify", "bert_tf.jobs.finetuning_config.ClassificationConfig"),
    ("tag", "bert_tf.jobs.finetuning_config.TaggingConfig"),
    ("squad", "bert_tf.jobs.finetuning_config.SquadConfig"),
    ("embed", "bert_tf.jobs.embedding_config.EmbeddingConfig"),
    ("create_pretraining_data", "bert_tf.jobs.pretraining_data.PretrainingDataConfig"),
    ("build_vocab", "bert_tf.jobs.vocabulary.VocabularyConfig"),
    ("export_saved_model", "bert_tf.jobs.export.ExportConfig"),
    ("extract_features", "bert_tf.jobs.extract_features_config.ExtractFeaturesConfig"),
    ("convert_checkpoint", "bert_tf.jobs.convert_checkpoint.ConvertCheckpointConfig"),
    ("prepare_demo_data", "bert_tf.data.pretraining.demo_corpus.DemoDataConfig"),
])
def test_each_command_config_is_its_flags(command, config):
    # The config a driver takes has one field per flag of the command, with the flag's default
    # (pre-training: an unset --max_predictions_per_seq is None, the packed input decides P; an
    # unset --do_lower_case is None, the driver resolves it).
    import importlib

    from bert_tf.jobs import sections

    module, _, name = config.rpartition(".")
    config_class = getattr(importlib.import_module(module), name)
    flag_values = importlib.import_module(f"bert_tf.cli.{command}").define_flags(
        flags.FlagValues())
    # A training job's settings are in its task, trainer and runtime sections.
    defaults = sections.flat_values(config_class())
    fields = {_RENAMED_FIELDS.get(name, name): value for name, value in defaults.items()}
    assert set(fields) == set(flag_values)
    differing = {n: (flag_values[n].default, d) for n, d in fields.items()
                 if flag_values[n].default != d}
    assert differing == _UNSET_FIELDS.get(command, {})


def test_unset_flags_become_none_and_given_ones_keep_their_value():
    from bert_tf.cli import create_pretraining_data

    def config_of(*args):
        flag_values = create_pretraining_data.define_flags(flags.FlagValues())
        flag_values(["cpd", "--input_file=a", "--output_file=b", "--vocab_file=v", *args])
        return create_pretraining_data.pretraining_data_config(flag_values)

    config = config_of()
    assert (config.do_lower_case, config.max_predictions_per_seq) == (None, None)
    config = config_of("--nodo_lower_case", "--max_predictions_per_seq=20")
    assert (config.do_lower_case, config.max_predictions_per_seq) == (False, 20)
    assert config.input_file == "a" and config.dupe_factor == 10


def test_only_the_command_layer_reads_flags():
    # bert_tf/cli/ and the run_*.py aliases of its commands are the command layer; nothing
    # below it imports absl.flags, touches FLAGS or imports the command layer.
    package = os.path.join(REPO, "bert_tf")
    reads_flags = re.compile(r"^\s*(from absl import .*\bflags\b|import absl\.flags"
                             r"|from bert_tf\.cli\b|from bert_tf import cli\b"
                             r"|import bert_tf\.cli\b)|\bFLAGS\b", re.M)
    readers = []
    for root, _, files in os.walk(package):
        for file in files:
            path = os.path.join(root, file)
            relative = os.path.relpath(path, package)
            if (not file.endswith(".py") or relative.startswith("cli" + os.sep)
                    or (os.sep not in relative and file.startswith("run_"))):
                continue
            if reads_flags.search(open(path, encoding="utf-8").read()):
                readers.append(relative)
    assert readers == []
