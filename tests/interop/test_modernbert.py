"""Hugging Face ModernBERT checkpoints: outputs equal transformers' (fixtures written by
tools/make_hf_modernbert_reference.py), conversion both ways, clear errors."""

import json
import os
import shutil
import subprocess

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

from bert_tf.interop import huggingface, load_huggingface, save_huggingface, warm_start
from bert_tf.interop.weights import InteropError
from bert_tf.modeling import BertClassifier, BertPretrainer, ModernBertEncoder
from bert_tf.text import load_tokenizer
import peers
from command_batch import run_commands

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONVERT = os.path.join(REPO, "tools", "convert_checkpoint.py")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
MLM_DIR = os.path.join(FIXTURES, "hf_modernbert_mlm")
CLS_DIR = os.path.join(FIXTURES, "hf_modernbert_cls")
LENGTHS = (16, 40, 100, 2048)
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def masked_lm():
    model, config, vocab_file = load_huggingface(MLM_DIR)
    return model, config, vocab_file


@pytest.fixture(scope="module")
def classifier():
    """ModernBertForSequenceClassification as interop.load_huggingface_task reads it (what
    bert_tf.load_task and bert-tf-export serve), checked against transformers' logits below."""
    model, task, labels, vocab_file = huggingface.load_huggingface_task(CLS_DIR)
    assert isinstance(model, BertClassifier) and isinstance(model.encoder, ModernBertEncoder)
    assert (model.num_classes, model.multi_label, task) == (3, False, "classification")
    assert (labels, vocab_file) == (["LABEL_0", "LABEL_1", "LABEL_2"], None)
    return model


def case(reference, length):
    """(features, rows of sequence_output compared, the mask at those rows)."""
    ids = reference[f"len{length}_input_word_ids"]
    mask = reference[f"len{length}_input_mask"]
    features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
    rows = reference["long_positions"] if length == 2048 else np.arange(length)
    return features, rows, mask[:, rows].astype(bool)


def test_config_maps_modernbert_fields(masked_lm):
    _, config, vocab_file = masked_lm
    assert vocab_file is None
    assert (config.position_embedding_type, config.norm_placement, config.feed_forward_type,
            config.use_bias, config.norm_bias, config.final_layer_norm) == (
        "rotary", "pre", "gated", False, False, True)
    assert (config.local_attention_window, config.global_attn_every_n_layers,
            config.global_rope_theta, config.local_rope_theta, config.hidden_act,
            config.type_vocab_size, config.classifier_pooling) == (
        16, 3, 160000.0, 10000.0, "gelu_exact", 0, "cls")
    cls_config = huggingface.read_config(CLS_DIR)[0]
    assert (cls_config.use_bias, cls_config.norm_bias, cls_config.hidden_act,
            cls_config.layer_norm_eps, cls_config.global_rope_theta, cls_config.local_rope_theta,
            cls_config.classifier_pooling) == (True, True, "gelu", 1e-6, 50000.0, 5000.0, "mean")


@pytest.mark.parametrize("length", LENGTHS)
def test_masked_lm_equals_transformers(masked_lm, length):
    model, _, _ = masked_lm
    assert isinstance(model, BertPretrainer) and model.next_sentence is None
    reference = np.load(os.path.join(MLM_DIR, "reference.npz"))
    features, rows, real = case(reference, length)
    sequence = model.encoder(features)["sequence_output"].numpy()[:, rows]
    assert np.abs(sequence - reference[f"len{length}_sequence_output"])[real].max() < TOLERANCE
    if length == 2048:
        positions = reference["len2048_logit_positions"]
    else:
        positions = np.tile(np.arange(length, dtype=np.int32), (2, 1))
    logits = model(dict(features, masked_lm_positions=positions))["mlm_logits"].numpy()
    at_real = np.take_along_axis(features["input_mask"], positions, axis=1).astype(bool)
    assert np.abs(logits - reference[f"len{length}_logits"])[at_real].max() < TOLERANCE


@pytest.mark.parametrize("length", LENGTHS)
def test_sequence_classifier_equals_transformers(classifier, length):
    """Every bias on, mean pooling, the tanh GELU, other rotary bases."""
    reference = np.load(os.path.join(CLS_DIR, "reference.npz"))
    features, rows, real = case(reference, length)
    sequence = classifier.encoder(features)["sequence_output"].numpy()[:, rows]
    assert np.abs(sequence - reference[f"len{length}_sequence_output"])[real].max() < TOLERANCE
    logits = classifier(features).numpy()
    np.testing.assert_allclose(logits, reference[f"len{length}_logits"], atol=TOLERANCE)


