"""Fine-tuning from an original ALBERT release: a TF1 checkpoint with albert_config.json and its
SentencePiece model (30k-clean.model) beside it, no vocab.txt; and what a conversion carries."""

import json
import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from bert_tf.cli import classify as classify_cli
from bert_tf.cli import flags as cli_flags
from bert_tf.cli import squad as squad_cli
from bert_tf.config import BertConfig
from bert_tf.interop import checkpoint_casing, save_huggingface
from bert_tf.interop.albert import config_from_albert, save_albert_checkpoint
from bert_tf.jobs.classification import run_classifier
from bert_tf.jobs.finetuning_config import ClassificationConfig, SquadConfig
from bert_tf.jobs import export
from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint
from bert_tf.jobs.squad import run_squad
from bert_tf.modeling import BertEncoder, BertPretrainer
from bert_tf.serving import load_model_dir
from bert_tf.serving.litert_model import LiteRTModel
from bert_tf.text import load_tokenizer, tokenizer_files
from bert_tf.text.input_packing import pack_inputs

from finetuning_helpers import write_sst2
from sentencepiece_fixtures import sentencepiece_model_file
from test_finetuning_bpe import _config, _tiny_squad

SEQ = 24


def reference_tool():
    """tools/make_sentencepiece_reference.py as a module."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "tools", "make_sentencepiece_reference.py")
    spec = importlib.util.spec_from_file_location("make_sentencepiece_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))  # it imports the BPE tool beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


@pytest.fixture(scope="module")
def albert_release(tmp_path_factory):
    """What the ALBERT release's tarball holds: albert_config.json, model.ckpt-best.* and
    30k-clean.model (here a tiny ALBERT with random weights and the fixture's model)."""
    model_file = sentencepiece_model_file(tmp_path_factory)
    vocab_size = load_tokenizer(model_file).vocab_size
    directory = tmp_path_factory.mktemp("albert") / "albert_tiny"
    directory.mkdir()
    albert_config = {
        "attention_probs_dropout_prob": 0.0, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
        "embedding_size": 16, "hidden_size": 32, "initializer_range": 0.02,
        "intermediate_size": 64, "max_position_embeddings": 32, "num_attention_heads": 2,
        "num_hidden_layers": 2, "num_hidden_groups": 1, "net_structure_type": 0,
        "gap_size": 0, "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1,
        "type_vocab_size": 2, "vocab_size": vocab_size}
    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertEncoder(config_from_albert(albert_config)),
                           sentence_order_prediction=True)
    save_albert_checkpoint(model, str(directory / "model.ckpt-best"), vocab_file=model_file)
    os.remove(directory / "bert_config.json")  # the release has albert_config.json only
    assert sorted(os.listdir(directory)) == [
        "30k-clean.model", "albert_config.json", "model.ckpt-best.data-00000-of-00001",
        "model.ckpt-best.index"]
    return directory


def _classify_config(albert_release, tmp_path, *argv):
    data = tmp_path / "SST-2"
    write_sst2(str(data), num_train=256, num_dev=64, num_test=4)
    flag_values = classify_cli.define_flags(flags.FlagValues())
    flag_values(["prog", "--task_name=sst-2", f"--data_dir={data}",
                 f"--init_checkpoint={albert_release / 'model.ckpt-best'}",
                 f"--max_seq_length={SEQ}", "--train_batch_size=16", "--num_train_epochs=2",
                 "--learning_rate=2e-3", "--seed=1", f"--output_dir={tmp_path / 'out'}", *argv])
    return cli_flags.to_config(ClassificationConfig, flag_values)


@pytest.mark.slow
def test_classify_from_an_albert_release_tokenizes_with_its_sentencepiece_model(
        albert_release, tmp_path):
    """No --vocab_file, no --bert_config_file: the checkpoint's albert_config.json and
    30k-clean.model. The run learns the task; its directory and export carry the model as
    spiece.model; serve_text tokenizes in the graph as the Python tokenizer."""
    config = _classify_config(albert_release, tmp_path, "--do_train", "--do_eval",
                              f"--export_dir={tmp_path / 'export' / '1'}")
    assert config.task.vocab_file is None
    results = run_classifier(config)
    assert results["global_step"] == 32
    assert results["eval"]["accuracy"] >= 0.8, results  # chance: 0.5
    out = tmp_path / "out"
    assert "spiece.model" in os.listdir(out) and "vocab.txt" not in os.listdir(out)
    source = albert_release / "30k-clean.model"
    assert (out / "spiece.model").read_bytes() == source.read_bytes()
    tokenizer = load_tokenizer(str(out / "spiece.model"))
    record = json.loads((out / "bert_tf_run.json").read_text())
    assert record["tokenizer_sha256"] == tokenizer.digest()
    assert record["do_lower_case"] is True
    assert json.loads((out / "task_info.json").read_text())["do_lower_case"] is True

    texts = ["The film was SUPERB, really.", "Ünïcödé café: an awful plot (1,000 scenes)"]
    rows = [pack_inputs(tokenizer.encode(t), max_seq_length=SEQ, cls_id=tokenizer.cls_id,
                        sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id) for t in texts]
    features = {k: np.array([r[k] for r in rows], np.int32) for k in rows[0]}
    logits = keras.saving.load_model(out / "model.keras")(features).numpy()
    assert logits.argmax(-1).tolist() == [1, 0]
    served = tf.saved_model.load(str(tmp_path / "export" / "1"))
    got = served.signatures["serve_text"](text=tf.constant(texts))
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(got["probabilities"].numpy(),
                               shifted / shifted.sum(-1, keepdims=True), rtol=0, atol=1e-5)
    # What bert-tf-export --model_dir=RUN reads.
    model_dir = load_model_dir(str(out))
    assert model_dir.vocab_file == str(out / "spiece.model")
    assert model_dir.do_lower_case is True
    # bert-tf-export --format=litert: the text inside, on LiteRT's SentencePiece kernel.
    written = export.export(export.ExportConfig(model_dir=str(out), export_dir=str(
        tmp_path / "lite"), format="litert"))
    assert "none needing Flex" in written, written
    lite = LiteRTModel(str(tmp_path / "lite"))
    assert lite.signatures["serve_text"]["inputs"] == ["text"]
    np.testing.assert_allclose(lite.predict(texts)["probabilities"],
                               got["probabilities"].numpy(), rtol=0, atol=1e-5)


