"""Never destroy, round two: the output rule at model directories of every format and at the
files a command reads beside --init_checkpoint (bert_tf.cli.outputs, bert_tf.model_directory).

Each case ran to exit 0 before and replaced or corrupted what the user had; now each is refused
in one line naming the flag, and every file that could have been lost hashes as before. The
commands run one after another in one process (tests/command_batch.py).
"""

import os
import shutil

import pytest

from command_batch import REPO_ROOT, run_commands
from file_digests import digest
from embedding_helpers import make_st_dir, write_pairs

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("model_directories")

FIXTURE_RUN = os.path.join(REPO_ROOT, "tests", "fixtures", "runs_v0_1", "pretrain_text")
NEVER = ("a command never writes into a model directory that is not its own earlier output: "
         "choose a new directory")


def tool(name):
    return os.path.join(REPO_ROOT, "tools", f"{name}.py")


def last_line(result):
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else ""


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """(root, {name: digest before}, {case: result}): a cased pre-training run R (release
    0.1's), a sentence-transformers model ST, a converted bert_tf model D and a model in
    Google's original layout M (both made by bert-tf-convert-checkpoint here), and every
    refused command of the cases, run in one process."""
    root = tmp_path_factory.mktemp("model_dirs")
    shutil.copytree(FIXTURE_RUN, root / "R")
    make_st_dir(root / "st")
    write_pairs(root / "pairs.tsv", 20)
    (root / "lines.txt").write_text("the cat sat\nthe dog ran\n")
    (root / "data").mkdir()  # the user's folder: their own config and vocabulary
    (root / "data" / "bert_config.json").write_text('{"vocab_size": 30522}\n')
    (root / "data" / "vocab.txt").write_text("[PAD]\nmine\n")
    with open(root / "R" / "vocab.txt", encoding="utf-8") as f:
        (root / "other_vocab.txt").write_text(f.read().replace("\nmovie\n", "\ncinema\n"))
    made = run_commands([(tool("convert_checkpoint"), [
        "--from=bert_tf", f"--to={to}", f"--checkpoint={root / 'R'}",
        f"--output_dir={root / name}"]) for to, name in (("bert_tf", "D"), ("tf1", "M"))])
    assert [r.returncode for r in made] == [0, 0], made[-1].stderr[-2000:]
    before = {name: digest(root / name) for name in ("R", "st", "D", "M", "data")}
    runs = {
        "embed_st_over_its_input": ("embed", [
            f"--init_checkpoint={root / 'st'}", f"--train_file={root / 'pairs.tsv'}",
            f"--output_dir={root / 'e1'}", f"--sentence_transformers_dir={root / 'st'}",
            "--train_batch_size=4"]),
        "embed_st_into_a_run": ("embed", [
            f"--init_checkpoint={root / 'st'}", f"--train_file={root / 'pairs.tsv'}",
            f"--output_dir={root / 'e2'}", f"--sentence_transformers_dir={root / 'R'}",
            "--train_batch_size=4"]),
        "features_over_the_model": ("extract_features", [
            f"--init_checkpoint={root / 'R'}", f"--input_file={root / 'lines.txt'}",
            f"--output_file={root / 'R' / 'pretrainer.keras'}", "--max_seq_length=16",
            "--layers=-1"]),
        "features_over_the_vocabulary": ("extract_features", [
            f"--init_checkpoint={root / 'R' / 'ckpt-2'}", f"--input_file={root / 'lines.txt'}",
            f"--output_file={root / 'R' / 'vocab.txt'}", "--max_seq_length=16",
            "--layers=-1"]),
        "features_two_tokens": ("extract_features", [
            f"--init_checkpoint={root / 'R'}", f"--input_file={root / 'lines.txt'}",
            f"--output_file={root / 'f.jsonl'}", "--max_seq_length=2", "--layers=-1"]),
        "pretrain_into_its_init_checkpoint": ("bert_tf.run_pretraining", [
            f"--init_checkpoint={root / 'D'}", f"--output_dir={root / 'D'}",
            f"--input_text_file={root / 'lines.txt'}", f"--vocab_file={root / 'D' / 'vocab.txt'}",
            "--max_seq_length=16", "--num_train_steps=1", "--train_batch_size=2"]),
        "tf1_over_google_layout": ("convert_checkpoint", [
            "--from=huggingface", "--to=tf1", f"--checkpoint={root / 'st'}",
            f"--output_dir={root / 'M'}"]),
        "huggingface_into_google_layout": ("convert_checkpoint", [
            "--from=huggingface", "--to=huggingface", f"--checkpoint={root / 'st'}",
            f"--output_dir={root / 'M'}", "--overwrite"]),
        "vocab_into_a_run": ("build_vocab", [
            f"--input_file={root / 'lines.txt'}", "--vocab_size=40",
            f"--output_file={root / 'R' / 'vocab.txt'}"]),
        "records_into_a_run": ("create_pretraining_data", [
            f"--input_file={root / 'lines.txt'}", f"--vocab_file={root / 'other_vocab.txt'}",
            f"--output_file={root / 'R' / 'results.json'}", "--max_seq_length=16",
            "--dupe_factor=1"]),
        "export_another_vocabulary": ("export_saved_model", [
            f"--model_dir={root / 'R'}", f"--export_dir={root / 'X' / '1'}",
            f"--vocab_file={root / 'other_vocab.txt'}", "--signatures=text"]),
        # Another vocabulary than the one beside the model read: wrong ids, exit 0.
        "features_another_vocabulary": ("extract_features", [
            f"--init_checkpoint={root / 'R'}", f"--vocab_file={root / 'other_vocab.txt'}",
            f"--input_file={root / 'lines.txt'}", f"--output_file={root / 'f2.jsonl'}",
            "--max_seq_length=16", "--layers=-1"]),
        "embed_another_vocabulary": ("embed", [
            f"--init_checkpoint={root / 'R'}", f"--vocab_file={root / 'other_vocab.txt'}",
            f"--train_file={root / 'pairs.tsv'}", f"--output_dir={root / 'e3'}",
            "--train_batch_size=4"]),
        "convert_another_vocabulary": ("convert_checkpoint", [
            "--from=bert_tf", "--to=huggingface", f"--checkpoint={root / 'R'}",
            f"--vocab_file={root / 'other_vocab.txt'}", f"--output_dir={root / 'H2'}"]),
        "pretrain_from_another_vocabulary": ("bert_tf.run_pretraining", [
            f"--init_checkpoint={root / 'R'}", f"--output_dir={root / 'P2'}",
            f"--vocab_file={root / 'other_vocab.txt'}", f"--input_text_file={root / 'lines.txt'}",
            "--max_seq_length=16", "--max_predictions_per_seq=2", "--num_train_steps=1",
            "--num_warmup_steps=0", "--train_batch_size=2", "--do_train"]),
        # A folder of the user's files that a run writes its own over.
        "classify_into_a_data_folder": ("bert_tf.run_classifier", [
            f"--init_checkpoint={root / 'R'}", f"--output_dir={root / 'data'}",
            f"--train_file={root / 'pairs.tsv'}", "--text_a_column=anchor",
            "--label_column=positive", "--do_train", "--max_seq_length=16"]),
        "export_another_casing": ("export_saved_model", [
            f"--model_dir={root / 'R'}", f"--export_dir={root / 'Y' / '1'}",
            "--do_lower_case=false", "--signatures=text"]),
        # A threshold for a model that has no labels to decide on: ignored, exit 0.
        "export_a_threshold_of_another_task": ("export_saved_model", [
            f"--model_dir={root / 'R'}", f"--export_dir={root / 'Y2' / '1'}",
            "--multi_label_threshold=0.3", "--signatures=text"]),
        # The rule's own earlier output of the same kind: replaced with --overwrite.
        "tf1_over_own_conversion": ("convert_checkpoint", [
            "--from=bert_tf", "--to=tf1", f"--checkpoint={root / 'R'}",
            f"--output_dir={root / 'M'}", "--overwrite"]),
    }
    results = run_commands([(program if program.startswith("bert_tf.") else tool(program), args)
                            for program, args in runs.values()])
    return root, before, dict(zip(runs, results))


