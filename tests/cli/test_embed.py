"""bert-tf-embed: contrastive fine-tuning end to end, encoding, and bad input refused up front."""

import json
import logging
import os
import subprocess

import numpy as np
import pytest

from command_batch import REPO_ROOT, run_commands
from embedding_helpers import make_st_dir, write_json, write_pairs
import zygote
from no_tensorflow import jax_env

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("embed")

TOOL = os.path.join(REPO_ROOT, "tools", "embed.py")
TEXTS = ["alice was in paris", "the new film", "", "a story of rome and oslo and lima"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny sentence-transformers model fine-tuned on topic pairs: (directory, run dir,
    {"train", "encode", "bad_output"}: the results of tools/embed.py's runs). The runs go one
    after the other in one process (one TensorFlow start-up; each run starts from the
    command's defaults): the fine-tuning, encoding texts.txt with the run's
    sentence_transformers/ directory, and an output file of an unknown kind."""
    directory = tmp_path_factory.mktemp("embed")
    make_st_dir(directory / "st")
    write_pairs(directory / "train.tsv", 192)
    write_pairs(directory / "dev.tsv", 40, seed=1)
    write_pairs(directory / "dev_scored.tsv", 40, seed=2, scores=True)
    (directory / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    runs = {
        "train": [f"--init_checkpoint={directory / 'st'}",
                  f"--train_file={directory / 'train.tsv'}", f"--dev_file={directory / 'dev.tsv'}",
                  f"--dev_scored_file={directory / 'dev_scored.tsv'}",
                  f"--output_dir={directory / 'run'}", "--train_batch_size=16",
                  "--num_train_epochs=3", "--learning_rate=1e-3", "--save_checkpoints_steps=12",
                  "--seed=1"],
        "encode": [f"--init_checkpoint={directory / 'run' / 'sentence_transformers'}",
                   f"--input_file={directory / 'texts.txt'}",
                   f"--output_file={directory / 'v.jsonl'}", "--batch_size=3"],
        "bad_output": [f"--init_checkpoint={directory / 'missing'}",
                       f"--input_file={directory / 'texts.txt'}",
                       f"--output_file={directory / 'v.csv'}"],
        # A model that carries its own pooling and normalisation: --pooling / --normalize
        # were ignored without a word.
        "st_pooling": [f"--init_checkpoint={directory / 'run' / 'sentence_transformers'}",
                       f"--input_file={directory / 'texts.txt'}",
                       f"--output_file={directory / 'max.npy'}", "--pooling=max"],
        "run_normalize": [f"--init_checkpoint={directory / 'run'}",
                          f"--input_file={directory / 'texts.txt'}",
                          f"--output_file={directory / 'raw.npy'}", "--nonormalize"],
        "st_same_pooling": [f"--init_checkpoint={directory / 'run' / 'sentence_transformers'}",
                            f"--input_file={directory / 'texts.txt'}",
                            f"--output_file={directory / 'mean.npy'}", "--pooling=mean"]}
    results = dict(zip(runs, run_commands([(TOOL, args) for args in runs.values()])))
    assert results["train"].returncode == 0, results["train"].stderr[-3000:]
    return directory, directory / "run", results


def test_fine_tuning_improves_retrieval_and_keeps_the_best(trained):
    directory, run, _ = trained
    summary = json.load(open(run / "eval_results.json"))
    evaluations = summary["evaluations"]
    assert [e["step"] for e in evaluations] == [12, 24, 36]
    best = max(evaluations, key=lambda e: e["ndcg@10"])
    assert summary["best"]["step"] == best["step"]
    # Topic words make the pairs learnable: well above the random encoder.
    assert best["ndcg@10"] > summary["before"]["ndcg@10"] + 0.2
    assert best["spearman"] > summary["before"]["spearman"]
    assert set(best) >= {"recall@1", "recall@10", "mrr@10", "ndcg@10", "spearman"}
    info = json.load(open(run / "task_info.json"))
    assert (info["task"], info["max_seq_length"], info["do_lower_case"]) == (
        "sentence_embedding", 32, True)


def test_encode_run_and_st_directory_give_the_best_model_in_input_order(trained):
    import keras

    from bert_tf.interop import load_sentence_transformers
    from bert_tf.training.bulk_embedder import BulkEmbedder

    directory, run, results = trained
    model = keras.models.load_model(run / "model.keras")
    expected = BulkEmbedder(model, str(run / "vocab.txt"), True, 32).embed(TEXTS)
    st = load_sentence_transformers(str(run / "sentence_transformers"))
    np.testing.assert_allclose(BulkEmbedder(st.model, st.vocab_file, True, 32).embed(TEXTS),
                               expected, atol=1e-6)
    # tools/embed.py on the run's sentence_transformers/ directory, writing JSON lines (the
    # .npy output is run by docs/embeddings.md's recipe).
    result = results["encode"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Wrote 4 vectors to {directory / 'v.jsonl'}" in result.stderr
    rows = [json.loads(line) for line in open(directory / "v.jsonl")]
    assert [r["index"] for r in rows] == [0, 1, 2, 3]
    vectors = np.array([r["embedding"] for r in rows], np.float32)
    assert vectors.dtype == np.float32 and vectors.shape == (4, 32)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    # In Python the run and its sentence-transformers directory are embedders of raw text.
    import bert_tf

    for path in (run, run / "sentence_transformers"):
        np.testing.assert_allclose(bert_tf.load_task(path).predict(TEXTS), expected, atol=1e-5)


_BAD_INPUT_SCRIPT = r"""
import json, sys
from absl import flags
from bert_tf.cli import embed
embed.define_flags()
FLAGS = flags.FLAGS
for args in json.loads(sys.argv[1]):
    FLAGS.unparse_flags()
    FLAGS(["embed"] + args)
    try:
        embed.main(["embed"])
        print("no error")
    except Exception as e:
        print(f"{type(e).__name__}: {e}")
"""


def _bad_input_cases(tmp_path):
    """Files with bad input in `tmp_path`: [(args, the error printed)]."""
    make_st_dir(tmp_path / "st")
    write_pairs(tmp_path / "pairs.tsv", 20)
    (tmp_path / "empty_side.tsv").write_text("anchor\tpositive\nalice\tparis\nbob\t\n")
    (tmp_path / "triplets.jsonl").write_text(
        '{"anchor": "a", "positive": "b", "negative": "c"}\n{"anchor": "d", "positive": "e"}\n')
    (tmp_path / "st_dense").mkdir()
    make_st_dir(tmp_path / "st_dense")
    modules = json.load(open(tmp_path / "st_dense" / "modules.json"))
    write_json(tmp_path / "st_dense" / "modules.json", modules + [
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}])
    make_st_dir(tmp_path / "st_pool")
    write_json(tmp_path / "st_pool" / "1_Pooling" / "config.json",
               {"embedding_dimension": 32, "pooling_mode": "median"})
    out = tmp_path / "out"
    cases = [
        ("st", "pairs.tsv", ["--train_batch_size=1"],
         "FlagValueError: --train_batch_size=1: in-batch negatives need at least 2 rows per "
         "batch"),
        ("st", "empty_side.tsv", [],
         f"DataError: {tmp_path / 'empty_side.tsv'}:3 (column 'positive'): the positive is "
         "empty"),
        ("st", "triplets.jsonl", [],
         f"DataError: {tmp_path / 'triplets.jsonl'}:2 (column 'negative'): the negative is "
         "missing (every row of the file needs one, as the first row has)"),
        ("st", "pairs.tsv", ["--train_batch_size=32"],
         f"FlagValueError: --train_batch_size=32 exceeds the 20 pairs of --train_file="
         f"{tmp_path / 'pairs.tsv'}"),
        ("st_dense", "pairs.tsv", [],
         f"InteropError: {tmp_path / 'st_dense' / 'modules.json'}: module 3 has type "
         "'sentence_transformers.models.Dense', which bert_tf cannot build; supported: "
         "Transformer, Pooling, Normalize"),
        ("st_pool", "pairs.tsv", [],
         f"InteropError: {tmp_path / 'st_pool' / '1_Pooling' / 'config.json'}: pooling_mode: "
         "pooling modes ['median']; expected one or more distinct of cls, max, mean, "
         "mean_sqrt_len_tokens"),
    ]
    return [([f"--init_checkpoint={tmp_path / st}", f"--train_file={tmp_path / data}",
              f"--output_dir={out}", "--train_batch_size=4", *extra], message)
            for st, data, extra, message in cases]


def _output_cases(tmp_path):
    """An encode output that is its input (through ./) and a training --output_dir holding a
    pre-training run: (args lists, the two inputs' files before)."""
    make_st_dir(tmp_path / "st")
    write_pairs(tmp_path / "pairs.tsv", 20)
    texts = tmp_path / "texts.jsonl"
    texts.write_text("first text\nsecond text\n")
    run = tmp_path / "pretraining_run"
    run.mkdir()
    (run / "run_pretraining.flags").write_text("--max_seq_length=32\n")
    (run / "ckpt-1.index").write_bytes(b"weights")
    arg_lists = [
        [f"--init_checkpoint={tmp_path / 'st'}", f"--input_file={texts}",
         f"--output_file={tmp_path / '.' / 'texts.jsonl'}"],
        [f"--init_checkpoint={tmp_path / 'st'}", f"--train_file={tmp_path / 'pairs.tsv'}",
         f"--output_dir={run}", "--train_batch_size=4"],
    ]
    return arg_lists, _input_files(tmp_path)


def _input_files(tmp_path):
    texts, run = tmp_path / "texts.jsonl", tmp_path / "pretraining_run"
    return {p.name: p.read_bytes() for p in [texts, *run.iterdir()]}


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """The refusals of the two tests below, one process (_BAD_INPUT_SCRIPT, seconds to start):
    {"bad_input" / "outputs": (its directory, what it needs, the lines printed)}."""
    root = tmp_path_factory.mktemp("embed_refused")
    bad, outputs = root / "bad_input", root / "outputs"
    bad.mkdir()
    outputs.mkdir()
    bad_cases = _bad_input_cases(bad)
    output_args, before = _output_cases(outputs)
    arg_lists = [args for args, _ in bad_cases] + output_args
    result = subprocess.run([zygote.shared_python(), "-c", _BAD_INPUT_SCRIPT,
                             json.dumps(arg_lists)], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT,
                                     TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    return {"bad_input": (bad, bad_cases, lines[:len(bad_cases)]),
            "outputs": (outputs, before, lines[len(bad_cases):])}


def test_bad_input_is_refused_before_training(refused):
    tmp_path, cases, lines = refused["bad_input"]
    assert lines == [message for _, message in cases]
    assert not os.path.exists(tmp_path / "out")  # refused before anything was written


def test_pooling_given_for_a_model_with_its_own_is_refused_unless_the_same(trained):
    directory, run, results = trained
    st = run / "sentence_transformers"
    for case, message in (
            ("st_pooling", f"--pooling=max contradicts --init_checkpoint={st}, a "
                           "sentence-transformers model trained with --pooling=mean"),
            ("run_normalize", f"--normalize=false contradicts --init_checkpoint={run}, a "
                              "sentence embedding model trained with --normalize=true")):
        assert results[case].returncode == 1
        assert results[case].stderr.strip().splitlines()[-1] == (
            f"embed: error: {message}, which its vectors keep (leave "
            f"{message.split('=')[0]} out: it sets how an encoder checkpoint's vectors are "
            "made)")
    assert not (directory / "max.npy").exists() and not (directory / "raw.npy").exists()
    assert results["st_same_pooling"].returncode == 0, results["st_same_pooling"].stderr[-2000:]
    assert np.load(directory / "mean.npy").shape == (len(TEXTS), 32)


def test_the_sentence_transformers_directory_is_readable_as_the_umask_allows(trained):
    """It was made by mkdtemp, mode 0700: other users and a serving container could not read
    it."""
    import stat

    from bert_tf import fileio

    _, run, _ = trained
    for path in (run / "sentence_transformers", run / "sentence_transformers" / "1_Pooling"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o777 & ~fileio.current_umask(), path


def test_cli_prints_one_line_error(trained):
    directory, _, results = trained
    result = results["bad_output"]
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"embed: error: --output_file={directory / 'v.csv'}: expected a .npy or .jsonl file")


def test_outputs_never_replace_an_input_or_another_run(refused):
    """The output rule (bert_tf.cli.outputs) in bert-tf-embed: an encode output that is its
    input (through ./) and a training --output_dir holding a pre-training run are refused
    before anything is written; both are byte-for-byte unchanged."""
    tmp_path, before, lines = refused["outputs"]
    texts, run = tmp_path / "texts.jsonl", tmp_path / "pretraining_run"
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"FlagValueError: --output_file={tmp_path / '.' / 'texts.jsonl'} "
                               f"is also --input_file={texts}"), lines[0]
    assert lines[1] == (
        f"FlagValueError: --output_dir={run} holds a run of another command "
        "(run_pretraining.flags); embedding training there would replace its model and files: "
        "choose a new --output_dir (--init_checkpoint may name this one)")
    assert _input_files(tmp_path) == before


def _embed_config(*argv):
    """The EmbeddingConfig of bert-tf-embed's command line `argv`."""
    from absl import flags

    from bert_tf.cli import embed

    flag_values = embed.define_flags(flags.FlagValues())
    flag_values(["embed", *argv])
    return embed.embedding_config(flag_values)


def test_encode_a_modernbert_run_with_a_tokenizer_json(tmp_path):
    """A converted ModernBERT-style run (tokenizer.json, no vocab.txt): texts are tokenized in
    the graph by its byte-level BPE, and each row is the sentence embedder's output for the
    Python tokenizer's ids."""
    from bpe_fixtures import make_converted_modernbert_run

    from bert_tf.jobs import embedding
    from bert_tf.interop.sentence_transformers import load_embedder
    from bert_tf.text import load_tokenizer, pack_inputs

    run = make_converted_modernbert_run(str(tmp_path / "modernbert"))
    texts = ["Hello world, said the cat.", "", "A longer line: 3 cats sat on 2 mats (x)."]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    count = embedding.encode(_embed_config(f"--init_checkpoint={run}",
                                      f"--input_file={tmp_path / 'texts.txt'}",
                                      f"--output_file={tmp_path / 'v.npy'}", "--batch_size=2"))
    assert count == 3
    vectors = np.load(tmp_path / "v.npy")
    assert vectors.dtype == np.float32 and vectors.shape == (3, 32)

    loaded = load_embedder(run)
    assert loaded.vocab_file == os.path.join(run, "tokenizer.json")
    assert loaded.do_lower_case is False  # the file's casing: no Lowercase normalizer
    tokenizer = load_tokenizer(os.path.join(run, "tokenizer.json"))
    rows = [pack_inputs(tokenizer.encode(text), max_seq_length=24, cls_id=tokenizer.cls_id,
                        sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id) for text in texts]
    expected = loaded.model({k: np.array([r[k] for r in rows], np.int32) for k in rows[0]})
    np.testing.assert_allclose(vectors, expected.numpy(), rtol=0, atol=1e-5)
    assert np.linalg.norm(vectors - vectors[0], axis=1)[1:].min() > 1e-3  # texts differ


def test_encode_logs_how_many_texts_were_truncated_as_the_python_api_does(tmp_path, caplog):
    """bert-tf-embed cut texts longer than max_seq_length without a word; the Python API logs
    how many it cut. Both log the same line now, once per run."""
    import bert_tf
    from bert_tf.jobs import embedding

    make_st_dir(tmp_path / "st")  # max_seq_length=32
    texts = [" ".join(["alice"] * 40), "the new film", " ".join(["rome"] * 31), "oslo"]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    caplog.set_level(logging.INFO, logger="absl")
    assert embedding.encode(_embed_config(f"--init_checkpoint={tmp_path / 'st'}",
                                          f"--input_file={tmp_path / 'texts.txt'}",
                                          f"--output_file={tmp_path / 'v.npy'}",
                                          "--batch_size=2")) == 4
    expected = ["2 of 4 texts were longer than max_seq_length allows and were truncated"]
    assert [m for m in caplog.messages if "truncated" in m] == expected
    caplog.clear()
    vectors = bert_tf.load_task(tmp_path / "st").predict(texts)
    assert [m for m in caplog.messages if "truncated" in m] == expected
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), vectors, atol=1e-5)


def test_do_lower_case_contradicting_a_tokenizer_json_is_named(tmp_path):
    from bpe_fixtures import make_converted_modernbert_run

    from bert_tf.jobs import embedding
    from bert_tf.interop.weights import InteropError

    model_dir = make_converted_modernbert_run(str(tmp_path / "modernbert"))
    (tmp_path / "texts.txt").write_text("hello\n")
    with pytest.raises(InteropError) as raised:
        embedding.encode(_embed_config(f"--init_checkpoint={model_dir}", "--do_lower_case",
                                  f"--input_file={tmp_path / 'texts.txt'}",
                                  f"--output_file={tmp_path / 'v.npy'}"))
    assert str(raised.value) == (
        f"--vocab_file={model_dir}/tokenizer.json: do_lower_case=True contradicts tokenizer "
        f"file '{model_dir}/tokenizer.json', which keeps case; leave do_lower_case unset to "
        "use the file's.")
    assert not (tmp_path / "v.npy").exists()


@pytest.mark.slow
def test_train_from_a_modernbert_run_carries_its_tokenizer_json_into_run_and_export(tmp_path):
    """Contrastive training from a converted ModernBERT-style run: the embedding run and its
    sentence-transformers directory hold tokenizer.json (no vocab.txt) and encode alike; the
    run's export (read as bert-tf-export reads it) has serve_text with the BPE tokenizer, equal
    to the Keras model."""
    import tensorflow as tf
    from bpe_fixtures import make_converted_modernbert_run

    from bert_tf import serving
    from bert_tf.jobs import embedding
    from bert_tf.interop.sentence_transformers import load_embedder
    from bert_tf.text import load_tokenizer
    from bert_tf.training.bulk_embedder import BulkEmbedder

    base = make_converted_modernbert_run(str(tmp_path / "modernbert"))
    write_pairs(tmp_path / "pairs.tsv", 16)
    run = tmp_path / "run"
    embedding.train(_embed_config(f"--init_checkpoint={base}",
                                  f"--train_file={tmp_path / 'pairs.tsv'}", f"--output_dir={run}",
                                  "--train_batch_size=8", "--max_seq_length=24", "--seed=1"))
    for directory in (run, run / "sentence_transformers"):
        names = os.listdir(directory)
        assert "tokenizer.json" in names and "vocab.txt" not in names, names
    assert load_tokenizer(str(run / "tokenizer.json")).fingerprint() == load_tokenizer(
        os.path.join(base, "tokenizer.json")).fingerprint()
    texts = ["Hello world", "the film about alice", ""]
    loaded = load_embedder(str(run))
    vectors = BulkEmbedder(loaded.model, loaded.tokenizer, None, 24).embed(texts)
    st = load_embedder(str(run / "sentence_transformers"))
    assert (st.do_lower_case, st.max_seq_length) == (False, 24)
    np.testing.assert_allclose(BulkEmbedder(st.model, st.tokenizer, None, 24).embed(texts),
                               vectors, rtol=0, atol=1e-6)

    source = serving.load_model_dir(str(run))
    assert source.vocab_file == str(run / "tokenizer.json")
    export_dir = serving.export(
        source.model, str(tmp_path / "export" / "1"), max_seq_length=source.max_seq_length,
        tokenizer=load_tokenizer(source.vocab_file, source.do_lower_case))
    served = tf.saved_model.load(export_dir).signatures["serve_text"]
    np.testing.assert_allclose(served(text=tf.constant(texts))["embedding"].numpy(), vectors,
                               rtol=0, atol=1e-5)


@pytest.mark.slow
def test_embedding_training_owns_its_run_and_resumes_only_the_same_run(tmp_path):
    """Never-destroy case 6: two bert-tf-embed on one --output_dir both exited 0 with their
    checkpoints interleaved, and a rerun with --pooling=cls after mean, another
    --max_seq_length or --nonormalize resumed the old checkpoint, saving a mix of two
    configurations. Now the second is refused naming the lock, the rerun naming each
    difference; both leave the run byte for byte as it was."""
    from bert_tf import run_directory

    fixture = os.path.join(REPO_ROOT, "tests", "fixtures", "runs_v0_1")
    run = tmp_path / "run"
    train = [f"--init_checkpoint={fixture}/pretrain_text",
             f"--train_file={fixture}/inputs/pairs.tsv", f"--output_dir={run}",
             "--sentence_transformers_dir=-", "--train_batch_size=8", "--max_seq_length=32",
             "--learning_rate=1e-3", "--seed=1", "--steps_per_loop=1", "--jit_compile=false"]
    first, = run_commands([(TOOL, train)])
    assert first.returncode == 0, first.stderr[-3000:]
    record = run_directory.read_record(run)
    assert (record.command, record.settings) == ("bert-tf-embed", {
        "max_seq_length": 32, "pooling": ["mean"], "normalize": True, "train_batch_size": 8})

    def digests():
        return {str(p.relative_to(run)): p.read_bytes() for p in run.rglob("*") if p.is_file()}

    before = digests()
    with run_directory.RunDirectoryLock(str(run)) as lock:
        holder = run_directory.describe_holder(lock._record)
        same, other = run_commands([
            (TOOL, train),
            (TOOL, [*train, "--pooling=cls", "--max_seq_length=16", "--nonormalize"])])
        assert digests() == {**before, run_directory.LOCK_FILE: (
            run / run_directory.LOCK_FILE).read_bytes()}
    assert same.returncode == 1
    assert same.stderr.strip().splitlines()[-1] == (
        f"embed: error: --output_dir={run} is in use by another run "
        f"({holder}; lock file "
        f"{run}/.bert_tf_run.lock): wait for it to end, stop it, or choose another --output_dir")
    assert other.returncode == 1
    assert other.stderr.strip().splitlines()[-1] == (
        f"embed: error: --output_dir={run} holds checkpoints of a run with other settings "
        f"({run}/bert_tf_run.json); resuming would mix them: --max_seq_length=32 then, 16 now; "
        "--normalize=true then, false now; --pooling=mean then, cls now. Rerun with the run's "
        f"settings to resume it, or choose a new --output_dir (--init_checkpoint={run} starts "
        "from its weights)")
    assert digests() == before


def test_a_full_disk_writing_the_model_keeps_the_training_and_a_rerun_writes_it(
        tmp_path, monkeypatch):
    """A full disk writing model.keras (or the results, the sentence-transformers directory)
    after the embedding training ended in `[Errno 28] No space left on device` alone, where the
    fine-tuning and pre-training runs say what is kept and what writes the rest."""
    import errno

    from bert_tf import run_directory
    from bert_tf.jobs import embedding

    fixture = os.path.join(REPO_ROOT, "tests", "fixtures", "runs_v0_1")
    run = tmp_path / "run"
    config = _embed_config(
        f"--init_checkpoint={fixture}/pretrain_text", f"--train_file={fixture}/inputs/pairs.tsv",
        f"--output_dir={run}", "--sentence_transformers_dir=-", "--train_batch_size=8",
        "--max_seq_length=32", "--learning_rate=1e-3", "--seed=1", "--jit_compile=false")

    def full_disk(model, path):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(embedding, "save_keras_model", full_disk)
    with pytest.raises(run_directory.TrainedFileError) as error:
        embedding.train(config)
    checkpoint = run_directory.checkpoint_names(str(run))[-1]
    assert str(error.value) == (
        f"{run}/model.keras cannot be written (No space left on device); nothing was lost: "
        f"training is saved in the checkpoint {run}/{checkpoint}. Free space (or fix the "
        "directory) and rerun the same command: it has nothing left to train and writes the "
        "run's models and results")
    assert "model.keras" not in os.listdir(run)
    monkeypatch.undo()
    # The same command trains nothing and writes the run's files.
    assert embedding.train(config)["train"]["steps_this_run"] == 0
    assert {"model.keras", "task_info.json", "eval_results.json"} <= set(os.listdir(run))


def test_embedding_trains_and_encodes_on_jax(tmp_path):
    """bert-tf-embed --backend=jax: training into a relative --output_dir (Orbax takes absolute
    paths only), then encoding from the finished run (its model.keras beside the Orbax
    checkpoints), equal to TensorFlow's vectors of the same model.keras."""
    make_st_dir(tmp_path / "st")
    write_pairs(tmp_path / "pairs.tsv", 32)
    (tmp_path / "texts.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    encode = ["--init_checkpoint=run", "--input_file=texts.txt", "--batch_size=3"]
    train, on_jax = run_commands([
        (TOOL, ["--backend=jax", "--init_checkpoint=st", "--train_file=pairs.tsv",
                "--output_dir=run", "--train_batch_size=8", "--save_checkpoints_steps=2",
                "--seed=1"]),
        (TOOL, encode + ["--output_file=jax.npy"])],
        env=jax_env(), cwd=tmp_path)
    assert train.returncode == 0, train.stderr[-3000:]
    assert on_jax.returncode == 0, on_jax.stderr[-3000:]
    names = os.listdir(tmp_path / "run")
    assert {"model.keras", "ckpt-4.orbax", "bert_tf_run.json"} <= set(names), names
    on_tensorflow, = run_commands([(TOOL, encode + ["--output_file=tf.npy"])], cwd=tmp_path)
    assert on_tensorflow.returncode == 0, on_tensorflow.stderr[-3000:]
    vectors = np.load(tmp_path / "jax.npy")
    assert vectors.shape[0] == len(TEXTS)
    np.testing.assert_allclose(vectors, np.load(tmp_path / "tf.npy"), rtol=0, atol=1e-5)
