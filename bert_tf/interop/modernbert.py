"""Hugging Face ModernBERT checkpoints (config.json + model.safetensors), in and out.

A ModernBERT directory loads into the modern encoder (ModernBertEncoder of a ModernBertConfig;
see bert_tf.config) under the BERT-scheme names of `weights.model_variables`:

  [model.]embeddings.tok_embeddings.weight   bert/embeddings/word_embeddings
  [model.]embeddings.norm.weight             bert/embeddings/LayerNorm/gamma
  [model.]layers.N.attn_norm.weight          bert/encoder/layer_N/attention/LayerNorm/gamma
  [model.]layers.N.attn.Wqkv.weight          bert/encoder/layer_N/attention/self/qkv/kernel (T)
  [model.]layers.N.attn.Wo.weight            bert/encoder/layer_N/attention/output/dense/kernel
  [model.]layers.N.mlp_norm.weight           bert/encoder/layer_N/mlp/LayerNorm/gamma
  [model.]layers.N.mlp.Wi.weight             bert/encoder/layer_N/mlp/wi/kernel (T)
  [model.]layers.N.mlp.Wo.weight             bert/encoder/layer_N/mlp/wo/kernel (T)
  [model.]final_norm.weight                  bert/encoder/final_layer_norm/gamma
  head.dense / head.norm                     cls/predictions/transform/{dense,LayerNorm}
                                             (ModernBertForMaskedLM), or bert/pooler/{dense,
                                             LayerNorm} (ModernBertForSequenceClassification)
  decoder.bias                               cls/predictions/output_bias (decoder.weight is
                                             tied to the word embeddings)
  classifier.weight / .bias                  output_weights / output_bias

(T): PyTorch Linear weights are [out, in], transposed. Biases (`.bias`) appear where the config
has attention_bias / mlp_bias / norm_bias.
"""

import re

from bert_tf.config import ConfigError, ModernBertConfig
from bert_tf.interop import weights
from bert_tf.interop.weights import InteropError

MODEL_TYPE = "modernbert"

# Hugging Face activation names -> bert_tf's (a Hugging Face "gelu" is the exact erf form).
_ACTIVATIONS_FROM_HF = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                        "relu": "relu", "silu": "silu", "swish": "swish", "tanh": "tanh"}
_ACTIVATIONS_TO_HF = {"gelu_exact": "gelu", "gelu": "gelu_pytorch_tanh",
                      "gelu_new": "gelu_pytorch_tanh", "relu": "relu", "silu": "silu",
                      "swish": "swish", "tanh": "tanh"}

MASKED_LM = "ModernBertForMaskedLM"
SEQUENCE_CLASSIFICATION = "ModernBertForSequenceClassification"
_HEAD_KINDS = {MASKED_LM: weights.PRETRAINING,
               SEQUENCE_CLASSIFICATION: weights.CLASSIFICATION}
TIED_DECODER_WEIGHT = "decoder.weight"

# Within a block: Hugging Face name -> bert_tf name (under bert/encoder/layer_N/).
_BLOCK_NAMES = {
    "attn_norm.weight": "attention/LayerNorm/gamma",
    "attn_norm.bias": "attention/LayerNorm/beta",
    "attn.Wqkv.weight": "attention/self/qkv/kernel",
    "attn.Wqkv.bias": "attention/self/qkv/bias",
    "attn.Wo.weight": "attention/output/dense/kernel",
    "attn.Wo.bias": "attention/output/dense/bias",
    "mlp_norm.weight": "mlp/LayerNorm/gamma",
    "mlp_norm.bias": "mlp/LayerNorm/beta",
    "mlp.Wi.weight": "mlp/wi/kernel",
    "mlp.Wi.bias": "mlp/wi/bias",
    "mlp.Wo.weight": "mlp/wo/kernel",
    "mlp.Wo.bias": "mlp/wo/bias",
}
_ENCODER_NAMES = {
    "embeddings.tok_embeddings.weight": "bert/embeddings/word_embeddings",
    "embeddings.norm.weight": "bert/embeddings/LayerNorm/gamma",
    "embeddings.norm.bias": "bert/embeddings/LayerNorm/beta",
    "final_norm.weight": "bert/encoder/final_layer_norm/gamma",
    "final_norm.bias": "bert/encoder/final_layer_norm/beta",
}
_HEAD_SCOPES = {weights.PRETRAINING: "cls/predictions/transform/",
                weights.CLASSIFICATION: "bert/pooler/"}
_HEAD_NAMES = {"head.dense.weight": "dense/kernel", "head.dense.bias": "dense/bias",
               "head.norm.weight": "LayerNorm/gamma", "head.norm.bias": "LayerNorm/beta"}
_TOP_NAMES = {"decoder.bias": "cls/predictions/output_bias",
              "classifier.weight": "output_weights", "classifier.bias": "output_bias"}