def refused(result, message):
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert last_line(result) == message


def test_embedding_never_writes_its_st_directory_over_its_input_or_a_run(cases):
    """Case 1: --sentence_transformers_dir=ST (the input) replaced the model's weights, config
    and vocabulary; =R (a cased pre-training run) replaced R's vocab.txt with an uncased one
    and dropped Hugging Face files into it."""
    root, before, results = cases
    refused(results["embed_st_over_its_input"],
            f"embed: error: --sentence_transformers_dir={root / 'st'} holds --init_checkpoint="
            f"{root / 'st'}, which this run reads or writes; writing there would replace it: "
            "choose a new directory")
    refused(results["embed_st_into_a_run"],
            f"embed: error: --sentence_transformers_dir={root / 'R'} holds a training run "
            f"(.bert_tf_run.lock, checkpoint, ckpt-2.index, results.json, ...); {NEVER}")
    assert digest(root / "st") == before["st"] and digest(root / "R") == before["R"]
    assert not (root / "e1").exists() and not (root / "e2").exists()


def test_feature_extraction_never_writes_over_the_files_it_reads_beside_the_checkpoint(cases):
    """Case 2: --output_file=R/pretrainer.keras (or R/vocab.txt) made the run's model (or
    vocabulary) one JSON line; only an explicit --vocab_file was compared with the output."""
    root, before, results = cases
    refused(results["features_over_the_model"],
            f"extract_features: error: --output_file={root / 'R' / 'pretrainer.keras'} is read "
            f"beside --init_checkpoint={root / 'R'} ({root / 'R' / 'pretrainer.keras'}): a "
            "command never writes over its own input; choose another output")
    refused(results["features_over_the_vocabulary"],
            f"extract_features: error: --output_file={root / 'R' / 'vocab.txt'} is read beside "
            f"--init_checkpoint={root / 'R' / 'ckpt-2'} ({root / 'R' / 'vocab.txt'}): a "
            "command never writes over its own input; choose another output")
    assert digest(root / "R") == before["R"]


