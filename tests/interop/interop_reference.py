"""Test helpers: original-layout random weights, a TF1 checkpoint writer, and BERT in NumPy.

`bert_reference` re-implements google-research/bert's modeling.py math in float64 NumPy from the
original variable names, independently of bert_tf: embeddings sum, LayerNorm (eps 1e-12),
tanh-GELU, the -10000 attention mask, post-LN blocks, the tanh pooler, the MLM transform with
the tied decoder plus output_bias, and the NSP layer (output_weights [2, H]).
"""

import math

import numpy as np
import tensorflow as tf

TINY = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=24, type_vocab_size=2)


def original_arrays(seed=0, vocab_size=60, hidden_size=32, num_hidden_layers=2,
                    intermediate_size=64, max_position_embeddings=24, type_vocab_size=2,
                    heads=("mlm", "nsp"), **_):
    """Random float32 weights under every original TF1 name.

    Kernels are N(0, 0.3) (wide, so that any mis-mapped tensor or wrong GELU shows), LayerNorm
    gammas 1 + N(0, 0.1), betas and biases N(0, 0.1).
    """
    rng = np.random.default_rng(seed)
    hidden, inner = hidden_size, intermediate_size

    def kernel(*shape):
        return rng.normal(0.0, 0.3, shape).astype(np.float32)

    def bias(n):
        return rng.normal(0.0, 0.1, (n,)).astype(np.float32)

    arrays = {}

    def dense(prefix, n_in, n_out):
        arrays[prefix + "/kernel"] = kernel(n_in, n_out)
        arrays[prefix + "/bias"] = bias(n_out)

    def layer_norm(prefix, n):
        arrays[prefix + "/gamma"] = (1.0 + rng.normal(0.0, 0.1, (n,))).astype(np.float32)
        arrays[prefix + "/beta"] = bias(n)

    arrays["bert/embeddings/word_embeddings"] = kernel(vocab_size, hidden)
    arrays["bert/embeddings/token_type_embeddings"] = kernel(type_vocab_size, hidden)
    arrays["bert/embeddings/position_embeddings"] = kernel(max_position_embeddings, hidden)
    layer_norm("bert/embeddings/LayerNorm", hidden)
    for i in range(num_hidden_layers):
        p = f"bert/encoder/layer_{i}/"
        for name in ("query", "key", "value"):
            dense(p + "attention/self/" + name, hidden, hidden)
        dense(p + "attention/output/dense", hidden, hidden)
        layer_norm(p + "attention/output/LayerNorm", hidden)
        dense(p + "intermediate/dense", hidden, inner)
        dense(p + "output/dense", inner, hidden)
        layer_norm(p + "output/LayerNorm", hidden)
    dense("bert/pooler/dense", hidden, hidden)
    if "mlm" in heads:
        dense("cls/predictions/transform/dense", hidden, hidden)
        layer_norm("cls/predictions/transform/LayerNorm", hidden)
        arrays["cls/predictions/output_bias"] = bias(vocab_size)
    if "nsp" in heads:
        arrays["cls/seq_relationship/output_weights"] = kernel(2, hidden)
        arrays["cls/seq_relationship/output_bias"] = bias(2)
    return arrays


def write_tf1_checkpoint(prefix, arrays, optimizer_slots=True):
    """Saves `arrays` with tf.compat.v1 variables and Saver, as the original code did.

    With optimizer_slots, adds the original AdamWeightDecayOptimizer's `<name>/adam_m` and
    `<name>/adam_v` slots and `global_step`.
    """
    with tf.Graph().as_default():
        for name, value in arrays.items():
            tf.compat.v1.get_variable(name, initializer=tf.constant(value))
            if optimizer_slots:
                for slot in ("adam_m", "adam_v"):
                    tf.compat.v1.get_variable(f"{name}/{slot}",
                                              initializer=tf.zeros(value.shape))
        if optimizer_slots:
            tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return saver.save(session, str(prefix), write_meta_graph=False)


