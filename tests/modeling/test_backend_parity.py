"""The same models on TensorFlow and JAX: outputs, gradients and saved files agree.

Keras fixes its backend at import, so the JAX side runs in one subprocess
(tests/modeling/backend_cases.py) with TensorFlow hidden from it; this process is TensorFlow.
"""

import json
import os

import keras
import numpy as np
import pytest

import backend_cases
from bert_tf import interop
from no_tensorflow import run_without_tensorflow

# One worker runs the module: its JAX subprocesses (the module fixture) are built once.
pytestmark = pytest.mark.xdist_group("jax_parity")

HERE = os.path.dirname(os.path.abspath(__file__))

@pytest.fixture(scope="module")
def jax_results(tmp_path_factory):
    """Every case built and run here (TensorFlow), then loaded and run under JAX."""
    directory = tmp_path_factory.mktemp("backends")
    keras.utils.set_random_seed(1)
    for name, (build, make_features, _) in backend_cases.CASES.items():
        model = build()
        features = make_features()
        np.savez(directory / f"{name}.inputs.npz", **features)
        model.save(directory / f"{name}.keras")
        backend_cases.compute(str(directory), name, model)
    (directory / "cases.json").write_text(json.dumps(list(backend_cases.CASES)))
    backend_cases.write_optimizer_inputs(str(directory))
    backend_cases.compute_optimizers(str(directory))
    done = run_without_tensorflow(os.path.join(HERE, "backend_cases.py"), str(directory))
    assert done.returncode == 0, done.stderr[-3000:]
    return directory


def _pairs(directory, name):
    tf_out = np.load(directory / f"{name}.tensorflow.npz")
    jax_out = np.load(directory / f"{name}.jax.npz")
    assert sorted(tf_out.files) == sorted(jax_out.files)
    return [(key, tf_out[key], jax_out[key]) for key in tf_out.files]


@pytest.mark.parametrize("name", sorted(backend_cases.CASES))
def test_outputs_agree_within_1e5(jax_results, name):
    """float32 sequence output, pooled output, MLM / NSP / SBO logits, losses, task logits and
    embeddings: BERT, ALBERT-shared, sinusoidal, modern with local windows (blocked path),
    padded and packed rows, 16 to 2,048 tokens."""
    pairs = [(k, a, b) for k, a, b in _pairs(jax_results, name) if not k.startswith("grad:")]
    assert len(pairs) >= 1
    for key, tf_value, jax_value in pairs:
        assert tf_value.shape == jax_value.shape, key
        assert np.isfinite(tf_value).all(), key
        np.testing.assert_allclose(jax_value, tf_value, atol=1e-5, rtol=1e-5, err_msg=key)


@pytest.mark.parametrize("name", backend_cases.GRADIENT_CASES)
def test_gradients_of_a_training_step_agree_within_1e4(jax_results, name):
    grads = [(k, a, b) for k, a, b in _pairs(jax_results, name) if k.startswith("grad:")]
    model_variables = len(keras.saving.load_model(jax_results / f"{name}.keras",
                                                  compile=False).trainable_variables)
    assert len(grads) == model_variables
    for key, tf_grad, jax_grad in grads:
        assert np.abs(tf_grad).max() > 0, key  # every variable takes part in the loss
        np.testing.assert_allclose(jax_grad, tf_grad, atol=1e-4, rtol=1e-4, err_msg=key)


@pytest.mark.parametrize("name", backend_cases.FUSED_CASES)
def test_the_fused_attention_function_gives_the_same_outputs(jax_results, name):
    """jax.nn.dot_product_attention with the padding / local-window bias (cuDNN on GPUs; its
    XLA form here): the real tokens' outputs are TensorFlow's (padding queries see no key, and
    their rows of garbage may differ)."""
    features = np.load(jax_results / f"{name}.inputs.npz")
    real = features["input_mask"].astype(bool)
    tf_out = np.load(jax_results / f"{name}.tensorflow.npz")
    fused = np.load(jax_results / f"{name}.jax_fused.npz")
    for key in fused.files:
        got, want = fused[key], tf_out[key]
        if got.shape[:2] == real.shape:
            got, want = got[real], want[real]
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5, err_msg=key)