def test_pretraining_never_trains_into_the_model_directory_it_starts_from(cases):
    """Case 3: --init_checkpoint=D --output_dir=D (D a converted model) trained, then replaced
    the pretrainer.keras and encoder.keras it started from."""
    root, before, results = cases
    refused(results["pretrain_into_its_init_checkpoint"],
            f"run_pretraining: error: --output_dir={root / 'D'} holds a bert_tf model "
            f"(encoder.keras, pretrainer.keras); {NEVER} (--init_checkpoint may name this one)")
    assert digest(root / "D") == before["D"]


def test_conversion_never_replaces_another_model_in_googles_layout(cases):
    """Case 4: --to=tf1 into M (another model in Google's layout) replaced its weights with no
    flag asked for; --to=huggingface into it replaced only its vocab.txt. An earlier conversion
    to the same format is replaced with --overwrite only, whole."""
    root, before, results = cases
    refused(results["tf1_over_google_layout"],
            f"convert_checkpoint: error: --output_dir={root / 'M'} holds a conversion to "
            "--to=tf1 (bert_config.json, bert_model.ckpt.data-00000-of-00001, "
            "bert_model.ckpt.index, tokenizer_config.json, ...); pass --overwrite to replace it, "
            "or choose a new directory")
    refused(results["huggingface_into_google_layout"],
            f"convert_checkpoint: error: --output_dir={root / 'M'} holds a TF1 checkpoint "
            f"(bert_model.ckpt.index); {NEVER}")
    replaced = results["tf1_over_own_conversion"]
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    assert digest(root / "M") == before["M"]  # the same conversion again: the same bytes
    assert sorted(os.listdir(root)) == sorted(
        ["D", "M", "R", "data", "lines.txt", "other_vocab.txt", "pairs.tsv", "st"])  # nothing left


