"""ALBERT's original TF1 checkpoints: parity with ALBERT's math, exact round trip, clear errors,
and warm starts of BERT-family models from bert_tf and ALBERT checkpoints."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.config import BertConfig, ConfigError
from bert_tf.interop import InteropError, model_variables, save_huggingface, warm_start
from bert_tf.interop.albert import (config_from_albert, load_albert_checkpoint,
                                    save_albert_checkpoint)
from bert_tf.interop.tf1 import read_tf1_checkpoint
from bert_tf.modeling import BertClassifier, BertEncoder, BertPretrainer
from interop_reference import (_layer_norm, _softmax, gelu_tanh, log_softmax, make_inputs,
                               write_tf1_checkpoint)
import zygote

# google-research/albert's albert_config.json fields, tiny.
ALBERT_CONFIG = {
    "attention_probs_dropout_prob": 0.0, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
    "embedding_size": 16, "hidden_size": 32, "initializer_range": 0.02,
    "intermediate_size": 64, "max_position_embeddings": 24, "num_attention_heads": 4,
    "num_hidden_layers": 3, "num_hidden_groups": 1, "net_structure_type": 0, "gap_size": 0,
    "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1,
    "type_vocab_size": 2, "vocab_size": 60,
}
BLOCK = "bert/encoder/transformer/group_0/inner_group_0/"


def albert_arrays(seed=0):
    """Random weights under ALBERT's TF1 names (wide, so any mis-mapping shows)."""
    rng = np.random.default_rng(seed)
    v, e, h, f = 60, 16, 32, 64
    arrays = {}

    def dense(prefix, n_in, n_out):
        arrays[prefix + "/kernel"] = rng.normal(0, 0.3, (n_in, n_out)).astype(np.float32)
        arrays[prefix + "/bias"] = rng.normal(0, 0.1, (n_out,)).astype(np.float32)

    def layer_norm(prefix, n):
        arrays[prefix + "/gamma"] = (1 + rng.normal(0, 0.1, (n,))).astype(np.float32)
        arrays[prefix + "/beta"] = rng.normal(0, 0.1, (n,)).astype(np.float32)

    for name, rows in (("word", v), ("token_type", 2), ("position", 24)):
        arrays[f"bert/embeddings/{name}_embeddings"] = rng.normal(0, 0.3, (rows, e)).astype(
            np.float32)
    layer_norm("bert/embeddings/LayerNorm", e)
    dense("bert/encoder/embedding_hidden_mapping_in", e, h)
    for name in ("query", "key", "value"):
        dense(BLOCK + "attention_1/self/" + name, h, h)
    dense(BLOCK + "attention_1/output/dense", h, h)
    layer_norm(BLOCK + "LayerNorm", h)
    dense(BLOCK + "ffn_1/intermediate/dense", h, f)
    dense(BLOCK + "ffn_1/intermediate/output/dense", f, h)
    layer_norm(BLOCK + "LayerNorm_1", h)
    dense("bert/pooler/dense", h, h)
    dense("cls/predictions/transform/dense", h, e)
    layer_norm("cls/predictions/transform/LayerNorm", e)
    arrays["cls/predictions/output_bias"] = rng.normal(0, 0.1, (v,)).astype(np.float32)
    arrays["cls/seq_relationship/output_weights"] = rng.normal(0, 0.3, (2, h)).astype(np.float32)
    arrays["cls/seq_relationship/output_bias"] = rng.normal(0, 0.1, (2,)).astype(np.float32)
    return arrays


