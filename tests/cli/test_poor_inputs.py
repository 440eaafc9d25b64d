"""Never destroy, round two, the "poor" list: each bad input answered in one line naming the
file, flag or field at fault and its cause (issue 37), not a traceback, a bare codec error, the
whole --help or the wrong cause.

The commands run one after another in one process (tests/command_batch.py); the writes that
fail (a file size limit, as a full disk would) and TF_CONFIG run in a second one.
"""

import json
import os
import resource
import shutil

import pytest

from bpe_fixtures import BPE_TOKENIZER_JSON, make_modernbert_dir
from command_batch import REPO_ROOT, run_commands
from embedding_helpers import make_st_dir, write_pairs

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("poor_inputs")

FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures", "runs_v0_1")
HF_BERT = os.path.join(REPO_ROOT, "tests", "interop", "fixtures", "hf_bert_gelu")
FIELD_LIMIT = 131072  # the csv module's default field size limit


def tool(name):
    return os.path.join(REPO_ROOT, "tools", f"{name}.py")


def truncate(path):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


def write_records_with_a_late_bad_id(source, target, bad_id):
    """`source`'s records with every record after the first given input id `bad_id` (the
    first record, which is checked up front, stays in range)."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(target)) as writer:
        for number, raw in enumerate(tf.data.TFRecordDataset(str(source)).as_numpy_iterator()):
            example = tf.train.Example.FromString(raw)
            if number:
                example.features.feature["input_ids"].int64_list.value[1] = bad_id
            writer.write(example.SerializeToString())


def last_line(result):
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else ""


def refused(result, message):
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert last_line(result) == message


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(root, {case: result}) of every command below, run in one process in `root`."""
    root = tmp_path_factory.mktemp("poor")
    shutil.copytree(FIXTURES, root / "fx")
    shutil.copytree(HF_BERT, root / "hf_cut")
    truncate(root / "hf_cut" / "model.safetensors")
    make_st_dir(root / "st")
    make_st_dir(root / "st_cut")
    truncate(root / "st_cut" / "model.safetensors")
    write_pairs(root / "pairs.tsv", 20)
    shutil.copy(root / "pairs.tsv", root / "big.tsv")
    with open(root / "big.tsv", "a", encoding="utf-8") as f:
        f.write(f"the cat {'x' * (2 * FIELD_LIMIT)}\tthe dog\n")  # line 22
    (root / "folder").mkdir()
    os.symlink("loop.txt", root / "loop.txt")
    (root / "lines.txt").write_text("the cat sat\nthe dog ran\n")
    (root / "calibration.txt").write_bytes(b"the cat\n\xd0\xff\x00\x81 binary\n")
    write_records_with_a_late_bad_id(root / "fx" / "records.tfrecord", root / "late.tfrecord",
                                     bad_id=110)
    tokenizer = json.loads(open(BPE_TOKENIZER_JSON, encoding="utf-8").read())
    vocab = tokenizer["model"]["vocab"]
    last, before_last = list(vocab)[-1], list(vocab)[-2]
    vocab[last] = vocab[before_last]
    (root / "dup_ids").mkdir()
    (root / "dup_ids" / "tokenizer.json").write_text(json.dumps(tokenizer))
    tokenizer["model"]["vocab"], tokenizer["model"]["merges"] = {}, []
    tokenizer["added_tokens"] = []
    (root / "no_vocab").mkdir()
    (root / "no_vocab" / "tokenizer.json").write_text(json.dumps(tokenizer))
    make_modernbert_dir(root / "modernbert")
    # Round three: a run with a Hugging Face model copied in (two models, one directory); a
    # fake and a truncated .keras file; a folder of an earlier conversion and a user's file;
    # runs whose lock file is a link to the user's notes; the export directory a link.
    shutil.copytree(root / "fx" / "pretrain_text", root / "two")
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(HF_BERT, name), root / "two" / name)
    (root / "fake.keras").write_text("not a model\n")
    shutil.copy(root / "fx" / "pretrain_text" / "pretrainer.keras", root / "cut.keras")
    truncate(root / "cut.keras")
    (root / "converted").mkdir()
    for name in ("bert_config.json", "vocab.txt", "notes.txt"):
        (root / "converted" / name).write_text("x\n")
    (root / "notes.txt").write_text("my notes\n")
    for run in ("classifier", "embed"):
        shutil.copytree(root / "fx" / run, root / f"{run}_linked")
        lock = root / f"{run}_linked" / ".bert_tf_run.lock"
        if lock.exists():
            os.remove(lock)
        os.symlink(root / "notes.txt", lock)
    (root / "sm").mkdir()
    (root / "served" / "v1").mkdir(parents=True)
    os.symlink(root / "served" / "v1", root / "sm" / "1")
    classify = ["--text_a_column=sentence", "--label_column=label", "--max_seq_length=16",
                "--train_file=fx/inputs/train.tsv", "--do_train", "--train_batch_size=4"]
    cases = {
        # A truncated model.safetensors: SafetensorError tracebacks.
        "cut_convert": ("convert_checkpoint", [
            "--from=huggingface", "--to=bert_tf", "--checkpoint=hf_cut", "--output_dir=c1"]),
        "cut_classify": ("bert_tf.run_classifier", [
            "--init_checkpoint=hf_cut", "--output_dir=c2", *classify]),
        "cut_embed": ("embed", [
            "--init_checkpoint=st_cut", "--train_file=pairs.tsv", "--output_dir=c3",
            "--train_batch_size=4"]),
        "cut_extract": ("extract_features", [
            "--init_checkpoint=hf_cut", "--input_file=lines.txt", "--output_file=c4.jsonl",
            "--max_seq_length=16", "--layers=-1"]),
        # A 2 MB field: the csv module's "field larger than field limit", a traceback.
        "big_field": ("embed", [
            "--init_checkpoint=st", "--train_file=big.tsv", "--output_dir=c5",
            "--train_batch_size=4"]),
        "bad_pooling": ("embed", [
            "--init_checkpoint=st", "--train_file=pairs.tsv", "--output_dir=c6",
            "--train_batch_size=4", "--pooling=median"]),
        # A directory where a file is expected: "is empty", "no such file", "matches no
        # file", [Errno 21].
        "dir_extract": ("extract_features", [
            "--init_checkpoint=fx/pretrain_text", "--input_file=folder",
            "--output_file=c7.jsonl", "--max_seq_length=16", "--layers=-1"]),
        "dir_encode": ("embed", [
            "--init_checkpoint=st", "--input_file=folder", "--output_file=c8.npy"]),
        "dir_build_vocab": ("build_vocab", [
            "--input_file=folder", "--vocab_size=40", "--output_file=c9.txt"]),
        "dir_records": ("create_pretraining_data", [
            "--input_file=folder", "--vocab_file=fx/inputs/vocab.txt",
            "--output_file=c10.tfrecord", "--max_seq_length=16"]),
        "dir_train_file": ("bert_tf.run_classifier", [
            "--init_checkpoint=fx/pretrain_text", "--output_dir=c11",
            *[a for a in classify if not a.startswith("--train_file")],
            "--train_file=folder"]),
        "dir_config": ("bert_tf.run_classifier", [
            "--bert_config_file=folder", "--vocab_file=fx/inputs/vocab.txt",
            "--output_dir=c12", *classify]),
        "loop_vocab": ("bert_tf.run_classifier", [
            "--init_checkpoint=fx/pretrain_text", "--vocab_file=loop.txt",
            "--output_dir=c13", *classify]),
        # A record past vocab_size after the first: an InvalidArgumentError traceback.
        "late_bad_id": ("bert_tf.run_pretraining", [
            "--input_file=late.tfrecord", "--bert_config_file=fx/inputs/bert_config.json",
            "--output_dir=c14", "--max_seq_length=32", "--max_predictions_per_seq=5",
            "--train_batch_size=4", "--num_train_steps=4", "--num_warmup_steps=0",
            "--steps_per_loop=1", "--do_train"]),
        # Refusals that printed the whole --help first.
        "export_no_flags": ("export_saved_model", []),
        "build_vocab_no_input": ("build_vocab", ["--vocab_size=40", "--output_file=c15.txt"]),
        "build_vocab_bad_size": ("build_vocab", [
            "--input_file=lines.txt", "--vocab_size=0", "--output_file=c16.txt"]),
        # Tokenizer files: a duplicate id reported as a missing merge; an empty vocabulary.
        "dup_ids": ("create_pretraining_data", [
            "--input_file=lines.txt", "--vocab_file=dup_ids/tokenizer.json",
            "--output_file=c17.tfrecord", "--max_seq_length=16"]),
        "no_vocab": ("create_pretraining_data", [
            "--input_file=lines.txt", "--vocab_file=no_vocab/tokenizer.json",
            "--output_file=c18.tfrecord", "--max_seq_length=16"]),
        # Evaluation of a run's own weights asked for --bert_config_file.
        "eval_only_own_run": ("bert_tf.run_classifier", [
            "--output_dir=fx/classifier", "--do_eval", "--dev_file=fx/inputs/dev.tsv",
            "--text_a_column=sentence", "--label_column=label", "--max_seq_length=32"]),
        # A changed objective on resume: "move them away to start afresh".
        "resume_without_nsp": ("bert_tf.run_pretraining", [
            "--flagfile=fx/pretrain_text/run_pretraining.flags", "--output_dir=fx/pretrain_text",
            "--bert_config_file=fx/inputs/bert_config.json", "--vocab_file=fx/inputs/vocab.txt",
            "--input_text_file=fx/inputs/corpus.txt", "--nouse_next_sentence_label",
            "--num_train_steps=3"]),
        # A ModernBERT conversion over its own earlier output (tokenizer.json).
        "modernbert_to_hf": ("convert_checkpoint", [
            "--from=huggingface", "--to=huggingface", "--checkpoint=modernbert",
            "--output_dir=mb_hf"]),
        "modernbert_to_hf_again": ("convert_checkpoint", [
            "--from=huggingface", "--to=huggingface", "--checkpoint=modernbert",
            "--output_dir=mb_hf", "--overwrite"]),
        "modernbert_to_bert_tf": ("convert_checkpoint", [
            "--from=huggingface", "--to=bert_tf", "--checkpoint=modernbert",
            "--output_dir=mb_tf"]),
        "modernbert_to_bert_tf_again": ("convert_checkpoint", [
            "--from=huggingface", "--to=bert_tf", "--checkpoint=modernbert",
            "--output_dir=mb_tf", "--overwrite"]),
        # LiteRT: a binary calibration file; an export into a SavedModel export.
        "binary_calibration": ("export_saved_model", [
            "--model_dir=fx/classifier", "--export_dir=lite/1", "--format=litert",
            "--quantize=full_int8", "--calibration_file=calibration.txt"]),
        "saved_model": ("export_saved_model", [
            "--model_dir=fx/classifier", "--export_dir=sm/1", "--signatures=ids"]),
        "litert_into_saved_model": ("export_saved_model", [
            "--model_dir=fx/classifier", "--export_dir=sm/1", "--format=litert",
            "--overwrite"]),
        # Round three. --overwrite through the link sm/1: the link was replaced by a
        # directory and a hidden .tmp_old_export_* left beside it.
        "saved_model_again": ("export_saved_model", [
            "--model_dir=fx/classifier", "--export_dir=sm/1", "--signatures=ids",
            "--overwrite"]),
        # A SavedModel as --init_checkpoint: "--vocab_file is required".
        "classify_from_saved_model": ("bert_tf.run_classifier", [
            "--init_checkpoint=sm/1", "--output_dir=c19", *classify]),
        "pretrain_from_saved_model": ("bert_tf.run_pretraining", [
            "--init_checkpoint=sm/1", "--output_dir=c20", "--input_text_file=lines.txt",
            "--vocab_file=fx/inputs/vocab.txt", "--do_train"]),
        # Two models in one directory, read as one without a word.
        "classify_from_two": ("bert_tf.run_classifier", [
            "--init_checkpoint=two", "--output_dir=c21", *classify]),
        "extract_from_two": ("extract_features", [
            "--init_checkpoint=two", "--input_file=lines.txt", "--output_file=c22.jsonl",
            "--max_seq_length=16", "--layers=-1"]),
        "export_two": ("export_saved_model", ["--model_dir=two", "--export_dir=c28/1"]),
        # A fake or truncated .keras file: Keras' "File not found".
        "export_fake_keras": ("export_saved_model", [
            "--model_dir=fake.keras", "--export_dir=c23/1"]),
        "embed_cut_keras": ("embed", [
            "--init_checkpoint=cut.keras", "--vocab_file=fx/inputs/vocab.txt",
            "--input_file=lines.txt", "--output_file=c24.npy"]),
        "classify_cut_keras": ("bert_tf.run_classifier", [
            "--init_checkpoint=cut.keras", "--vocab_file=fx/inputs/vocab.txt",
            "--output_dir=c25", *classify]),
        # The conversion's own files listed as foreign to it.
        "convert_over_a_users_file": ("convert_checkpoint", [
            "--from=bert_tf", "--to=tf1", "--checkpoint=fx/pretrain_text",
            "--output_dir=converted", "--overwrite"]),
        "convert_mode": ("convert_checkpoint", [
            "--from=bert_tf", "--to=bert_tf", "--checkpoint=fx/pretrain_text",
            "--output_dir=c26"]),
        # Lock files that are links: written through, then emptied.
        "classify_linked_lock": ("bert_tf.run_classifier", [
            "--output_dir=classifier_linked", "--do_eval", "--dev_file=fx/inputs/dev.tsv",
            "--text_a_column=sentence", "--label_column=label", "--max_seq_length=32"]),
        "embed_linked_lock": ("embed", [
            "--init_checkpoint=fx/pretrain_text", "--train_file=fx/inputs/pairs.tsv",
            "--output_dir=embed_linked", "--sentence_transformers_dir=-",
            "--train_batch_size=8", "--max_seq_length=32", "--num_train_epochs=2"]),
        # Evaluation without training and without a fine-tuned head: refused after it had
        # written feature records and a lock into its --output_dir.
        "eval_without_a_head": ("bert_tf.run_classifier", [
            "--init_checkpoint=fx/pretrain_text", "--output_dir=c27", "--do_eval",
            "--dev_file=fx/inputs/dev.tsv", "--text_a_column=sentence", "--label_column=label",
            "--labels=neg,pos", "--max_seq_length=32"]),
    }
    results = run_commands([(p if p.startswith("bert_tf.") else tool(p), args)
                            for p, args in cases.values()], cwd=str(root))
    return root, dict(zip(cases, results))