def test_file_outputs_are_never_placed_inside_a_run(cases):
    """Case 5: bert-tf-build-vocab --output_file=R/vocab.txt (a later fine-tuning from R then
    tokenized with the wrong vocabulary) and create_pretraining_data
    --output_file=R/results.json."""
    root, before, results = cases
    inside = (f"is inside {root / 'R'}, which holds a training run (.bert_tf_run.lock, "
              "checkpoint, ckpt-2.index, results.json, ...); a command never places an output "
              "inside a model directory: choose another location")
    refused(results["vocab_into_a_run"],
            f"build_vocab: error: --output_file={root / 'R' / 'vocab.txt'} {inside}")
    refused(results["records_into_a_run"],
            f"create_pretraining_data: error: --output_file={root / 'R' / 'results.json'} "
            f"{inside}")
    assert digest(root / "R") == before["R"]


def test_export_refuses_a_vocabulary_other_than_the_runs(cases):
    """Case 8: --model_dir=RUN --vocab_file=OTHER exported another vocabulary with the model,
    so serve_text fed it wrong ids."""
    root, _, results = cases
    refused(results["export_another_vocabulary"],
            f"export_saved_model: error: --vocab_file={root / 'other_vocab.txt'} differs from "
            f"{root / 'R' / 'vocab.txt'} beside --model_dir={root / 'R'}: id 12 is 'cinema', "
            "not 'movie'; the model's embeddings are indexed by that vocabulary (leave "
            "--vocab_file out to use it)")
    assert not (root / "X").exists()


def test_commands_reading_a_model_refuse_another_vocabulary(cases):
    """extract-features, embed, convert-checkpoint and pre-training from --init_checkpoint=R
    with --vocab_file=OTHER (one token changed) wrote features, trained, converted and saved
    with ids the model's embeddings do not index, exit 0 (fine-tuning and export refused)."""
    root, before, results = cases
    differs = (f"--vocab_file={root / 'other_vocab.txt'} differs from {root / 'R' / 'vocab.txt'}"
               " beside {flag}={run}: id 12 is 'cinema', not 'movie'; the model's embeddings "
               "are indexed by that vocabulary (leave --vocab_file out to use it)")
    for case, program, flag in (("features_another_vocabulary", "extract_features",
                                 "--init_checkpoint"),
                                ("embed_another_vocabulary", "embed", "--init_checkpoint"),
                                ("convert_another_vocabulary", "convert_checkpoint",
                                 "--checkpoint"),
                                ("pretrain_from_another_vocabulary", "run_pretraining",
                                 "--init_checkpoint")):
        refused(results[case], f"{program}: error: " + differs.format(flag=flag,
                                                                      run=root / "R"))
    assert not any((root / name).exists() for name in ("f2.jsonl", "e3", "H2", "P2"))
    assert digest(root / "R") == before["R"]


def test_training_never_replaces_a_users_config_or_vocabulary(cases):
    """--output_dir=data (the user's folder with their own bert_config.json and vocab.txt, no
    run): fine-tuning wrote the model's over them, exit 0."""
    root, before, results = cases
    refused(results["classify_into_a_data_folder"],
            f"run_classifier: error: --output_dir={root / 'data'} holds bert_config.json, "
            "vocab.txt but no run; run_classifier writes its own there and would replace them: "
            "choose a new or empty --output_dir (--bert_config_file and --vocab_file may name "
            "them)")
    assert digest(root / "data") == before["data"]


def test_export_refuses_a_casing_other_than_the_runs(cases):
    """--model_dir=R (an uncased run) --do_lower_case=false exported a serve_text that kept
    case, so served texts got other ids than the model was trained on, exit 0; a
    --multi_label_threshold for a model without a multi-label head is refused too."""
    root, _, results = cases
    refused(results["export_another_casing"],
            f"export_saved_model: error: --do_lower_case=False contradicts --model_dir="
            f"{root / 'R'}: its run records do_lower_case=True, the casing the model was trained "
            "with (leave --do_lower_case out to use it)")
    assert not (root / "Y").exists()
    refused(results["export_a_threshold_of_another_task"],
            "export_saved_model: error: --multi_label_threshold=0.3 applies to a multi-label "
            f"model; --model_dir={root / 'R'} holds a fill_mask model")
    assert not (root / "Y2").exists()