_PUBLISHED_TOKEN_IDS = {"pad_token_id": 50283, "bos_token_id": 50281, "cls_token_id": 50281,
                        "eos_token_id": 50282, "sep_token_id": 50282}
_LAYER_KEY = re.compile(r"layers\.(\d+)\.(.+)")


def is_modernbert(values):
    """True when a config.json dict describes a ModernBERT model."""
    return values.get("model_type") == MODEL_TYPE


def _layer_types(values, layers):
    """ModernBERT's per-layer attention: layer_types, or the older global_attn_every_n_layers."""
    types = values.get("layer_types")
    if types:
        return list(types)
    every = values.get("global_attn_every_n_layers", 3)
    return ["full_attention" if i % every == 0 else "sliding_attention" for i in range(layers)]


def _rope_theta(values, kind, old_name, default):
    rope = (values.get("rope_parameters") or {}).get(kind) or {}
    rope_type = rope.get("rope_type", "default")
    if rope_type != "default":
        raise InteropError(f"rope_parameters[{kind!r}].rope_type={rope_type!r} is not "
                           "supported; bert_tf implements the default rotary embedding")
    return float(rope.get("rope_theta", values.get(old_name, default)))


def config_from_hf(values, source="config.json"):
    """The ModernBertConfig of a ModernBERT config.json dict.

    Raises:
      InteropError: options bert_tf does not express (a layer pattern that is not "global
        every N", differing biases or activations of the blocks and the heads, no decoder bias),
        naming the field.
    """
    def fail(message):
        raise InteropError(f"{source}: {message}")

    layers = values.get("num_hidden_layers", 22)
    types = _layer_types(values, layers)
    if len(types) != layers:
        fail(f"num_hidden_layers={layers} but layer_types lists {len(types)} layers; the two "
             "must agree (the weights hold one block per layer)")
    globals_at = [i for i, t in enumerate(types) if t == "full_attention"]
    every = globals_at[1] - globals_at[0] if len(globals_at) > 1 else max(layers, 1)
    expected = ["full_attention" if i % every == 0 else "sliding_attention"
                for i in range(layers)]
    if types != expected or (globals_at and globals_at[0] != 0):
        fail(f"layer_types={types} is not a global layer every N layers from layer 0")
    biases = {name: bool(values.get(name, False))
              for name in ("attention_bias", "mlp_bias", "classifier_bias")}
    if len(set(biases.values())) > 1:
        fail(f"attention_bias, mlp_bias and classifier_bias differ ({biases}); bert_tf's "
             "use_bias sets all three")
    activation = values.get("hidden_activation", "gelu")
    if activation not in _ACTIVATIONS_FROM_HF:
        fail(f"hidden_activation={activation!r} is not one of {', '.join(_ACTIVATIONS_FROM_HF)}")
    head_activation = values.get("classifier_activation", activation)
    if head_activation != activation:
        fail(f"classifier_activation={head_activation!r} differs from hidden_activation="
             f"{activation!r}; bert_tf's heads use hidden_act")
    if not values.get("decoder_bias", True):
        fail("decoder_bias=false; bert_tf's masked-LM head always has an output bias")
    hidden_dropout = values.get("mlp_dropout", 0.0)
    fields = dict(
        vocab_size=values.get("vocab_size", 50368),
        hidden_size=values.get("hidden_size", 768),
        num_hidden_layers=layers,
        num_attention_heads=values.get("num_attention_heads", 12),
        intermediate_size=values.get("intermediate_size", 1152),
        hidden_act=_ACTIVATIONS_FROM_HF[activation],
        hidden_dropout_prob=float(hidden_dropout),
        attention_probs_dropout_prob=float(values.get("attention_dropout", 0.0)),
        max_position_embeddings=values.get("max_position_embeddings", 8192),
        type_vocab_size=0,
        initializer_range=values.get("initializer_range", 0.02),
        layer_norm_eps=values.get("norm_eps", 1e-5),
        position_embedding_type="rotary",
        norm_placement="pre",
        feed_forward_type="gated",
        use_bias=biases["attention_bias"],
        norm_bias=bool(values.get("norm_bias", False)),
        final_layer_norm=True,
        local_attention_window=(values.get("local_attention", 128)
                                if "sliding_attention" in types else 0),
        global_attn_every_n_layers=every if "sliding_attention" in types else 1,
        global_rope_theta=_rope_theta(values, "full_attention", "global_rope_theta", 160000.0),
        local_rope_theta=_rope_theta(values, "sliding_attention", "local_rope_theta", 10000.0),
        pooler_type="head",
        classifier_pooling=values.get("classifier_pooling", "cls"),
    )
    try:
        return ModernBertConfig.from_dict(fields, source=source)
    except ConfigError as e:
        raise InteropError(str(e)) from None