def test_save_huggingface_round_trip(masked_lm, classifier, tmp_path):
    model, config, _ = masked_lm
    save_huggingface(model, str(tmp_path / "mlm"))
    written = load_file(str(tmp_path / "mlm" / "model.safetensors"))
    original = load_file(os.path.join(MLM_DIR, "model.safetensors"))
    assert sorted(written) == sorted(k for k in original if k != "decoder.weight")
    for key, value in written.items():
        assert np.array_equal(value, original[key]), key
    values = json.loads((tmp_path / "mlm" / "config.json").read_text())
    assert values["architectures"] == ["ModernBertForMaskedLM"]
    assert huggingface.read_config(str(tmp_path / "mlm"))[0] == config

    save_huggingface(classifier, str(tmp_path / "cls"))
    written = load_file(str(tmp_path / "cls" / "model.safetensors"))
    original = load_file(os.path.join(CLS_DIR, "model.safetensors"))
    assert sorted(written) == sorted(original)
    for key, value in written.items():
        assert np.array_equal(value, original[key]), key


def test_a_modern_encoder_on_a_wordpiece_vocabulary_keeps_it(masked_lm, tmp_path):
    """A modern encoder trained with a vocab.txt (not ModernBERT's tokenizer.json) is written
    with that vocabulary and its casing, as a BERT directory is, and reads back with it."""
    model, _, _ = masked_lm
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(words) + "\n")
    out = tmp_path / "out"
    save_huggingface(model, str(out), vocab_file=str(vocab), do_lower_case=True)
    assert (out / "vocab.txt").read_text().split() == words
    settings = json.loads((out / "tokenizer_config.json").read_text())
    assert settings["do_lower_case"] is True
    assert {settings[f"{role}_token"] for role in ("cls", "sep", "pad", "mask", "unk")} == set(
        words[:5])
    assert huggingface.do_lower_case_of(str(out)) is True
    # The same WordPiece as tokenizer.json, which AutoTokenizer reads for a ModernBERT directory
    # (it has no tokenizer class that reads vocab.txt); bert_tf reads it to the same ids.
    _, _, vocab_file = load_huggingface(str(out))
    assert vocab_file == str(out / "vocab.txt")
    from_json = load_tokenizer(str(out / "tokenizer.json"))
    from_txt = load_tokenizer(vocab_file, True)
    assert from_json.do_lower_case is True
    assert from_json.encode("The CAT, the cat") == from_txt.encode("The CAT, the cat") == [
        5, 6, 1, 5, 6]


