"""bert_tf.load_model (every model directory --init_checkpoint reads, or a refusal naming what it
found), and Keras' own loader reading every .keras file bert_tf writes after `import bert_tf`."""

import json
import os
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest

import bert_tf
from bert_tf import interop
from bert_tf.config import BertConfig, ModernBertConfig
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer, BertSentenceEmbedder,
                              BertSpanLabeler, BertTokenClassifier, build_encoder)
from bert_tf.training.optimization import create_optimizer
from no_tensorflow import run_without_tensorflow

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_FIXTURE = os.path.join(REPO, "tests", "interop", "fixtures", "hf_bert_gelu")
TINY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
            intermediate_size=32)


def _tiny_encoder():
    keras.utils.set_random_seed(1)
    return BertEncoder(BertConfig.from_preset("bert_tiny", **TINY))


def _inputs():
    ids = np.array([[2, 7, 9, 3, 0]], np.int32)
    return {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "input_type_ids": np.zeros_like(ids)}


def _first_output(outputs):
    if isinstance(outputs, dict):
        outputs = outputs[sorted(outputs)[0]]
    return keras.ops.convert_to_numpy(outputs)


# A script for a fresh process: `import bert_tf`, then Keras' own loader on every file.
_LOAD_WITH_KERAS = """
import json, sys
import numpy as np
import bert_tf
assert "keras" not in sys.modules and "tensorflow" not in sys.modules, "import bert_tf is cheap"
import keras

directory = sys.argv[1]
inputs = dict(np.load(f"{directory}/inputs.npz"))
inputs["masked_lm_positions"] = np.array([[1, 2]], np.int32)
result = {}
for name, expected in json.load(open(f"{directory}/expected.json")).items():
    model = keras.saving.load_model(f"{directory}/{name}.keras")  # compile=True, as Keras does
    outputs = model(inputs if name == "pretrainer" else
                    {k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
    if isinstance(outputs, dict):
        outputs = outputs[sorted(outputs)[0]]
    got = keras.ops.convert_to_numpy(outputs)
    result[name] = [type(model).__name__, float(np.abs(got - np.array(expected)).max()),
                    type(getattr(model, "optimizer", None)).__name__]
result["tensorflow imported"] = "tensorflow" in sys.modules
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """One .keras file of every class bert_tf saves (one compiled with bert_tf's optimizer and
    schedule) and the outputs they give here."""
    directory = tmp_path_factory.mktemp("saved")
    encoder = _tiny_encoder()
    modern = build_encoder(ModernBertConfig.from_preset("modernbert_tiny", **TINY))
    classifier = BertClassifier(encoder, num_classes=3)
    classifier.compile(optimizer=create_optimizer(1e-4, num_train_steps=10, num_warmup_steps=1))
    classifier.fit(_inputs(), np.array([1]), verbose=0)  # the optimizer's slots exist
    models = {
        "encoder": encoder, "modern_encoder": modern,
        "pretrainer": BertPretrainer(encoder, span_boundary_objective=True),
        "classifier": classifier, "span_labeler": BertSpanLabeler(encoder),
        "token_classifier": BertTokenClassifier(encoder, num_classes=4),
        "sentence_embedder": BertSentenceEmbedder(encoder, pooling="mean"),
    }
    inputs = _inputs()
    np.savez(directory / "inputs.npz", **inputs)
    expected = {}
    for name, model in models.items():
        model.save(directory / f"{name}.keras")
        features = (dict(inputs, masked_lm_positions=np.array([[1, 2]], np.int32))
                    if name == "pretrainer" else inputs)
        expected[name] = _first_output(model(features)).tolist()
    (directory / "expected.json").write_text(json.dumps(expected))
    (directory / "load.py").write_text(_LOAD_WITH_KERAS)
    return directory


def _check_loaded(result):
    assert result.pop("tensorflow imported") is False or keras.backend.backend() == "tensorflow"
    names = {name: entry[0] for name, entry in result.items()}
    assert names == {"encoder": "BertEncoder", "modern_encoder": "ModernBertEncoder",
                     "pretrainer": "BertPretrainer", "classifier": "BertClassifier",
                     "span_labeler": "BertSpanLabeler",
                     "token_classifier": "BertTokenClassifier",
                     "sentence_embedder": "BertSentenceEmbedder"}
    assert max(entry[1] for entry in result.values()) < 1e-5, result
    assert result["classifier"][2] == "AdamWeightDecay"


def test_keras_loads_every_saved_class_after_import_bert_tf_on_jax_without_tensorflow(
        saved_models):
    done = run_without_tensorflow(str(saved_models / "load.py"), str(saved_models))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["tensorflow imported"] is False
    _check_loaded(result)


def test_keras_loads_every_saved_class_after_import_bert_tf_on_tensorflow(saved_models):
    proc = subprocess.run([sys.executable, str(saved_models / "load.py"), str(saved_models)],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=REPO, KERAS_BACKEND="tensorflow"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Quiet: `import bert_tf` before Keras keeps TensorFlow's start-up lines off stderr.
    assert proc.stderr == ""
    _check_loaded(json.loads(proc.stdout.strip().splitlines()[-1]))


def test_a_saved_model_of_each_architecture_loads_with_its_config_class(saved_models):
    """The .keras file holds the flat bert_config.json dict; loading reads it into the class
    of its architecture."""
    expected = {"encoder": BertConfig.from_preset("bert_tiny", **TINY),
                "pretrainer": BertConfig.from_preset("bert_tiny", **TINY),
                "modern_encoder": ModernBertConfig.from_preset("modernbert_tiny", **TINY)}
    for name, config in expected.items():
        model = keras.saving.load_model(saved_models / f"{name}.keras", compile=False)
        loaded = (model if name != "pretrainer" else model.encoder).config
        assert type(loaded) is type(config) and loaded == config, name
    stored = json.loads(zipfile.ZipFile(saved_models / "modern_encoder.keras").read(
        "config.json"))["config"]["config"]
    assert stored == config.to_dict()


def test_load_model_picks_the_fine_tuned_model_of_a_run_directory(tmp_path):
    encoder = _tiny_encoder()
    classifier = BertClassifier(encoder, num_classes=3)
    classifier(_inputs())
    run = tmp_path / "run"
    run.mkdir()
    encoder.save(str(run / "encoder.keras"))
    classifier.save(str(run / "model.keras"))
    loaded = bert_tf.load_model(str(run))
    assert isinstance(loaded, BertClassifier)
    np.testing.assert_allclose(loaded(_inputs()), classifier(_inputs()), atol=1e-6)
    assert isinstance(bert_tf.load_model(str(run / "encoder.keras")), BertEncoder)


def test_load_model_reads_what_init_checkpoint_reads(tmp_path):
    # Hugging Face: the fixture's BertForPreTraining (MLM and NSP heads).
    hf = bert_tf.load_model(HF_FIXTURE)
    assert isinstance(hf, BertPretrainer) and hf.next_sentence is not None
    # An original TF1 checkpoint (a pretrainer's, as Google's), by its directory and prefix.
    encoder = _tiny_encoder()
    expected = encoder(_inputs())["pooled_output"]
    interop.save_tf1_checkpoint(BertPretrainer(encoder), str(tmp_path / "tf1" / "bert_model.ckpt"))
    for path in (tmp_path / "tf1", tmp_path / "tf1" / "bert_model.ckpt"):
        loaded = bert_tf.load_model(path)
        assert isinstance(loaded, BertPretrainer)
        np.testing.assert_allclose(loaded.encoder(_inputs())["pooled_output"], expected,
                                   atol=1e-6)
    # sentence-transformers.
    embedder = BertSentenceEmbedder(encoder, pooling="mean")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(token + "\n" for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                          "[MASK]", *map(str, range(45))]))
    interop.save_sentence_transformers(embedder, str(tmp_path / "st"), str(vocab),
                                       do_lower_case=True, max_seq_length=16)
    loaded = bert_tf.load_model(tmp_path / "st")
    assert isinstance(loaded, BertSentenceEmbedder)
    np.testing.assert_allclose(loaded(_inputs()), embedder(_inputs()), atol=1e-6)


def test_load_model_refusals_name_what_was_found_and_what_reads_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: no model bert_tf reads "
                       r"\(it is empty\); bert_tf.load_model reads a .keras file, a bert_tf "
                       "run directory, an original TF1 checkpoint"):
        bert_tf.load_model(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no such directory or .keras file"):
        bert_tf.load_model(str(tmp_path / "missing.keras"))
    (tmp_path / "weights.h5").write_text("x")
    with pytest.raises(ValueError, match="weights.h5: not a model file bert_tf reads; "
                       "bert_tf.load_model reads a .keras file"):
        bert_tf.load_model(str(tmp_path / "weights.h5"))
    export = tmp_path / "export"
    export.mkdir()
    (export / "saved_model.pb").write_bytes(b"")
    with pytest.raises(ValueError, match=r"export is a SavedModel export \(saved_model.pb\): "
                       "bert_tf.load_model reads models to fine-tune or run in Keras; load it "
                       r"with tf.saved_model.load\(\)"):
        bert_tf.load_model(export)
    with pytest.raises(FileNotFoundError, match=r"it holds export, weights.h5\)"):
        bert_tf.load_model(tmp_path)


def test_a_keras_file_that_cannot_be_read_is_named_in_one_line(tmp_path):
    """A truncated .keras file, a text file named .keras, an archive without its weights: Keras
    said "File not found" (or raised its own error) for each."""
    import zipfile

    from bert_tf import keras_files
    from bert_tf.model_directory import ModelFileError

    good = tmp_path / "encoder.keras"
    _tiny_encoder().save(str(good))
    data = good.read_bytes()
    (tmp_path / "cut.keras").write_bytes(data[:len(data) // 2])
    (tmp_path / "text.keras").write_text("not a model\n")
    with zipfile.ZipFile(good) as source, zipfile.ZipFile(tmp_path / "bare.keras", "w") as bare:
        bare.writestr("config.json", source.read("config.json"))
    unreadable = ("not a readable .keras file (File is not a zip file); it is truncated or is not "
                  "a Keras model file (an interrupted copy or download?): save or fetch it again")
    for name in ("cut.keras", "text.keras"):
        with pytest.raises(ModelFileError) as error:
            bert_tf.load_model(str(tmp_path / name))
        assert str(error.value) == f"{tmp_path / name}: {unreadable}"
    with pytest.raises(ModelFileError) as error:
        keras_files.load_keras_file(tmp_path / "bare.keras", where="--model_dir=bare.keras")
    assert str(error.value) == ("--model_dir=bare.keras: Keras cannot load this .keras file "
                                "(Expected a model.weights.h5 or model.weights.npz file.)")
    assert keras_files.read_keras_config(good)["class_name"] == "BertEncoder"
    assert type(bert_tf.load_model(str(good))).__name__ == "BertEncoder"