def test_a_truncated_safetensors_file_is_one_line_in_every_command(runs):
    root, results = runs
    cause = ("not a readable safetensors file (Error while deserializing header: incomplete "
             "metadata, file not fully covered); it is truncated or corrupt (an interrupted "
             "download or copy?): fetch it again")
    for case, program, model in (("cut_convert", "convert_checkpoint", "hf_cut"),
                                 ("cut_classify", "run_classifier", "hf_cut"),
                                 ("cut_embed", "embed", "st_cut"),
                                 ("cut_extract", "extract_features", "hf_cut")):
        refused(results[case], f"{program}: error: {model}/model.safetensors: {cause}")
    # Refused before any output is made, fine-tuning's run directory included.
    assert not any((root / name).exists() for name in ("c1", "c2", "c3", "c4.jsonl"))


def test_a_field_over_the_csv_limit_names_file_and_line(runs):
    _, results = runs
    refused(results["big_field"],
            f"embed: error: big.tsv:22: a field of more than {FIELD_LIMIT} characters, the "
            "most a row may hold (a quote never closed, or a whole document where one text was "
            "expected?)")


def test_a_bad_pooling_is_refused_before_the_model_loads(runs):
    _, results = runs
    refused(results["bad_pooling"],
            "embed: error: --pooling: pooling modes ['median']; expected one or more distinct "
            "of cls, max, mean, mean_sqrt_len_tokens")
    assert "Warm start" not in results["bad_pooling"].stderr


