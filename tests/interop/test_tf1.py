"""Original TF1 checkpoints: parity with the original math, exact round trip, clear errors."""

import json
import logging

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig
from bert_tf.interop import InteropError, load_tf1_checkpoint, save_tf1_checkpoint
from bert_tf.interop.tf1 import read_tf1_checkpoint
from interop_reference import (TINY, bert_reference, bert_tf_outputs, gelu_erf, make_inputs,
                               original_arrays, write_tf1_checkpoint)


@pytest.fixture
def config():
    return BertConfig(**TINY)


@pytest.fixture
def arrays():
    return original_arrays(seed=3, **TINY)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An original checkpoint with Adam slots and global_step, written once (read-only)."""
    prefix = tmp_path_factory.mktemp("tf1") / "bert_model.ckpt"
    return write_tf1_checkpoint(prefix, original_arrays(seed=3, **TINY))


def test_pretrainer_matches_original_math(checkpoint, arrays, config):
    model = load_tf1_checkpoint(checkpoint, config)
    features = make_inputs(vocab_size=config.vocab_size)
    expected = bert_reference(arrays, features, config.num_attention_heads,
                              config.num_hidden_layers)
    got = bert_tf_outputs(model, features)
    assert set(got) == {"sequence_output", "pooled_output", "mlm_log_probs", "nsp_logits"}
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)
    # The check has teeth: the exact GELU (not the original's) moves the outputs past 1e-5.
    wrong = bert_reference(arrays, features, config.num_attention_heads,
                           config.num_hidden_layers, activation=gelu_erf)
    assert np.abs(wrong["sequence_output"] - got["sequence_output"]).max() > 1e-4


def test_optimizer_slots_are_reported_unused(checkpoint):
    source = read_tf1_checkpoint(checkpoint)
    assert "global_step" in source.unused
    assert "bert/pooler/dense/kernel/adam_m" in source.unused
    assert "bert/pooler/dense/kernel/adam_v" in source.unused
    assert not any(name.endswith(("adam_m", "adam_v")) for name in source.tensors)


def test_round_trip_is_exact(tmp_path, checkpoint, arrays, config):
    model = load_tf1_checkpoint(checkpoint, config)
    out = tmp_path / "out" / "bert_model.ckpt"
    save_tf1_checkpoint(model, str(out))
    written = dict(tf.train.list_variables(str(out)))
    assert set(written) == set(arrays)
    reader = tf.train.load_checkpoint(str(out))
    for name, value in arrays.items():
        assert np.array_equal(reader.get_tensor(name), value), name
    assert json.loads((tmp_path / "out" / "bert_config.json").read_text()) == config.to_dict()
    # ... and back again, with the config from the bert_config.json written beside it.
    again = load_tf1_checkpoint(str(out))
    assert again.encoder.config == config


def test_written_checkpoint_restores_with_compat_v1_saver(tmp_path, checkpoint, arrays, config):
    out = str(tmp_path / "out" / "bert_model.ckpt")
    save_tf1_checkpoint(load_tf1_checkpoint(checkpoint, config), out)
    with tf.Graph().as_default():
        variables = {name: tf.compat.v1.get_variable(name, shape=value.shape)
                     for name, value in arrays.items()}
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            saver.restore(session, out)
            restored = session.run(variables)
    for name, value in arrays.items():
        assert np.array_equal(restored[name], value), name


def test_mlm_only_checkpoint_gives_pretrainer_without_nsp(tmp_path, config):
    arrays = original_arrays(seed=4, heads=("mlm",), **TINY)
    prefix = write_tf1_checkpoint(tmp_path / "bert_model.ckpt", arrays, optimizer_slots=False)
    model = load_tf1_checkpoint(prefix, config)
    assert model.next_sentence is None
    features = make_inputs(vocab_size=config.vocab_size)
    expected = bert_reference(arrays, features, 4, 2)
    np.testing.assert_allclose(bert_tf_outputs(model, features)["mlm_log_probs"],
                               expected["mlm_log_probs"], rtol=1e-5, atol=1e-5)


def test_checkpoint_without_the_mlm_head_reads_as_an_encoder(tmp_path, config, caplog):
    """What --to=tf1 writes of an encoder or a classifier reads back (it was refused for the
    missing cls/predictions); a classifier's head is named as left out."""
    from bert_tf.jobs.convert_checkpoint import ConvertCheckpointConfig, convert_checkpoint
    from bert_tf.modeling import BertEncoder

    arrays = original_arrays(seed=5, heads=(), **TINY)
    arrays["output_weights"] = np.ones((3, TINY["hidden_size"]), np.float32)
    arrays["output_bias"] = np.zeros(3, np.float32)
    prefix = write_tf1_checkpoint(tmp_path / "bert_model.ckpt", arrays)
    caplog.set_level(logging.WARNING, logger="absl")
    model = load_tf1_checkpoint(prefix, config)
    assert type(model) is BertEncoder
    assert caplog.messages == [f"{prefix} holds no MLM head (cls/predictions/*): read as an "
                               "encoder, without output_bias, output_weights"]
    features = make_inputs(vocab_size=config.vocab_size)
    expected = bert_reference(arrays, features, 4, 2)
    got = bert_tf_outputs(model, features)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5, err_msg=name)
    # The encoder's own checkpoint round trips, bert_config.json beside it, to Hugging Face too.
    out = tmp_path / "tf1" / "bert_model.ckpt"
    save_tf1_checkpoint(model, str(out))
    reader = tf.train.load_checkpoint(str(out))
    assert all(np.array_equal(reader.get_tensor(name), value)
               for name, value in arrays.items() if name.startswith("bert/"))
    caplog.clear()
    assert type(load_tf1_checkpoint(str(out))) is BertEncoder and not caplog.messages
    convert_checkpoint(ConvertCheckpointConfig(from_format="tf1", to_format="huggingface",
                                               checkpoint=str(out),
                                               output_dir=str(tmp_path / "hf")))
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == [
        "BertModel"]


def test_missing_variable_is_named(tmp_path, arrays, config):
    del arrays["bert/encoder/layer_1/output/dense/bias"]
    prefix = write_tf1_checkpoint(tmp_path / "bert_model.ckpt", arrays, optimizer_slots=False)
    with pytest.raises(InteropError) as error:
        load_tf1_checkpoint(prefix, config)
    assert str(error.value) == (f"{prefix}: variable bert/encoder/layer_1/output/dense/bias not "
                                "found (the model needs it with shape [32])")


def test_shape_mismatch_names_variable_and_both_shapes(checkpoint, config):
    with pytest.raises(InteropError) as error:
        load_tf1_checkpoint(checkpoint, config.replace(vocab_size=70))
    assert str(error.value) == (f"{checkpoint}: variable bert/embeddings/word_embeddings has "
                                "shape [60, 32] in the checkpoint but [70, 32] in the model "
                                "built from the config")


def test_other_depth_is_named(checkpoint, config):
    with pytest.raises(InteropError) as error:
        load_tf1_checkpoint(checkpoint, config.replace(num_hidden_layers=3))
    assert str(error.value) == (f"{checkpoint}: the checkpoint has 2 encoder layers "
                                "(bert/encoder/layer_0..1) but the model's config has "
                                "num_hidden_layers=3")


def test_no_checkpoint_at_prefix(tmp_path, config):
    with pytest.raises(InteropError, match=r"no readable TF1 checkpoint at this prefix"):
        load_tf1_checkpoint(str(tmp_path / "nothing.ckpt"), config)
