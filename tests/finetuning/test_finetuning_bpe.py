"""Fine-tuning a ModernBERT-style model whose vocabulary is a byte-level BPE tokenizer.json.

The "converted" run directory is what `bert-tf-convert-checkpoint --from=huggingface --to=bert_tf`
writes for ModernBERT (bert_config.json, encoder.keras, tokenizer.json, no vocab.txt), built
here from a tiny modern-encoder config and the byte-level BPE fixture of tests/text.
"""

import json
import os
import random
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_tf.cli import classify as classify_cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import squad as squad_cli
from bert_tf.cli import tag as tag_cli
from bert_tf.data.tasks import tagging_data
from bert_tf.jobs.classification import run_classifier
from bert_tf.jobs.finetuning_config import ClassificationConfig, SquadConfig, TaggingConfig
from bert_tf.jobs import model_files
from bert_tf.jobs.flag_checks import FlagValueError
from bert_tf.jobs.squad import run_squad
from bert_tf.jobs.tagging import run_tagging
from bert_tf.serving import load_model_dir
from bert_tf.text import load_tokenizer
from bert_tf.text.input_packing import pack_inputs

from bpe_fixtures import (BPE_TOKENIZER_JSON, make_converted_modernbert_run,
                          write_tiny_byte_level_tokenizer)
from finetuning_helpers import write_conll, write_sst2

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEQ = 24


@pytest.fixture(scope="module")
def converted_run(tmp_path_factory):
    """A converted ModernBERT-style run directory: rotary positions, pre-norm gated blocks,
    no segment embeddings, local attention, the fixture's cased byte-level BPE."""
    directory = tmp_path_factory.mktemp("modernbert_run")
    make_converted_modernbert_run(str(directory))
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
    tokenizes in the graph exactly as the Python tokenizer."""
    config = _classify_config(converted_run, tmp_path, "--do_train",
                              f"--export_dir={tmp_path / 'export' / '1'}")
    assert config.task.do_lower_case is None and config.task.vocab_file is None
    results = run_classifier(config)
    assert results["global_step"] == results["num_train_steps"] == 2
    out = tmp_path / "out"
    assert "tokenizer.json" in os.listdir(out) and "vocab.txt" not in os.listdir(out)
    tokenizer = load_tokenizer(str(out / "tokenizer.json"))
    original = load_tokenizer(BPE_TOKENIZER_JSON)
    assert tokenizer.fingerprint() == original.fingerprint()
    assert json.loads((out / "task_info.json").read_text())["do_lower_case"] is False
    record = json.loads((out / "bert_tf_run.json").read_text())
    assert record["tokenizer_sha256"] == original.fingerprint()
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

    # What bert-tf-export --model_dir=RUN reads (docs/modernbert.md's doc test runs the command).
    source = load_model_dir(str(out))
    assert source.vocab_file == str(out / "tokenizer.json")
    assert (source.do_lower_case, source.max_seq_length) == (False, SEQ)


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


def _tiny_squad(num_questions, seed):
    """SQuAD 1.1 JSON: the answer is the word after "key", in contexts of 6-14 words, some
    with punctuation attached to the answer (so WordPiece and BPE spans differ)."""
    rng = random.Random(seed)
    filler = "river stone cloud green table window paper music light garden".split()
    paragraphs = []
    for i in range(num_questions):
        words = [rng.choice(filler) for _ in range(rng.randint(6, 14))]
        answer = rng.choice(["apple", "Copper", "dolphin", "ember"])
        at = rng.randint(0, len(words))
        words[at:at] = ["key", answer + rng.choice(["", ",", "."])]
        start = len(" ".join(words[:at + 1])) + 1
        paragraphs.append({"context": " ".join(words), "qas": [{
            "id": f"q{seed}-{i}", "question": "What comes after the key?",
            "answers": [{"text": answer, "answer_start": start}]}]})
    return {"version": "1.1", "data": [{"title": "tiny", "paragraphs": paragraphs}]}


@pytest.mark.slow
def test_squad_with_bpe_trains_predicts_whole_words_and_exports_raw_text(converted_run,
                                                                          tmp_path):
    """bert-tf-squad on a converted ModernBERT run (tokenizer.json, no vocab.txt): windows of
    BPE pieces, answers given as whole context words, in predictions.json and from the
    export's serve_text."""
    train, dev = _tiny_squad(16, 1), _tiny_squad(6, 2)
    (tmp_path / "train.json").write_text(json.dumps(train))
    (tmp_path / "dev.json").write_text(json.dumps(dev))
    config = _config(squad_cli.define_flags, SquadConfig, [
        f"--train_file={tmp_path / 'train.json'}", f"--predict_file={tmp_path / 'dev.json'}",
        f"--init_checkpoint={converted_run}", "--do_train", "--do_predict",
        # 40 tokens, 10 for the question: contexts of up to ~60 pieces take several windows.
        "--max_seq_length=40", "--doc_stride=8", "--max_query_length=10",
        "--train_batch_size=8", "--predict_batch_size=4", "--num_train_epochs=1", "--seed=1",
        f"--output_dir={tmp_path / 'out'}", f"--export_dir={tmp_path / 'export' / '1'}"])
    results = run_squad(config)
    assert results["global_step"] == results["num_train_steps"] == 2
    assert results["num_skipped_train_examples"] == 0
    assert results["num_predict_features"] > results["num_predict_examples"] == 6
    assert {"exact_match", "f1"} <= set(results["eval"])  # the dev file has answers
    out = tmp_path / "out"
    predictions = json.loads((out / "predictions.json").read_text())
    contexts = {qa["id"]: p["context"] for p in dev["data"][0]["paragraphs"]
                for qa in p["qas"]}
    assert sorted(predictions) == sorted(contexts)
    for qid, text in predictions.items():
        assert text and text in contexts[qid], (qid, text)
        # Whole words: the answer is a run of the context's words.
        words, count = contexts[qid].split(), len(text.split())
        assert any(" ".join(words[i:i + count]) == text for i in range(len(words))), text
    assert "tokenizer.json" in os.listdir(out) and "vocab.txt" not in os.listdir(out)
    served = tf.saved_model.load(str(tmp_path / "export" / "1"))
    assert sorted(served.signatures) == ["serve_examples", "serve_text", "serving_default"]
    qids = sorted(contexts)
    got = served.signatures["serve_text"](
        question=tf.constant(["What comes after the key?"] * len(qids)),
        context=tf.constant([contexts[q] for q in qids]))
    for b, qid in enumerate(qids):
        text = got["answer_text"][b].numpy().decode()
        start, end = int(got["answer_start"][b]), int(got["answer_end"][b])
        words, count = contexts[qid].split(), len(text.split())
        assert text == contexts[qid][start:end] and count >= 1
        assert any(" ".join(words[i:i + count]) == text for i in range(len(words))), text


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
def test_tag_with_bpe_exports_raw_text(converted_run, tmp_path):
    write_conll(str(tmp_path / "conll"), num_train=16, num_dev=4, num_test=2)
    config = _config(tag_cli.define_flags, TaggingConfig, [
        f"--data_dir={tmp_path / 'conll'}", f"--init_checkpoint={converted_run}",
        f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_epochs=1", "--seed=1",
        "--do_train", f"--output_dir={tmp_path / 'out'}",
        f"--export_dir={tmp_path / 'export' / '1'}"])
    results = run_tagging(config)
    assert results["global_step"] == 2
    served = tf.saved_model.load(str(tmp_path / "export" / "1"))
    assert sorted(served.signatures) == ["serve_examples", "serve_text", "serving_default"]
    got = served.signatures["serve_text"](text=tf.constant(["Alice flew from Paris."]))
    assert [t.decode() for t in got["tokens"][0].numpy()] == ["Alice", "flew", "from", "Paris",
                                                              "."]
    assert "tokenizer.json" in os.listdir(tmp_path / "out")