def hf_config_from_bert(config, architecture, num_labels=None):
    """The fields of a ModernBERT config.json for a modern bert_tf config.

    Raises:
      InteropError: options ModernBERT does not have (post-norm, a dense feed-forward,
        absolute positions, segment embeddings, the tanh pooler).
    """
    expected = dict(position_embedding_type="rotary", norm_placement="pre",
                    feed_forward_type="gated", final_layer_norm=True, pooler_type="head",
                    type_vocab_size=0)
    for field, value in expected.items():
        if getattr(config, field) != value:
            raise InteropError(f"the model's config has {field}={getattr(config, field)!r}; "
                               f"ModernBERT checkpoints have {field}={value!r}")
    activation = _ACTIVATIONS_TO_HF[config.hidden_act]
    local = config.local_attention_window
    values = {
        "architectures": [architecture],
        "model_type": MODEL_TYPE,
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "hidden_activation": activation,
        "classifier_activation": activation,
        "max_position_embeddings": config.max_position_embeddings,
        "initializer_range": config.initializer_range,
        "norm_eps": config.layer_norm_eps,
        "norm_bias": config.norm_bias,
        "attention_bias": config.use_bias,
        "mlp_bias": config.use_bias,
        "classifier_bias": config.use_bias,
        "decoder_bias": True,
        "attention_dropout": config.attention_probs_dropout_prob,
        "mlp_dropout": config.hidden_dropout_prob,
        "embedding_dropout": config.hidden_dropout_prob,
        "classifier_dropout": 0.0,
        "classifier_pooling": config.classifier_pooling,
        "local_attention": local if local else config.max_position_embeddings * 2,
        "layer_types": ["full_attention" if config.layer_is_global(i) else "sliding_attention"
                        for i in range(config.num_hidden_layers)],
        "global_attn_every_n_layers": config.global_attn_every_n_layers,
        "global_rope_theta": config.global_rope_theta,
        "local_rope_theta": config.local_rope_theta,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": config.global_rope_theta},
            "sliding_attention": {"rope_type": "default",
                                  "rope_theta": config.local_rope_theta}},
        "tie_word_embeddings": True,
    }
    # The published tokenizer's special ids where the vocabulary holds them (the config does
    # not record them; they only set torch's padding_idx and generation defaults).
    for name, token_id in _PUBLISHED_TOKEN_IDS.items():
        values[name] = token_id if token_id < config.vocab_size else None
    if num_labels is not None:
        values["num_labels"] = num_labels
        values["id2label"] = {str(i): f"LABEL_{i}" for i in range(num_labels)}
        values["label2id"] = {f"LABEL_{i}": i for i in range(num_labels)}
    return values


def head_kind_of(values):
    """The kind of head `architectures` names (PRETRAINING, CLASSIFICATION), else None."""
    kinds = {_HEAD_KINDS[a] for a in values.get("architectures") or [] if a in _HEAD_KINDS}
    return kinds.pop() if len(kinds) == 1 else None


def bert_tf_name(key, head_kind):
    """The bert_tf name of a ModernBERT tensor name and whether it is transposed; (None, False)
    for names with no meaning here (buffers, heads of another kind)."""
    name = key[len("model."):] if key.startswith("model.") else key
    if name in _ENCODER_NAMES:
        out = _ENCODER_NAMES[name]
    elif (match := _LAYER_KEY.fullmatch(name)) and match.group(2) in _BLOCK_NAMES:
        out = f"bert/encoder/layer_{match.group(1)}/{_BLOCK_NAMES[match.group(2)]}"
    elif key in _HEAD_NAMES and head_kind in _HEAD_SCOPES:
        out = _HEAD_SCOPES[head_kind] + _HEAD_NAMES[key]
    elif key in _TOP_NAMES:
        out = _TOP_NAMES[key]
    else:
        return None, False
    return out, out.endswith("/kernel")


def hf_key(name, head_kind, prefix):
    """The ModernBERT tensor name of a bert_tf name (inverse of bert_tf_name) and whether it is
    transposed; `prefix` is "model." in task models, "" in a ModernBertModel."""
    for table, scoped in ((_ENCODER_NAMES, True), (_TOP_NAMES, False)):
        for key, value in table.items():
            if value == name:
                return (prefix if scoped else "") + key, False
    match = re.fullmatch(r"bert/encoder/layer_(\d+)/(.+)", name)
    if match:
        for key, value in _BLOCK_NAMES.items():
            if value == match.group(2):
                return f"{prefix}layers.{match.group(1)}.{key}", value.endswith("/kernel")
    scope = _HEAD_SCOPES.get(head_kind)
    if scope and name.startswith(scope):
        for key, value in _HEAD_NAMES.items():
            if scope + value == name:
                return key, value.endswith("/kernel")
    raise InteropError(f"{name} has no ModernBERT name")