def test_feature_extraction_refuses_lengths_under_three(cases):
    """Case 10: --max_seq_length=2 wrote lines of only [CLS] and [SEP], exit 0."""
    root, _, results = cases
    refused(results["features_two_tokens"],
            "extract_features: error: --max_seq_length=2 must be at least 3 ([CLS], a token and "
            "[SEP])")
    assert not (root / "f.jsonl").exists()


@pytest.fixture
def classifier_run(tmp_path):
    """A fine-tuning-like run: model.keras of a tiny BertClassifier and its vocab.txt."""
    from finetuning_helpers import VOCAB, tiny_config_dict

    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertClassifier, BertEncoder

    run = tmp_path / "run"
    run.mkdir()
    BertClassifier(BertEncoder(BertConfig(**tiny_config_dict())), num_classes=2).save(
        str(run / "model.keras"))
    (run / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return run


def test_two_exports_to_one_directory_never_both_succeed(classifier_run, tmp_path, monkeypatch):
    """Case 7: two bert-tf-export to one new --export_dir at once both exited 0 and printed the
    path, and only one model was there: the emptiness check ran before loading and the final
    move replaced whatever appeared meanwhile. The other export is made here while this one
    loads its model (deterministically, no timing): this one is refused naming the directory,
    and the other's files stay byte for byte; the same with --overwrite over an earlier
    export that the other replaced meanwhile."""
    from bert_tf import fileio, serving
    from bert_tf.jobs import export

    export_dir = tmp_path / "EXPORT" / "1"
    load = serving.load_model_dir
    theirs = {}

    def load_while_another_exports(model_dir):
        source = load(model_dir)
        serving.export(source.model, str(export_dir), signatures=("ids",), overwrite=True)
        theirs.update(digest(export_dir))
        return source

    monkeypatch.setattr(serving, "load_model_dir", load_while_another_exports)
    for overwrite in (False, True):
        # overwrite: the other's earlier export is there when this export checks.
        config = export.ExportConfig(model_dir=str(classifier_run), export_dir=str(export_dir),
                                     signatures=["ids"], overwrite=overwrite)
        with pytest.raises(fileio.TargetChangedError) as raised:
            export.export(config)
        assert str(raised.value).startswith(f"{export_dir} appeared or changed after this "
                                            "command checked it")
        assert "saved_model.pb" in theirs and digest(export_dir) == theirs
        assert os.listdir(export_dir.parent) == ["1"]  # nothing staged or set aside is left
    monkeypatch.setattr(serving, "load_model_dir", load)
    # Unchanged since its check: replaced, and the export serves.
    assert export.export(config) == str(export_dir)
    assert os.listdir(export_dir.parent) == ["1"]
    import tensorflow as tf

    assert list(tf.saved_model.load(str(export_dir)).signatures) == ["serving_default"]


@pytest.mark.parametrize("to_format,names", [
    ("bert_tf", ["bert_config.json", "encoder.keras", "tokenizer_config.json", "vocab.txt"]),
    ("tf1", ["bert_config.json", "bert_model.ckpt.index", "vocab.txt"])])
def test_conversion_of_a_sentence_transformers_model_is_replaced_with_overwrite(tmp_path,
                                                                               to_format, names):
    """Such a conversion also writes sentence_bert_config.json: with --overwrite it is the
    command's own earlier output, not a folder of foreign files."""
    from bert_tf.cli import outputs

    (tmp_path / "D").mkdir()
    for name in [*names, "sentence_bert_config.json"]:
        (tmp_path / "D" / name).write_text("{}\n")
    outputs.check_conversion_output_dir(str(tmp_path / "D"), str(tmp_path / "st"),
                                        to_format=to_format, overwrite=True)
    with pytest.raises(outputs.OutputError, match=f"holds a conversion to --to={to_format} "):
        outputs.check_conversion_output_dir(str(tmp_path / "D"), str(tmp_path / "st"),
                                            to_format=to_format)