def test_a_directory_given_as_a_file_is_named_as_one(runs):
    _, results = runs
    refused(results["dir_extract"],
            "extract_features: error: --input_file=folder is a directory; expected a file")
    refused(results["dir_encode"],
            "embed: error: --input_file=folder is a directory; expected a file")
    refused(results["dir_build_vocab"],
            "build_vocab: error: Input 'folder' is a directory; expected a file or a glob of "
            "files (e.g. 'folder/*').")
    refused(results["dir_records"],
            'create_pretraining_data: error: Input "folder" is a directory; expected a file or '
            'a glob of files (e.g. "folder/*").')
    refused(results["dir_train_file"],
            "run_classifier: error: --train_file=folder is a directory; expected a file")
    refused(results["dir_config"],
            "run_classifier: error: --bert_config_file=folder is a directory; expected a file "
            "(a model directory goes to --init_checkpoint)")
    refused(results["loop_vocab"],
            "run_classifier: error: --vocab_file=loop.txt: vocab_file 'loop.txt' is a symbolic "
            "link that loops (it leads back to itself)")


def test_a_record_id_past_vocab_size_after_the_first_record_is_one_line(runs):
    _, results = runs
    refused(results["late_bad_id"],
            "run_pretraining: error: --input_file: late.tfrecord: a record's feature "
            "input_word_ids holds id 110, outside the vocabulary [0, 108) (vocab_size of the "
            "model's config); were the records made with another vocab? (the first record of "
            "the file was in range, a later one is not)")