@peers.needs("transformers")
def test_autotokenizer_reads_a_modern_encoders_wordpiece(masked_lm, tmp_path):
    model, _, _ = masked_lm
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", ","]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(words) + "\n")
    save_huggingface(model, str(tmp_path / "out"), vocab_file=str(vocab), do_lower_case=True)
    script = ("import sys, transformers\n"
              "t = transformers.AutoTokenizer.from_pretrained(sys.argv[1])\n"
              "print(t(['The CATS, the cat', 'cat'], padding=True)['input_ids'])\n")
    proc = subprocess.run([peers.python(), "-c", script, str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ours = load_tokenizer(str(vocab), True)
    expected = [[2] + ours.encode("The CATS, the cat") + [3], [2, 6, 3, 0, 0, 0, 0, 0]]
    assert proc.stdout.strip().splitlines()[-1] == str(expected)


@peers.needs("PyTorch and transformers")
def test_written_directory_loads_in_transformers(masked_lm, tmp_path):
    model, _, _ = masked_lm
    save_huggingface(model, str(tmp_path / "out"))
    script = (
        "import sys, numpy as np, torch, transformers\n"
        "m = transformers.ModernBertForMaskedLM.from_pretrained(sys.argv[1]).eval()\n"
        "r = np.load(sys.argv[2])\n"
        "ids, mask = (torch.from_numpy(r[k].astype('int64')) for k in "
        "('len40_input_word_ids', 'len40_input_mask'))\n"
        "with torch.no_grad():\n"
        "    out = m(input_ids=ids, attention_mask=mask).logits.numpy()\n"
        "real = r['len40_input_mask'].astype(bool)\n"
        "print(float(np.abs(out - r['len40_logits'])[real].max()))\n")
    proc = subprocess.run([peers.python(), "-c", script, str(tmp_path / "out"),
                           os.path.join(MLM_DIR, "reference.npz")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.split()[-1]) < TOLERANCE


def test_shapes_that_do_not_match_the_config_are_named(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(MLM_DIR, broken)
    values = json.loads((broken / "config.json").read_text())
    values["intermediate_size"] = 40
    (broken / "config.json").write_text(json.dumps(values))
    with pytest.raises(InteropError) as info:
        load_huggingface(str(broken))
    assert str(info.value) == (f"{broken}: variable model.layers.0.mlp.Wi.weight has shape "
                               "[96, 32] in the checkpoint but [80, 32] in the model built from "
                               "the config")


def test_a_layer_count_other_than_layer_types_is_named(tmp_path):
    """num_hidden_layers edited without layer_types was reported as a bad layer_types pattern."""
    broken = tmp_path / "broken"
    shutil.copytree(MLM_DIR, broken)
    values = json.loads((broken / "config.json").read_text())
    values["num_hidden_layers"] += 1
    (broken / "config.json").write_text(json.dumps(values))
    with pytest.raises(InteropError) as info:
        load_huggingface(str(broken))
    assert str(info.value) == (
        f"{broken}/config.json: num_hidden_layers={values['num_hidden_layers']} but layer_types "
        f"lists {len(values['layer_types'])} layers; the two must agree (the weights hold one "
        "block per layer)")


def test_unsupported_options_are_named(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(MLM_DIR, broken)
    values = json.loads((broken / "config.json").read_text())
    values["mlp_bias"] = True
    (broken / "config.json").write_text(json.dumps(values))
    with pytest.raises(InteropError) as info:
        load_huggingface(str(broken))
    assert "attention_bias, mlp_bias and classifier_bias differ" in str(info.value)
    assert str(info.value).startswith(f"{broken}/config.json: ")


def test_warm_start_a_classifier_from_modernbert():
    """--init_checkpoint=<ModernBERT dir>: the encoder loads; the pooler (ModernBERT's
    classifier head, which a ModernBertForMaskedLM lacks) and the classifier start fresh."""
    config = huggingface.read_config(MLM_DIR)[0]
    model = BertClassifier(ModernBertEncoder(config), num_classes=2)
    report = warm_start(MLM_DIR, model)
    assert report.newly_initialized == ["pooler/dense/kernel", "pooler/layer_norm/gamma",
                                        "classifier/kernel", "classifier/bias"]
    assert report.unused == ["decoder.bias", "head.dense.weight", "head.norm.weight"]
    source = load_file(os.path.join(MLM_DIR, "model.safetensors"))
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(model.encoder.word_embeddings.embeddings),
        source["model.embeddings.tok_embeddings.weight"])


@pytest.mark.slow
def test_convert_checkpoint_both_ways(tmp_path):
    source = tmp_path / "modernbert"
    shutil.copytree(MLM_DIR, source)
    (source / "tokenizer.json").write_text('{"model": {"type": "BPE"}}\n')
    bert_tf_dir = tmp_path / "bert_tf"
    hf_dir = tmp_path / "hf"
    # Both conversions in one process (one TensorFlow start-up); the second reads the first's
    # output directory.
    proc, back = run_commands([
        (CONVERT, ["--from=huggingface", "--to=bert_tf", f"--checkpoint={source}",
                   f"--output_dir={bert_tf_dir}"]),
        (CONVERT, ["--from=bert_tf", "--to=huggingface", f"--checkpoint={bert_tf_dir}",
                   f"--output_dir={hf_dir}"])])
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(bert_tf_dir)) == ["bert_config.json", "encoder.keras",
                                               "pretrainer.keras", "tokenizer.json"]
    encoder = keras.saving.load_model(str(bert_tf_dir / "encoder.keras"))
    reference = np.load(os.path.join(MLM_DIR, "reference.npz"))
    features, rows, real = case(reference, 100)
    sequence = encoder(features)["sequence_output"].numpy()[:, rows]
    assert np.abs(sequence - reference["len100_sequence_output"])[real].max() < TOLERANCE

    proc = back
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(hf_dir)) == ["config.json", "model.safetensors", "tokenizer.json"]
    written = load_file(str(hf_dir / "model.safetensors"))
    original = load_file(os.path.join(MLM_DIR, "model.safetensors"))
    for key, value in written.items():
        assert np.array_equal(value, original[key]), key