def test_conversions_carry_the_sentencepiece_model(albert_release, tmp_path):
    """--from=albert finds 30k-clean.model; a bert_tf or Hugging Face directory holds it as
    spiece.model (with tokenizer_config.json naming AlbertTokenizer), an ALBERT one as
    30k-clean.model."""
    checkpoint = str(albert_release / "model.ckpt-best")
    model_bytes = (albert_release / "30k-clean.model").read_bytes()

    def convert(to, out, **options):
        return convert_checkpoint(ConvertCheckpointConfig(
            from_format="albert", to_format=to, checkpoint=checkpoint, output_dir=str(out),
            **options))

    names = convert("bert_tf", tmp_path / "bert_tf", do_lower_case=True)
    assert "spiece.model" in names and "vocab.txt" not in names
    assert (tmp_path / "bert_tf" / "spiece.model").read_bytes() == model_bytes
    names = convert("albert", tmp_path / "albert")
    assert names == ["30k-clean.model", "albert_config.json", "bert_config.json",
                     "model.ckpt.data-00000-of-00001", "model.ckpt.index"]
    assert (tmp_path / "albert" / "30k-clean.model").read_bytes() == model_bytes
    # Given the casing, an ALBERT output records it as the others do, and reads it back.
    names = convert("albert", tmp_path / "albert_cased", do_lower_case=False)
    assert "tokenizer_config.json" in names
    assert checkpoint_casing(str(tmp_path / "albert_cased" / "model.ckpt"))[0] is False
    # A plain BERT on a SentencePiece vocabulary as a Hugging Face directory: the model and the
    # tokenizer_config.json transformers' AutoTokenizer reads it with
    # (tools/make_sentencepiece_reference.py loads its reference ids through the same).
    tokenizer = load_tokenizer(str(albert_release / "30k-clean.model"))
    bert = BertEncoder(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32,
                                  num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=32))
    save_huggingface(bert, str(tmp_path / "hf"),
                     vocab_file=str(albert_release / "30k-clean.model"), do_lower_case=True)
    assert sorted(os.listdir(tmp_path / "hf")) == [
        "config.json", "model.safetensors", "spiece.model", "tokenizer_config.json"]
    assert (tmp_path / "hf" / "spiece.model").read_bytes() == model_bytes
    # The file through which tools/make_sentencepiece_reference.py had transformers'
    # AutoTokenizer read the model for the reference ids.
    assert json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text()) == (
        reference_tool().TOKENIZER_CONFIG)
    # Commands given the directory tokenize with the model.
    assert tokenizer_files.model_tokenizer_file(str(tmp_path / "hf")) == str(
        tmp_path / "hf" / "spiece.model")


@pytest.mark.slow
def test_squad_from_an_albert_release_answers_whole_words(albert_release, tmp_path):
    """bert-tf-squad from the release: windows of SentencePiece pieces, every training answer
    found among them (span_forms), answers of whole words as written in the text in
    predictions.json (tests/serving/test_export_sentencepiece.py checks the SQuAD and tagging
    text signatures against Python; the tagging data encode words as SQuAD's, encode_word)."""
    train, dev = _tiny_squad(16, 1), _tiny_squad(6, 2)
    (tmp_path / "train.json").write_text(json.dumps(train))
    (tmp_path / "dev.json").write_text(json.dumps(dev))
    checkpoint = f"--init_checkpoint={albert_release / 'model.ckpt-best'}"
    config = _config(squad_cli.define_flags, SquadConfig, [
        f"--train_file={tmp_path / 'train.json'}", f"--predict_file={tmp_path / 'dev.json'}",
        checkpoint, "--do_train", "--do_predict", "--max_seq_length=32", "--doc_stride=8",
        "--max_query_length=10", "--train_batch_size=8", "--predict_batch_size=4",
        "--num_train_epochs=1", "--seed=1", f"--output_dir={tmp_path / 'squad'}"])
    results = run_squad(config)
    assert results["global_step"] == 2 and results["num_skipped_train_examples"] == 0
    assert results["num_predict_features"] > results["num_predict_examples"] == 6
    predictions = json.loads((tmp_path / "squad" / "predictions.json").read_text())
    contexts = {qa["id"]: p["context"] for p in dev["data"][0]["paragraphs"]
                for qa in p["qas"]}
    assert sorted(predictions) == sorted(contexts)
    for qid, text in predictions.items():
        words, count = contexts[qid].split(), len(text.split())
        assert count and any(" ".join(words[i:i + count]) == text
                             for i in range(len(words))), text
    assert "spiece.model" in os.listdir(tmp_path / "squad")