def test_refusals_give_the_reason_and_where_help_is_not_the_whole_help(runs):
    _, results = runs
    for case, lines in (("export_no_flags", [
            "export_saved_model: error: pass --model_dir and --export_dir (or --check "
            "EXPORT_DIR); --helpshort lists the flags"]),
            ("build_vocab_no_input", [
                "FATAL Flags parsing error: flag --input_file=None: Flag --input_file must "
                "have a value other than None.",
                "Pass --helpshort or --helpfull to see help on flags."]),
            ("build_vocab_bad_size", ["build_vocab: error: --vocab_size=0 must be positive."])):
        assert results[case].returncode == 1
        assert results[case].stderr.strip().splitlines() == lines


def test_tokenizer_files_name_a_duplicate_id_and_an_empty_vocabulary(runs):
    root, results = runs
    vocab = json.loads((root / "dup_ids" / "tokenizer.json").read_text())["model"]["vocab"]
    first, second = list(vocab)[-2:]
    refused(results["dup_ids"],
            "create_pretraining_data: error: tokenizer file 'dup_ids/tokenizer.json': "
            f"model.vocab gives id {vocab[second]} to both '{first}' and '{second}'; each id "
            "must be one token's.")
    refused(results["no_vocab"],
            "create_pretraining_data: error: tokenizer file 'no_vocab/tokenizer.json': the "
            "vocabulary is empty.")


