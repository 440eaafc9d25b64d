"""Fine-tuning a ModernBERT-style model whose vocabulary is a byte-level BPE tokenizer.json.

The "converted" run directory is what `bert-tf-convert-checkpoint --from=huggingface --to=bert_tf`
writes for ModernBERT (bert_config.json, encoder.keras, tokenizer.json, no vocab.txt), built
here from a tiny modern-encoder config and the byte-level BPE fixture of tests/text.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_tf.cli import classify as classify_cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import squad as squad_cli
from bert_tf.cli import tag as tag_cli
from bert_tf.config import BertConfig
from bert_tf.data.tasks import tagging_data
from bert_tf.jobs.classification import ClassificationConfig, run_classifier
from bert_tf.jobs.run_setup import FlagValueError
from bert_tf.jobs.squad import SquadConfig, run_squad
from bert_tf.jobs.tagging import TaggingConfig, run_tagging
from bert_tf.modeling import BertEncoder
from bert_tf.text import load_tokenizer
from bert_tf.text.input_packing import pack_inputs
from bert_tf.training.checkpointing import save_keras_model

from bpe_fixtures import BPE_TOKENIZER_JSON
from finetuning_helpers import write_conll, write_sst2

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ = 24


@pytest.fixture(scope="module")
def converted_run(tmp_path_factory):
    """A converted ModernBERT-style run directory: rotary positions, pre-norm gated blocks,
    no segment embeddings, local attention, the fixture's cased byte-level BPE."""
    directory = tmp_path_factory.mktemp("modernbert_run")
    tokenizer = load_tokenizer(BPE_TOKENIZER_JSON)
    config = dataclasses.replace(
        BertConfig.from_json_file(os.path.join(REPO, "official_configs", "models",
                                               "modernbert_demo_tiny.json")),
        vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, global_attn_every_n_layers=2, local_attention_window=8,
        max_position_embeddings=64)
    config.to_json_file(str(directory / "bert_config.json"))
    keras.utils.set_random_seed(0)
    save_keras_model(BertEncoder(config), str(directory / "encoder.keras"))
    shutil.copy(BPE_TOKENIZER_JSON, directory / "tokenizer.json")
    return directory


def _config(define_flags, config_class, argv):
    """The task config the command builds from `argv` (its own flag defaults included)."""
    flag_values = define_flags(flags.FlagValues())
    flag_values(["prog", *argv])
    return cli_flags.to_config(config_class, flag_values)


def _classify_config(converted_run, tmp_path, *argv):
    data = tmp_path / "SST-2"
    if not data.exists():
        write_sst2(str(data), num_train=32, num_dev=8, num_test=4)
    return _config(classify_cli.define_flags, ClassificationConfig, [
        "--task_name=sst-2", f"--data_dir={data}", f"--init_checkpoint={converted_run}",
        f"--max_seq_length={SEQ}", "--train_batch_size=16", "--num_train_epochs=1",
        "--learning_rate=1e-3", "--seed=1", f"--output_dir={tmp_path / 'out'}", *argv])