def albert_reference(arrays, features, heads=4, layers=3, eps=1e-12):
    """ALBERT's forward pass (google-research/albert modeling.py) in float64 NumPy."""
    w = {k: np.asarray(v, np.float64) for k, v in arrays.items()}
    ids, mask, types = (features["input_word_ids"], features["input_mask"],
                        features["input_type_ids"])
    batch, seq_length = ids.shape

    def dense(prefix, t):
        return t @ w[prefix + "/kernel"] + w[prefix + "/bias"]

    x = (w["bert/embeddings/word_embeddings"][ids]
         + w["bert/embeddings/token_type_embeddings"][types]
         + w["bert/embeddings/position_embeddings"][:seq_length][None])
    x = _layer_norm(x, w["bert/embeddings/LayerNorm/gamma"],
                    w["bert/embeddings/LayerNorm/beta"], eps)
    x = dense("bert/encoder/embedding_hidden_mapping_in", x)
    hidden = x.shape[-1]
    size = hidden // heads
    adder = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0

    def split(t):
        return t.reshape(batch, seq_length, heads, size).transpose(0, 2, 1, 3)

    for _ in range(layers):  # the same group applied every layer
        q, k, v = (split(dense(BLOCK + f"attention_1/self/{n}", x))
                   for n in ("query", "key", "value"))
        probs = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq_length, hidden)
        attention = _layer_norm(dense(BLOCK + "attention_1/output/dense", context) + x,
                                w[BLOCK + "LayerNorm/gamma"], w[BLOCK + "LayerNorm/beta"], eps)
        inner = gelu_tanh(dense(BLOCK + "ffn_1/intermediate/dense", attention))
        x = _layer_norm(dense(BLOCK + "ffn_1/intermediate/output/dense", inner) + attention,
                        w[BLOCK + "LayerNorm_1/gamma"], w[BLOCK + "LayerNorm_1/beta"], eps)
    pooled = np.tanh(dense("bert/pooler/dense", x[:, 0]))
    gathered = np.take_along_axis(x, features["masked_lm_positions"][:, :, None], axis=1)
    t = _layer_norm(gelu_tanh(dense("cls/predictions/transform/dense", gathered)),
                    w["cls/predictions/transform/LayerNorm/gamma"],
                    w["cls/predictions/transform/LayerNorm/beta"], eps)
    logits = t @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    return {"sequence_output": x, "pooled_output": pooled, "mlm_log_probs": log_softmax(logits),
            "sop_logits": pooled @ w["cls/seq_relationship/output_weights"].T
            + w["cls/seq_relationship/output_bias"]}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An original-layout ALBERT checkpoint (Adam slots too) with its albert_config.json."""
    directory = tmp_path_factory.mktemp("albert")
    (directory / "albert_config.json").write_text(json.dumps(ALBERT_CONFIG))
    prefix = write_tf1_checkpoint(directory / "model.ckpt-best", albert_arrays(seed=1))
    return prefix, albert_arrays(seed=1)


def outputs_of(model, features):
    encoded = model.encoder({k: features[k] for k in ("input_word_ids", "input_mask",
                                                      "input_type_ids")})
    heads = model(features)
    return {"sequence_output": encoded["sequence_output"],
            "pooled_output": encoded["pooled_output"],
            "mlm_log_probs": tf.nn.log_softmax(heads["mlm_logits"]),
            "sop_logits": heads["nsp_logits"]}


def test_albert_checkpoint_reproduces_albert_math(checkpoint):
    prefix, arrays = checkpoint
    model = load_albert_checkpoint(prefix)
    config = model.encoder.config
    assert (config.embedding_size, config.share_parameters, config.num_hidden_layers) == (
        16, "all", 3)
    assert model.sentence_order_prediction
    features = make_inputs(seed=2)
    expected = albert_reference(arrays, features)
    for name, value in outputs_of(model, features).items():
        np.testing.assert_allclose(np.asarray(value), expected[name], atol=2e-4, rtol=1e-4,
                                   err_msg=name)


def test_round_trip_writes_albert_names_and_config(checkpoint, tmp_path):
    prefix, arrays = checkpoint
    model = load_albert_checkpoint(prefix)
    out = save_albert_checkpoint(model, str(tmp_path / "model.ckpt"))
    source = read_tf1_checkpoint(out)
    assert sorted(source.tensors) == sorted(arrays)
    for name, value in arrays.items():
        np.testing.assert_array_equal(source.tensors[name].read(), value)
    written = json.loads((tmp_path / "albert_config.json").read_text())
    assert written == ALBERT_CONFIG
    assert config_from_albert(written) == model.encoder.config


def test_unsupported_albert_options_and_layouts_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"albert_config.json: num_hidden_groups=2 is not "
                                          r"supported \(bert_tf implements ALBERT with "
                                          r"num_hidden_groups=1\)"):
        config_from_albert(dict(ALBERT_CONFIG, num_hidden_groups=2))
    bert = BertEncoder(BertConfig(**{k: v for k, v in ALBERT_CONFIG.items()
                                     if k in BertConfig.__dataclass_fields__}))
    with pytest.raises(InteropError, match="share_parameters='none', expected 'all'"):
        save_albert_checkpoint(bert, str(tmp_path / "model.ckpt"))
    albert = BertEncoder(config_from_albert(ALBERT_CONFIG))
    with pytest.raises(InteropError, match="embedding_size=16; Hugging Face BERT checkpoints "
                                           "hold plain BERT only"):
        save_huggingface(albert, str(tmp_path / "hf"))


def test_family_variants_have_one_name_per_variable():
    for overrides in (dict(share_parameters="attention"), dict(share_parameters="ffn"),
                      dict(position_embedding_type="sinusoidal", embedding_size=16)):
        config = BertConfig(**dict(vocab_size=60, hidden_size=32, num_hidden_layers=3,
                                   num_attention_heads=4, intermediate_size=64,
                                   max_position_embeddings=24), **overrides)
        model = BertPretrainer(BertEncoder(config), span_boundary_objective=True)
        names = model_variables(model)
        ids = [id(variable) for variable, _ in names.values()]
        assert len(ids) == len(set(ids))
        sbo = ({id(v) for v in model.span_boundary.weights}
               - {id(v) for v in model.encoder.weights})  # its own weights, not the tied table
        # Every weight but the span-boundary head (which has no original name) is named once.
        assert set(ids) == {id(v) for v in model.weights} - sbo


def test_fine_tuning_warm_starts_from_albert_and_bert_tf_family_checkpoints(checkpoint,
                                                                            tmp_path):
    prefix, _ = checkpoint
    pretrainer = load_albert_checkpoint(prefix)
    classifier = BertClassifier(BertEncoder(pretrainer.encoder.config), num_classes=3)
    report = warm_start(prefix, classifier)
    assert report.newly_initialized == ["classifier/kernel", "classifier/bias"]
    for loaded, original in zip(classifier.encoder.weights, pretrainer.encoder.weights):
        np.testing.assert_array_equal(loaded.numpy(), original.numpy())
    # A bert_tf training checkpoint of a SpanBERT-style, attention-sharing model.
    config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=24, share_parameters="attention",
                        position_embedding_type="sinusoidal")
    config.to_json_file(str(tmp_path / "bert_config.json"))
    source = BertPretrainer(BertEncoder(config), use_next_sentence_label=False,
                            span_boundary_objective=True)
    tf.train.Checkpoint(model=source).write(str(tmp_path / "ckpt-1"))
    target = BertClassifier(BertEncoder(config), num_classes=2)
    report = warm_start(str(tmp_path / "ckpt-1"), target)
    assert report.newly_initialized == ["classifier/kernel", "classifier/bias"]
    for loaded, original in zip(target.encoder.weights, source.encoder.weights):
        np.testing.assert_array_equal(loaded.numpy(), original.numpy())
    # A BERT model cannot take the ALBERT-layout weights: the config difference is named.
    with pytest.raises(InteropError, match="share_parameters=attention in the checkpoint but "
                                           "none in the model"):
        warm_start(str(tmp_path / "ckpt-1"),
                   BertClassifier(BertEncoder(config.replace(share_parameters="none",
                                                             position_embedding_type="learned")),
                                  num_classes=2))


@pytest.mark.slow
def test_convert_checkpoint_cli_albert_to_bert_tf_with_longer_positions(checkpoint, tmp_path):
    import os
    import subprocess

    import keras

    prefix, arrays = checkpoint
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = tmp_path / "albert_long"
    proc = subprocess.run(
        [zygote.shared_python(), os.path.join(repo, "tools", "convert_checkpoint.py"),
         "--from=albert", "--to=bert_tf", f"--checkpoint={prefix}", f"--output_dir={out}",
         "--max_position_embeddings=40", "--position_extension=interpolate"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr
    config = BertConfig.from_json_file(str(out / "bert_config.json"))
    assert (config.max_position_embeddings, config.embedding_size, config.share_parameters) == (
        40, 16, "all")
    model = keras.saving.load_model(str(out / "pretrainer.keras"))
    table = model.encoder.embedding_layer.position_embeddings.embeddings.numpy()
    np.testing.assert_array_equal(table[:24], arrays["bert/embeddings/position_embeddings"])
    np.testing.assert_allclose(table[24], table[0])
    np.testing.assert_allclose(table[39], table[23])
    features = make_inputs(seed=4)
    expected = albert_reference(arrays, features)
    np.testing.assert_allclose(np.asarray(outputs_of(model, features)["sop_logits"]),
                               expected["sop_logits"], atol=2e-4, rtol=1e-4)