def test_bert_tf_and_sentence_transformers_directories_keep_the_sentencepiece_model(
        albert_release, tmp_path):
    """A bert_tf directory with spiece.model converts to Hugging Face with it; a sentence
    embedder on a SentencePiece vocabulary writes a sentence-transformers directory whose
    tokenizer_config.json names AlbertTokenizer, and reads back with the same tokenizer."""
    from bert_tf.interop.sentence_transformers import (load_sentence_transformers,
                                                       save_sentence_transformers)
    from bert_tf.modeling import BertSentenceEmbedder

    model_file = str(albert_release / "30k-clean.model")
    tokenizer = load_tokenizer(model_file)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    converted = tmp_path / "bert_tf"
    convert_checkpoint(ConvertCheckpointConfig(
        from_format="albert", to_format="bert_tf",
        checkpoint=str(albert_release / "model.ckpt-best"), output_dir=str(converted)))
    names = convert_checkpoint(ConvertCheckpointConfig(
        from_format="bert_tf", to_format="albert", checkpoint=str(converted),
        output_dir=str(tmp_path / "back")))
    assert "30k-clean.model" in names and "vocab.txt" not in names

    embedder = BertSentenceEmbedder(BertEncoder(config), pooling="mean")
    out = tmp_path / "st"
    save_sentence_transformers(embedder, str(out), model_file, True, 32)
    assert "spiece.model" in os.listdir(out) and "vocab.txt" not in os.listdir(out)
    settings = json.loads((out / "tokenizer_config.json").read_text())
    assert (settings["tokenizer_class"], settings["do_lower_case"]) == ("AlbertTokenizer", True)
    loaded = load_sentence_transformers(str(out))
    assert loaded.vocab_file == str(out / "spiece.model")
    assert loaded.tokenizer.fingerprint() == tokenizer.fingerprint()


def test_embedding_training_from_an_albert_release(albert_release, tmp_path):
    """bert-tf-embed from the release: texts tokenized by its SentencePiece model in the graph
    (BulkEmbedder) and in Python give the same vectors; a sentence-transformers directory
    cannot hold ALBERT's factorized, shared encoder: asked for, it is refused before training;
    by default the run goes without one."""
    from absl import flags as absl_flags

    from bert_tf.cli import embed
    from bert_tf.interop.sentence_transformers import load_embedder
    from bert_tf.jobs import embedding
    from bert_tf.jobs.flag_checks import FlagValueError
    from bert_tf.training.bulk_embedder import BulkEmbedder

    from embedding_helpers import write_pairs

    def config(*argv):
        flag_values = embed.define_flags(absl_flags.FlagValues())
        flag_values(["embed", f"--init_checkpoint={albert_release / 'model.ckpt-best'}",
                     f"--train_file={tmp_path / 'pairs.tsv'}", "--train_batch_size=8",
                     "--max_seq_length=24", "--seed=1", "--pooling=mean", *argv])
        return embed.embedding_config(flag_values)

    write_pairs(tmp_path / "pairs.tsv", 16)
    with pytest.raises(FlagValueError) as refused:
        embedding.train(config(f"--output_dir={tmp_path / 'refused'}",
                               f"--sentence_transformers_dir={tmp_path / 'st'}"))
    assert str(refused.value).startswith(
        f"--sentence_transformers_dir={tmp_path / 'st'}: cannot hold this model (the model's "
        "config has ")
    assert not (tmp_path / "refused").exists() and not (tmp_path / "st").exists()
    run = tmp_path / "run"
    embedding.train(config(f"--output_dir={run}"))
    assert "spiece.model" in os.listdir(run) and "sentence_transformers" not in os.listdir(run)
    loaded = load_embedder(str(run))
    texts = ["The film about Alice, 1990.", "Ünïcödé café", ""]
    vectors = BulkEmbedder(loaded.model, loaded.tokenizer, None, 24).embed(texts)
    rows = [pack_inputs(loaded.tokenizer.encode(t), max_seq_length=24,
                        cls_id=loaded.tokenizer.cls_id, sep_id=loaded.tokenizer.sep_id,
                        pad_id=loaded.tokenizer.pad_id) for t in texts]
    expected = loaded.model({k: np.array([r[k] for r in rows], np.int32) for k in rows[0]})
    np.testing.assert_allclose(vectors, expected.numpy(), rtol=0, atol=1e-5)