def test_which_tokenizer_file_a_model_directory_gives(tmp_path):
    """vocab.txt as before; tokenizer.json without one, or when it is byte-level BPE."""
    from bert_tf.text.tokenizer_files import model_tokenizer_file as checkpoint_tokenizer_file

    assert checkpoint_tokenizer_file(str(tmp_path)) is None
    shutil.copy(BPE_TOKENIZER_JSON, tmp_path / "tokenizer.json")
    assert checkpoint_tokenizer_file(str(tmp_path)) == str(tmp_path / "tokenizer.json")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    assert checkpoint_tokenizer_file(str(tmp_path)) == str(tmp_path / "tokenizer.json")
    # A Hugging Face BERT directory: vocab.txt and a WordPiece tokenizer.json.
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"model": {"type": "WordPiece", "vocab": {"[PAD]": 0}}}))
    assert checkpoint_tokenizer_file(str(tmp_path)) == str(tmp_path / "vocab.txt")


def test_a_vocab_file_differing_from_the_tokenizer_json_beside_the_checkpoint_is_named(
        converted_run, tmp_path):
    """As for two vocab.txt files: the model's embeddings are indexed by its own tokenizer."""
    other = write_tiny_byte_level_tokenizer(str(tmp_path / "tokenizer.json"))
    config = _classify_config(converted_run, tmp_path, "--do_train", f"--vocab_file={other}")
    with pytest.raises(FlagValueError) as raised:
        run_classifier(config)
    assert str(raised.value) == (
        f"--vocab_file={other} differs from {converted_run / 'tokenizer.json'} beside "
        f"--init_checkpoint={converted_run}: id 0 is '[PAD]', not '!'; the model's embeddings "
        "are indexed by that vocabulary (leave --vocab_file out to use it)")
    assert not (tmp_path / "out").exists()
    # The same file under another name is no difference.
    same = tmp_path / "same" / "tokenizer.json"
    same.parent.mkdir()
    shutil.copy(converted_run / "tokenizer.json", same)
    config = _classify_config(converted_run, tmp_path, f"--vocab_file={same}")
    assert model_files.resolve_model_files(config.task)[1] == str(same)