@pytest.mark.slow
def test_classify_a_converted_modernbert_run_and_serve_raw_text(converted_run, tmp_path):
    """No --vocab_file, no --do_lower_case: the run directory's tokenizer.json and its casing.
    The run directory and the --export_dir SavedModel carry the BPE tokenizer; serve_text
    tokenizes in the graph exactly as the Python tokenizer, and bert-tf-export re-exports."""
    config = _classify_config(converted_run, tmp_path, "--do_train",
                              f"--export_dir={tmp_path / 'export' / '1'}")
    assert config.do_lower_case is None and config.vocab_file is None
    results = run_classifier(config)
    assert results["global_step"] == results["num_train_steps"] == 2
    out = tmp_path / "out"
    assert "tokenizer.json" in os.listdir(out) and "vocab.txt" not in os.listdir(out)
    tokenizer = load_tokenizer(str(out / "tokenizer.json"))
    original = load_tokenizer(BPE_TOKENIZER_JSON)
    assert tokenizer.fingerprint() == original.fingerprint()
    assert json.loads((out / "task_info.json").read_text())["do_lower_case"] is False
    record = json.loads((out / "finetuning_run.json").read_text())
    assert record["vocab_sha256"] == original.fingerprint()
    assert record["do_lower_case"] is False

    texts = ["The cat sat on the mat.", "Ünïcödé café in Paris 🙂, a superb film"]
    rows = [pack_inputs(tokenizer.encode(t), max_seq_length=SEQ, cls_id=tokenizer.cls_id,
                        sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id) for t in texts]
    features = {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}
    logits = keras.saving.load_model(out / "model.keras")(features).numpy()
    assert logits.shape == (2, 2)
    served = tf.saved_model.load(str(tmp_path / "export" / "1"))
    got = served.signatures["serve_text"](text=tf.constant(texts))
    assert got["probabilities"].shape == (2, 2)
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(got["probabilities"].numpy(),
                               shifted / shifted.sum(-1, keepdims=True), rtol=0, atol=1e-5)
    ids_logits = served.signatures["serving_default"](**{
        k: tf.constant(v) for k, v in features.items()})["logits"].numpy()
    np.testing.assert_allclose(ids_logits, logits, rtol=0, atol=1e-5)

    # bert-tf-export --model_dir=RUN: the run's tokenizer.json gives serve_text again.
    proc = subprocess.run(
        [sys.executable, "-m", "bert_tf.cli.export_saved_model", f"--model_dir={out}",
         f"--export_dir={tmp_path / 'again' / '1'}", "--signatures=text", "--notext_pair"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = tf.saved_model.load(str(tmp_path / "again" / "1")).signatures["serve_text"]
    np.testing.assert_allclose(again(text=tf.constant(texts))["probabilities"].numpy(),
                               got["probabilities"].numpy(), rtol=0, atol=1e-6)


def test_do_lower_case_contradicting_the_tokenizer_json_is_named(converted_run, tmp_path):
    config = _classify_config(converted_run, tmp_path, "--do_train", "--do_lower_case")
    with pytest.raises(FlagValueError) as raised:
        run_classifier(config)
    assert str(raised.value) == (
        f"--do_lower_case=True contradicts --vocab_file={converted_run / 'tokenizer.json'}, "
        "which keeps case (a tokenizer.json records its casing); leave --do_lower_case out to "
        "use the file's")
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_json_of_another_model_type_is_named(converted_run, tmp_path):
    unigram = tmp_path / "tokenizer.json"
    unigram.write_text(json.dumps({"model": {"type": "Unigram", "vocab": []}}))
    config = _classify_config(converted_run, tmp_path, "--do_train",
                              f"--vocab_file={unigram}")
    with pytest.raises(FlagValueError, match=rf"^--vocab_file={unigram}: .*Unigram"):
        run_classifier(config)


def test_squad_refuses_a_bpe_tokenizer_before_any_work(converted_run, tmp_path):
    (tmp_path / "train.json").write_text(json.dumps({"version": "1.1", "data": []}))
    config = _config(squad_cli.define_flags, SquadConfig, [
        f"--train_file={tmp_path / 'train.json'}", f"--init_checkpoint={converted_run}",
        "--max_seq_length=32", "--doc_stride=8", "--max_query_length=8", "--do_train",
        f"--output_dir={tmp_path / 'out'}"])
    with pytest.raises(FlagValueError) as raised:
        run_squad(config)
    assert str(raised.value).startswith(
        f"--vocab_file={converted_run / 'tokenizer.json'} is a byte-level BPE tokenizer; "
        "bert-tf-squad reads WordPiece vocabularies only")
    assert not os.listdir(tmp_path / "out")  # refused before anything was written


def test_bpe_words_are_encoded_as_inside_their_sentence():
    """Tagging encodes word by word: with byte-level BPE a word after the first carries its
    space ("Ġfrom"), so the windows hold exactly the sentence's ids."""
    tokenizer = load_tokenizer(BPE_TOKENIZER_JSON)
    words = "Alice flew from Paris to New York , and it's 2024 .".split()
    sentence = tagging_data.Sentence(words=tuple(words), tags=None)
    windows = tagging_data.make_windows([sentence], tokenizer, 64, {})
    assert list(windows[0].piece_ids) == tokenizer.encode(" ".join(words))
    # Without the space the words would get other ids ("f" "le" "w", not "Ġf" "le" "w").
    assert [i for w in words for i in tokenizer.encode(w)] != tokenizer.encode(" ".join(words))
    assert windows[0].word_positions[:3] == (1, 3, 6)  # Alice = A lice, flew = Ġf le w


@pytest.mark.slow
def test_tag_with_bpe_exports_the_id_signature(converted_run, tmp_path, caplog):
    write_conll(str(tmp_path / "conll"), num_train=16, num_dev=4, num_test=2)
    config = _config(tag_cli.define_flags, TaggingConfig, [
        f"--data_dir={tmp_path / 'conll'}", f"--init_checkpoint={converted_run}",
        f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_epochs=1", "--seed=1",
        "--do_train", f"--output_dir={tmp_path / 'out'}",
        f"--export_dir={tmp_path / 'export' / '1'}"])
    with caplog.at_level("WARNING"):
        results = run_tagging(config)
    assert results["global_step"] == 2
    assert any("id signature (serving_default) only" in r.getMessage() for r in caplog.records)
    served = tf.saved_model.load(str(tmp_path / "export" / "1"))
    assert list(served.signatures) == ["serving_default"]
    assert "tokenizer.json" in os.listdir(tmp_path / "out")
