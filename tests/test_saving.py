"""bert_tf.load_model, and the registration that lets keras.saving.load_model find our classes
(importing bert_tf.modeling registers them; importing bert_tf alone changes nothing in the
process)."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import bert_tf
from bert_tf.config import BertConfig
from bert_tf.modeling import BertClassifier, BertEncoder

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tiny_encoder():
    keras.utils.set_random_seed(1)
    return BertEncoder(BertConfig.from_preset("bert_tiny", vocab_size=50, hidden_size=16,
                                              num_hidden_layers=1, num_attention_heads=2,
                                              intermediate_size=32))


def _inputs():
    ids = np.array([[2, 7, 9, 3, 0]], np.int32)
    return {"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
            "input_type_ids": np.zeros_like(ids)}


def test_fresh_process_loads_with_keras_after_import_bert_tf_modeling(tmp_path):
    encoder = _tiny_encoder()
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    expected = encoder(_inputs())["pooled_output"].numpy()
    np.save(tmp_path / "expected.npy", expected)
    script = f"""
import sys
finders = list(sys.meta_path)
import bert_tf
assert "tensorflow" not in sys.modules, "import bert_tf must not import TensorFlow"
assert sys.meta_path == finders, "import bert_tf must not install an import hook"
import bert_tf.modeling
import keras, numpy as np
model = keras.saving.load_model({path!r})
ids = np.array([[2, 7, 9, 3, 0]], np.int32)
out = model({{"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
             "input_type_ids": np.zeros_like(ids)}})["pooled_output"].numpy()
print(type(model).__name__, float(np.abs(out - np.load({str(tmp_path / "expected.npy")!r})).max()))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=str(tmp_path), timeout=300,
                          env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    name, diff = proc.stdout.split()
    assert name == "BertEncoder"
    assert float(diff) < 1e-6


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


def test_load_model_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}: found none of model.keras, "
                       "pretrainer.keras, encoder.keras"):
        bert_tf.load_model(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no such directory or .keras file"):
        bert_tf.load_model(str(tmp_path / "missing.keras"))
    (tmp_path / "weights.h5").write_text("x")
    with pytest.raises(ValueError, match="expected a run's output directory or a .keras file"):
        bert_tf.load_model(str(tmp_path / "weights.h5"))


def test_a_keras_file_that_cannot_be_read_is_named_in_one_line(tmp_path):
    """A truncated .keras file, a text file named .keras, an archive without its weights: Keras
    said "File not found" (or raised its own error) for each."""
    import zipfile

    from bert_tf import saving
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
        saving.load_keras_file(tmp_path / "bare.keras", where="--model_dir=bare.keras")
    assert str(error.value) == ("--model_dir=bare.keras: Keras cannot load this .keras file "
                                "(Expected a model.weights.h5 or model.weights.npz file.)")
    assert saving.read_keras_config(good)["class_name"] == "BertEncoder"
    assert type(bert_tf.load_model(str(good))).__name__ == "BertEncoder"