def test_evaluating_a_runs_own_weights_needs_no_config_flag(runs):
    root, results = runs
    result = results["eval_only_own_run"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Restored" in result.stderr or "eval_accuracy" in result.stderr + result.stdout


def test_a_changed_objective_on_resume_names_the_flag(runs):
    root, results = runs
    refused(results["resume_without_nsp"],
            "run_pretraining: error: --output_dir=fx/pretrain_text holds checkpoints of a run "
            "with other settings (fx/pretrain_text/run_pretraining.flags); resuming would mix "
            "them: --use_next_sentence_label=true then, false now. Rerun with the run's "
            "settings to resume it, or choose a new --output_dir "
            "(--init_checkpoint=fx/pretrain_text starts from its weights)")
    assert "move them away" not in results["resume_without_nsp"].stderr


def test_a_modernbert_conversion_replaces_its_own_earlier_output(runs):
    root, results = runs
    for case in ("modernbert_to_hf", "modernbert_to_hf_again", "modernbert_to_bert_tf",
                 "modernbert_to_bert_tf_again"):
        assert results[case].returncode == 0, results[case].stderr[-3000:]
    assert sorted(os.listdir(root / "mb_hf")) == ["config.json", "model.safetensors",
                                                  "tokenizer.json"]
    assert "tokenizer.json" in os.listdir(root / "mb_tf")


def test_litert_refuses_a_binary_calibration_file_and_a_saved_model_directory(runs):
    root, results = runs
    refused(results["binary_calibration"],
            "export_saved_model: error: --calibration_file=calibration.txt:2 is not UTF-8 text "
            "(byte 0xd0); expected texts, one per line, or a .tsv/.csv/.jsonl of them (is it a "
            "binary file?)")
    assert not (root / "lite").exists()
    assert results["saved_model"].returncode == 0, results["saved_model"].stderr[-3000:]
    refused(results["litert_into_saved_model"],
            "export_saved_model: error: --export_dir=sm/1 holds a SavedModel export "
            "(saved_model.pb); a command never writes into a model directory that is not its "
            "own earlier output: choose a new directory")
    assert "saved_model.pb" in os.listdir(root / "sm" / "1")


def _limit_file_size():
    # 200 KiB per file: the tiny classifier's variables do not fit, as on a full disk.
    resource.setrlimit(resource.RLIMIT_FSIZE, (200 * 1024, 200 * 1024))


def test_failed_writes_and_a_bad_tf_config_are_one_line(tmp_path):
    """Writing a SavedModel or a LiteRT model that fails (here at a file size limit, as on a
    full disk) names the export and leaves nothing; a malformed TF_CONFIG is one line."""
    shutil.copytree(os.path.join(FIXTURES, "classifier"), tmp_path / "run")
    shutil.copytree(os.path.join(FIXTURES, "inputs"), tmp_path / "inputs")
    env = dict(os.environ, TF_CONFIG='{"cluster": {"worker": ["localhost:1"]}, "task": '
                                     '{"type": "worker", "index": 2}}')
    results = run_commands([
        (tool("export_saved_model"), ["--model_dir=run", "--export_dir=out/1"]),
        (tool("export_saved_model"), ["--model_dir=run", "--export_dir=lite/1",
                                      "--format=litert"]),
        ("bert_tf.run_pretraining", [
            "--bert_config_file=inputs/bert_config.json", "--vocab_file=inputs/vocab.txt",
            "--input_text_file=inputs/corpus.txt", "--output_dir=pre", "--max_seq_length=32",
            "--distribution_strategy=multi_worker_mirrored", "--do_train"]),
    ], env=env, cwd=str(tmp_path), preexec_fn=_limit_file_size)
    refused(results[0], f"export_saved_model: error: {tmp_path}/out/1: cannot write the "
                        "SavedModel (File too large); nothing was written there")
    assert os.listdir(tmp_path / "out") == []
    assert results[1].returncode == 1 and "Traceback" not in results[1].stderr
    assert last_line(results[1]).endswith(": cannot write the frozen model the LiteRT "
                                          "converter reads (File too large); nothing was "
                                          "written there")
    assert not (tmp_path / "lite" / "1").exists()
    refused(results[2], "run_pretraining: error: TF_CONFIG task index 2 is out of range: the "
                        "cluster's worker job has 1 host(s) (localhost:1), so index is 0 to 0")
    assert not (tmp_path / "pre").exists()


NOTES_LINK = ("its lock file {run}/.bert_tf_run.lock is a symbolic link (to {root}/notes.txt); a "
              "run locks a file of its own and never writes through another: remove it (what it "
              "names is left as it is), or choose another --output_dir")


def test_a_lock_file_that_is_a_link_is_refused_by_every_command_that_locks(runs):
    """Never destroy, round three: the lock record was written through a link in the lock's
    place, and release emptied its target (the user's notes here)."""
    root, results = runs
    for case, program, run in (("classify_linked_lock", "run_classifier", "classifier_linked"),
                               ("embed_linked_lock", "embed", "embed_linked")):
        refused(results[case], f"{program}: error: --output_dir={run}: "
                + NOTES_LINK.format(run=run, root=root))
    assert (root / "notes.txt").read_text() == "my notes\n"
    assert not (root / "classifier_linked" / "eval_only_results.jsonl").exists()
    assert not [n for n in os.listdir(root / "embed_linked") if n.startswith("ckpt-8")]


def test_an_export_through_a_linked_export_dir_keeps_the_link(runs):
    root, results = runs
    assert results["saved_model_again"].returncode == 0, \
        results["saved_model_again"].stderr[-3000:]
    assert os.path.islink(root / "sm" / "1")
    assert "saved_model.pb" in os.listdir(root / "served" / "v1")
    assert sorted(os.listdir(root / "sm")) == ["1"] and os.listdir(root / "served") == ["v1"]


def test_what_is_no_model_to_start_from_is_named_in_one_line(runs):
    """A SavedModel export, a directory of two models, a fake or truncated .keras file given
    as the model: "--vocab_file is required", a silent pick of one model, "File not found"."""
    root, results = runs
    export = ("--init_checkpoint=sm/1 holds a SavedModel export (saved_model.pb), a serving "
              "graph that a model does not start from: give the run or .keras model it was "
              "exported from (the --model_dir of bert-tf-export)")
    refused(results["classify_from_saved_model"], f"run_classifier: error: {export}")
    refused(results["pretrain_from_saved_model"], f"run_pretraining: error: {export}")
    two = ("two holds two models, a training run (.bert_tf_run.lock, checkpoint, ckpt-2.index, "
           "results.json, ...) and a Hugging Face model (config.json, model.safetensors), and "
           "would be read as one of them without a word: name the one to read "
           "(two/pretrainer.keras or two/model.safetensors), or move one to a directory of its "
           "own")
    refused(results["classify_from_two"], f"run_classifier: error: --init_checkpoint={two}")
    refused(results["extract_from_two"], f"extract_features: error: --init_checkpoint={two}")
    refused(results["export_two"], f"export_saved_model: error: --model_dir={two}")
    unreadable = ("not a readable .keras file (File is not a zip file); it is truncated or is "
                  "not a Keras model file (an interrupted copy or download?): save or fetch it "
                  "again")
    refused(results["export_fake_keras"], f"export_saved_model: error: fake.keras: {unreadable}")
    refused(results["embed_cut_keras"],
            f"embed: error: --init_checkpoint=cut.keras: {unreadable}")
    refused(results["classify_cut_keras"],
            f"run_classifier: error: --init_checkpoint=cut.keras: {unreadable}")
    assert not any((root / f"c{n}").exists() for n in (19, 20, 21, 23, 25, 28))
    assert not (root / "c22.jsonl").exists() and not (root / "c24.npy").exists()


def test_conversions_name_only_foreign_files_and_are_readable_as_the_umask_allows(runs):
    import stat

    root, results = runs
    refused(results["convert_over_a_users_file"],
            "convert_checkpoint: error: --output_dir=converted holds files no conversion to "
            "--to=tf1 writes (notes.txt); choose a new or empty directory")
    from bert_tf import fileio

    assert results["convert_mode"].returncode == 0, results["convert_mode"].stderr[-3000:]
    assert stat.S_IMODE(os.stat(root / "c26").st_mode) == 0o777 & ~fileio.current_umask()


def test_an_evaluation_refused_for_want_of_a_head_writes_nothing(runs):
    root, results = runs
    assert results["eval_without_a_head"].returncode == 1
    assert "has no BertClassifier head" in last_line(results["eval_without_a_head"])
    assert not (root / "c27").exists()