def test_optimizers_take_the_same_steps(jax_results):
    """AdamW (TensorFlow's fused kernel vs keras.ops), LAMB and StableAdamW: three clipped
    steps with weight decay on the kernel and embeddings, not on the bias and gamma."""
    tf_weights = np.load(jax_results / "optimizer.tensorflow.npz")
    jax_weights = np.load(jax_results / "optimizer.jax.npz")
    start = np.load(jax_results / "optimizer.inputs.npz")
    assert len(tf_weights.files) == 3 * 4
    for key in tf_weights.files:
        np.testing.assert_allclose(jax_weights[key], tf_weights[key], atol=1e-6, rtol=1e-6,
                                   err_msg=key)
        index = ("kernel", "bias", "gamma", "embeddings").index(key.split(":")[1])
        assert np.abs(tf_weights[key] - start[f"w{index}"]).min() > 0, key  # every weight moved


def test_a_model_saved_under_jax_answers_identically_under_tensorflow(jax_results):
    model = backend_cases.load(str(jax_results / "own.jax.keras"))
    features = dict(np.load(jax_results / "bert_classifier_40.inputs.npz"))
    got = backend_cases.outputs(model, features, "task")["output"]
    expected = np.load(jax_results / "own.jax.npz")["output"]
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    # Not the TensorFlow side's own model: the JAX run initialised its own weights.
    assert np.abs(got - np.load(jax_results / "bert_classifier_40.tensorflow.npz")["output"]
                  ).max() > 1e-3


def test_models_import_and_run_without_tensorflow(jax_results):
    """The fixture's JAX worker, where `import tensorflow` fails, built modernbert_tiny's
    encoder from bert_tf.config and bert_tf.modeling and ran it (compiled, as the cases are);
    nothing it imported (the models, keras, the optimizers) put TensorFlow in sys.modules."""
    ran = json.loads((jax_results / "no_tensorflow.json").read_text())
    assert ran == {"sequence_output": [2, 40, 64], "tensorflow_imported": False}


@pytest.mark.parametrize("name", backend_cases.HUGGINGFACE_CASES)
def test_huggingface_directories_are_written_and_read_without_tensorflow(jax_results, name):
    """The JAX worker (TensorFlow hidden) wrote the TensorFlow side's model with
    save_huggingface and read it back with every weight as saved; read here under TensorFlow,
    the directory gives the model's outputs."""
    saved = backend_cases.load(str(jax_results / f"{name}.keras"))
    read_under_jax = np.load(jax_results / f"hf_{name}.jax.npz")
    model, _, _ = interop.load_huggingface(str(jax_results / f"hf_{name}"))
    assert set(read_under_jax.files) == {v.path for v in model.weights}
    original = {v.path: v.numpy() for v in saved.weights}
    left_out = backend_cases.HUGGINGFACE_CASES[name]
    for path in read_under_jax.files:
        if not path.startswith(left_out):
            np.testing.assert_array_equal(read_under_jax[path], original[path], err_msg=path)
    expected = np.load(jax_results / f"{name}.tensorflow.npz")
    features = dict(np.load(jax_results / f"{name}.inputs.npz"))
    read_here = backend_cases.outputs(model, features, "pretrainer")
    for key in backend_cases.HUGGINGFACE_OUTPUTS:
        np.testing.assert_allclose(read_here[key], expected[key], atol=1e-5, rtol=1e-5)


def test_an_unsupported_backend_is_one_line_naming_the_variable(tmp_path):
    script = tmp_path / "numpy_backend.py"
    script.write_text("import bert_tf.modeling\n")
    done = run_without_tensorflow(str(script), backend="numpy")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "bert_tf.keras_setup.UnsupportedBackendError: KERAS_BACKEND=numpy: bert_tf's "
        "models run on the Keras backends tensorflow and jax; set KERAS_BACKEND=tensorflow "
        "(the default) or KERAS_BACKEND=jax")