def make_inputs(seed=0, batch=2, seq_length=10, vocab_size=60, num_predictions=3):
    """Fixed features: [CLS]-like first id, the second row padded after 6 tokens, two segments."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, size=(batch, seq_length)).astype(np.int32)
    mask = np.ones((batch, seq_length), np.int32)
    mask[1, 6:] = 0
    ids = ids * mask
    types = np.zeros((batch, seq_length), np.int32)
    types[0, seq_length // 2:] = 1
    types[1, 3:6] = 1
    positions = np.stack([np.sort(rng.choice(np.arange(1, 6), num_predictions, replace=False))
                          for _ in range(batch)]).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
            "masked_lm_positions": positions}


def _layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def bert_reference(arrays, features, num_attention_heads, num_hidden_layers, eps=1e-12,
                   activation=gelu_tanh):
    """The original BERT forward pass in float64; returns a dict of numpy outputs.

    Returns:
      sequence_output [B, S, H], pooled_output [B, H], and where the heads exist
      mlm_log_probs [B, P, V] and nsp_logits [B, 2].
    """
    w = {k: np.asarray(v, np.float64) for k, v in arrays.items()}
    ids, mask, types = (features["input_word_ids"], features["input_mask"],
                        features["input_type_ids"])
    batch, seq_length = ids.shape
    hidden = w["bert/embeddings/word_embeddings"].shape[1]
    heads, head_size = num_attention_heads, hidden // num_attention_heads

    x = (w["bert/embeddings/word_embeddings"][ids]
         + w["bert/embeddings/token_type_embeddings"][types]
         + w["bert/embeddings/position_embeddings"][:seq_length][None])
    x = _layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"],
                    eps)
    adder = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0

    def dense(prefix, t):
        return t @ w[prefix + "/kernel"] + w[prefix + "/bias"]

    def split(t):
        return t.reshape(batch, seq_length, heads, head_size).transpose(0, 2, 1, 3)

    for i in range(num_hidden_layers):
        p = f"bert/encoder/layer_{i}/"
        q = split(dense(p + "attention/self/query", x))
        k = split(dense(p + "attention/self/key", x))
        v = split(dense(p + "attention/self/value", x))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head_size) + adder
        context = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, seq_length, hidden)
        attention = _layer_norm(dense(p + "attention/output/dense", context) + x,
                                w[p + "attention/output/LayerNorm/gamma"],
                                w[p + "attention/output/LayerNorm/beta"], eps)
        inner = activation(dense(p + "intermediate/dense", attention))
        x = _layer_norm(dense(p + "output/dense", inner) + attention,
                        w[p + "output/LayerNorm/gamma"], w[p + "output/LayerNorm/beta"], eps)
    outputs = {"sequence_output": x,
               "pooled_output": np.tanh(dense("bert/pooler/dense", x[:, 0]))}
    if "cls/predictions/output_bias" in w:
        gathered = np.take_along_axis(x, features["masked_lm_positions"][:, :, None], axis=1)
        t = activation(dense("cls/predictions/transform/dense", gathered))
        t = _layer_norm(t, w["cls/predictions/transform/LayerNorm/gamma"],
                        w["cls/predictions/transform/LayerNorm/beta"], eps)
        logits = t @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
        outputs["mlm_log_probs"] = log_softmax(logits)
    if "cls/seq_relationship/output_weights" in w:
        outputs["nsp_logits"] = (outputs["pooled_output"]
                                 @ w["cls/seq_relationship/output_weights"].T
                                 + w["cls/seq_relationship/output_bias"])
    return outputs


def bert_tf_outputs(model, features):
    """The same outputs from a bert_tf BertPretrainer (or BertEncoder), as numpy."""
    encoder = getattr(model, "encoder", model)
    encoded = encoder({k: features[k] for k in ("input_word_ids", "input_mask",
                                                "input_type_ids")})
    outputs = {"sequence_output": np.asarray(encoded["sequence_output"]),
               "pooled_output": np.asarray(encoded["pooled_output"])}
    if encoder is not model:
        heads = model(features)
        outputs["mlm_log_probs"] = np.asarray(tf.nn.log_softmax(heads["mlm_logits"]))
        if "nsp_logits" in heads:
            outputs["nsp_logits"] = np.asarray(heads["nsp_logits"])
    return outputs
