"""Hugging Face BERT checkpoints (config.json + model.safetensors + vocab.txt), in and out.

Weights are read and written with the `safetensors` package only: a `pytorch_model.bin` is a
pickle, which can run arbitrary code when loaded, so it is refused unless the caller opts in
(and then read with `torch.load(weights_only=True)`).

Names map rule by rule to the original TF1 names (see bert_tf.interop.weights):
`bert.encoder.layer.3.attention.self.query.weight` is `bert/encoder/layer_3/attention/self/
query/kernel` transposed (PyTorch Linear weights are [out, in]); embeddings drop `.weight`;
LayerNorm `weight`/`bias` (or the older `gamma`/`beta`) are `gamma`/`beta`. The `bert.` prefix
is optional (a saved BertModel has none). The MLM decoder is tied to the word embeddings.

ELECTRA (model_type "electra") uses BERT's names under `electra.` with two differences: no
pooler, and factorized embeddings projected by `electra.embeddings_project` (bert_tf's
embedding_projection). An ElectraPretrainer is written as ElectraForPreTraining, its
discriminator only (`discriminator_predictions.{dense,dense_prediction}`: ELECTRA's
`discriminator_predictions/{dense,dense_1}`); an ELECTRA directory reads as a BertEncoder (with
the discriminator head, loadable into an ElectraPretrainer).

Activations: in a Hugging Face config "gelu" is the exact erf GELU (bert_tf's "gelu_exact"),
while "gelu_new" and "gelu_pytorch_tanh" are the tanh approximation (bert_tf's and the original
BERT's "gelu").
"""

import atexit
import functools
import json
import os
import re
import shutil
import tempfile

import numpy as np

from bert_tf import file_names, fileio, model_directory
from bert_tf.config import REQUIRED_FILE_FIELDS, BertConfig, ConfigError
from bert_tf.fileio import write_bytes_atomic, write_text_atomic
from bert_tf.interop import modernbert, weights
from bert_tf.interop.weights import InteropError
from bert_tf.serving.task_info import label_names_problem
from bert_tf.text import bpe, tokenization, tokenizer_files
from bert_tf.text.tokenizer_files import copy_vocab
from bert_tf.modeling import (BertClassifier, BertPretrainer, BertSpanLabeler,
                              BertTokenClassifier, ElectraPretrainer, Encoder, build_encoder)

# The names model_directory tells a Hugging Face directory by.
CONFIG_FILE = model_directory.HF_CONFIG_FILE
SAFETENSORS_FILE = model_directory.SAFETENSORS_FILE
SAFETENSORS_INDEX_FILE = model_directory.SAFETENSORS_INDEX_FILE
PICKLE_FILE = model_directory.PICKLE_FILE
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# config.json's problem_type of a classifier with a sigmoid per label.
MULTI_LABEL_PROBLEM = "multi_label_classification"
# A Hugging Face directory's tokenizer files carry the names bert_tf's model directories use.
VOCAB_FILE = file_names.VOCAB_FILE
# A byte-level BPE vocabulary (ModernBERT); its reader is bert_tf.text's BPE tokenizer.
TOKENIZER_JSON_FILE = file_names.TOKENIZER_FILE

# Hugging Face hidden_act -> bert_tf hidden_act.
_ACTIVATIONS_FROM_HF = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "silu": "silu",
    "swish": "swish",
}
_ACTIVATIONS_TO_HF = {
    "gelu": "gelu_new",
    "gelu_new": "gelu_new",
    "gelu_exact": "gelu",
    "relu": "relu",
    "tanh": "tanh",
    "silu": "silu",
    "swish": "swish",
}

# Head names that do not follow the rules of `hf_name`.
_HEAD_NAMES = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
    "output_weights": "classifier.weight",
    "output_bias": "classifier.bias",
    "cls/squad/output_weights": "qa_outputs.weight",
    "cls/squad/output_bias": "qa_outputs.bias",
}
_HEAD_NAMES_FROM_HF = {hf: tf1 for tf1, hf in _HEAD_NAMES.items()}
_ENCODER_PARTS = ("embeddings", "encoder", "pooler")
_TIED_DECODER_WEIGHT = "cls.predictions.decoder.weight"
_TIED_DECODER_BIAS = "cls.predictions.decoder.bias"

ELECTRA_MODEL_TYPE = "electra"
ELECTRA_PRETRAINING = "ElectraForPreTraining"
_ELECTRA_PREFIX = "electra."
# ELECTRA names that BERT's rules do not give: bert_tf name -> (key, transposed, under the
# `electra.` prefix).
_ELECTRA_NAMES = {
    weights.EMBEDDING_PROJECTION + "/kernel": ("embeddings_project.weight", True, True),
    weights.EMBEDDING_PROJECTION + "/bias": ("embeddings_project.bias", False, True),
    "discriminator_predictions/dense/kernel": ("discriminator_predictions.dense.weight", True,
                                               False),
    "discriminator_predictions/dense/bias": ("discriminator_predictions.dense.bias", False,
                                             False),
    "discriminator_predictions/dense_1/kernel": (
        "discriminator_predictions.dense_prediction.weight", True, False),
    "discriminator_predictions/dense_1/bias": (
        "discriminator_predictions.dense_prediction.bias", False, False),
}
_ELECTRA_NAMES_FROM_HF = {key: (name, transposed)
                          for name, (key, transposed, _) in _ELECTRA_NAMES.items()}

# Hugging Face architectures -> the kind of head (see bert_tf.interop.weights).
_HEAD_KINDS = {
    "BertForPreTraining": weights.PRETRAINING,
    "BertForMaskedLM": weights.PRETRAINING,
    "BertForSequenceClassification": weights.CLASSIFICATION,
    "BertForTokenClassification": weights.TOKEN_CLASSIFICATION,
    "BertForQuestionAnswering": weights.SPAN,
    ELECTRA_PRETRAINING: weights.REPLACED_TOKEN_DETECTION,
}


def hf_name(name, prefix="bert.", layer_norm_names=("weight", "bias")):
    """The Hugging Face name of an original TF1 name, and whether the tensor is transposed.

    Args:
      name: e.g. "bert/encoder/layer_0/attention/self/query/kernel".
      prefix: put before encoder names ("bert." in task models, "" in a saved BertModel).
      layer_norm_names: the names of LayerNorm gamma and beta (("gamma", "beta") in old files).

    Returns:
      (hf name, transposed): ("bert.encoder.layer.0.attention.self.query.weight", True).
    """
    if name in _HEAD_NAMES:
        return _HEAD_NAMES[name], False
    parts = name.split("/")
    start = ""
    if parts[0] == "bert":
        parts, start = parts[1:], prefix
    out = []
    for part in parts:
        layer = re.fullmatch(r"layer_(\d+)", part)
        out.extend(["layer", layer.group(1)] if layer else [part])
    transposed = False
    if out[-1] == "kernel":
        out[-1], transposed = "weight", True
    elif out[-1] == "gamma":
        out[-1] = layer_norm_names[0]
    elif out[-1] == "beta":
        out[-1] = layer_norm_names[1]
    elif out[-1].endswith("_embeddings"):
        out.append("weight")
    return start + ".".join(out), transposed


def electra_hf_name(name, prefix=_ELECTRA_PREFIX):
    """hf_name for ELECTRA's layout: (Hugging Face name, transposed) of a bert_tf name."""
    if name in _ELECTRA_NAMES:
        key, transposed, prefixed = _ELECTRA_NAMES[name]
        return (prefix if prefixed else "") + key, transposed
    return hf_name(name, prefix)


def electra_tf1_name(key):
    """tf1_name for ELECTRA's layout (`electra.` prefix optional); (None, False) for names with
    no bert_tf meaning (other heads, buffers)."""
    if key.startswith(_ELECTRA_PREFIX):
        key = key[len(_ELECTRA_PREFIX):]
    if key in _ELECTRA_NAMES_FROM_HF:
        return _ELECTRA_NAMES_FROM_HF[key]
    if key.split(".")[0] not in _ENCODER_PARTS:
        return None, False
    return tf1_name(key)


def tf1_name(key):
    """The original TF1 name of a Hugging Face tensor name, and whether it is transposed.

    Returns (None, False) for names with no BERT meaning (buffers such as position_ids, other
    heads).
    """
    if key in _HEAD_NAMES_FROM_HF:
        return _HEAD_NAMES_FROM_HF[key], False
    parts = key.split(".")
    if parts[0] == "bert":
        parts = parts[1:]
    if not parts or parts[0] not in _ENCODER_PARTS + ("cls",):
        return None, False
    out = ["bert"] if parts[0] in _ENCODER_PARTS else []
    i = 0
    while i < len(parts):
        if parts[i] == "layer" and i + 1 < len(parts) and parts[i + 1].isdigit():
            out.append(f"layer_{parts[i + 1]}")
            i += 2
            continue
        out.append(parts[i])
        i += 1
    last, owner = out[-1], out[-2] if len(out) > 1 else ""
    transposed = False
    if owner == "LayerNorm":
        renames = {"weight": "gamma", "bias": "beta", "gamma": "gamma", "beta": "beta"}
        if last not in renames:
            return None, False
        out[-1] = renames[last]
    elif owner.endswith("_embeddings") and last == "weight":
        out.pop()
    elif last == "weight":
        out[-1], transposed = "kernel", True
    elif last != "bias":
        return None, False
    return "/".join(out), transposed


def bert_config_from_hf(values, source=CONFIG_FILE):
    """A BertConfig from the fields of a Hugging Face BERT (or ELECTRA) config.json.

    Raises:
      InteropError: not a BERT or ELECTRA config (model_type), relative position embeddings,
        or an activation bert_tf does not implement.
    """
    model_type = values.get("model_type", "bert")
    if model_type not in ("bert", ELECTRA_MODEL_TYPE):
        raise InteropError(f"{source}: model_type={model_type!r} is not a model type bert_tf "
                           f"reads from Hugging Face; expected 'bert', '{ELECTRA_MODEL_TYPE}' "
                           f"or '{modernbert.MODEL_TYPE}'")
    position_type = values.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise InteropError(f"{source}: position_embedding_type={position_type!r} is not "
                           "supported; bert_tf has absolute position embeddings only")
    hidden_act = values.get("hidden_act", "gelu")
    if hidden_act not in _ACTIVATIONS_FROM_HF:
        raise InteropError(
            f"{source}: hidden_act={hidden_act!r} has no bert_tf equivalent; expected one of "
            f"gelu (exact erf), gelu_new or gelu_pytorch_tanh (tanh approximation), relu, tanh, "
            "silu, swish")
    fields = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
              "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
              "max_position_embeddings", "type_vocab_size", "initializer_range",
              "layer_norm_eps")
    # As for bert_config.json: a missing shape field would build BERT-base's shape silently.
    missing = [name for name in REQUIRED_FILE_FIELDS + ("max_position_embeddings",)
               if name not in values]
    if missing:
        raise InteropError(f"{source}: required field(s) {', '.join(missing)} missing (a "
                           "Hugging Face config.json saved by transformers gives every field; "
                           "bert_tf fills in no model shape)")
    config = {name: values[name] for name in fields if name in values}
    config["hidden_act"] = _ACTIVATIONS_FROM_HF[hidden_act]
    if model_type == ELECTRA_MODEL_TYPE and values.get("embedding_size") not in (
            None, values["hidden_size"]):
        config["embedding_size"] = values["embedding_size"]
    try:
        return BertConfig.from_dict(config, source=source)
    except ConfigError as e:
        raise InteropError(str(e)) from None


def hf_config_from_bert(config, architecture, num_labels=None, regression=False,
                        multi_label=False):
    """The fields of a Hugging Face config.json for a bert_tf config.

    Args:
      config: BertConfig.
      architecture: the transformers class, e.g. "BertForPreTraining".
      num_labels: classes of a classification or tagging head.
      regression: the head is a 1-output regression (problem_type "regression").
      multi_label: a sigmoid per label (problem_type "multi_label_classification").
    """
    values = {
        "architectures": [architecture],
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "classifier_dropout": None,
        "hidden_act": _ACTIVATIONS_TO_HF[config.hidden_act],
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "hidden_size": config.hidden_size,
        "initializer_range": config.initializer_range,
        "intermediate_size": config.intermediate_size,
        "layer_norm_eps": config.layer_norm_eps,
        "max_position_embeddings": config.max_position_embeddings,
        "model_type": "bert",
        "num_attention_heads": config.num_attention_heads,
        "num_hidden_layers": config.num_hidden_layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
        "type_vocab_size": config.type_vocab_size,
        "use_cache": True,
        "vocab_size": config.vocab_size,
    }
    if num_labels is not None:
        values["id2label"] = {str(i): f"LABEL_{i}" for i in range(num_labels)}
        values["label2id"] = {f"LABEL_{i}": i for i in range(num_labels)}
    if regression:
        values["problem_type"] = "regression"
    if multi_label:
        values["problem_type"] = MULTI_LABEL_PROBLEM
    if architecture.startswith("Electra"):
        values.update(model_type=ELECTRA_MODEL_TYPE, embedding_size=config.embedding_width)
    return values


def read_config(model_dir):
    """(BertConfig or ModernBertConfig, raw config.json dict) of a Hugging Face model
    directory."""
    path = os.path.join(model_dir, CONFIG_FILE)
    try:
        with fileio.open_file(path) as f:
            values = json.load(f)
    except FileNotFoundError:
        raise InteropError(f"{model_dir}: no {CONFIG_FILE} (expected a Hugging Face model "
                           "directory)") from None
    except json.JSONDecodeError as e:
        raise InteropError(f"{path}: not valid JSON ({e})") from None
    if modernbert.is_modernbert(values):
        return modernbert.config_from_hf(values, source=path), values
    return bert_config_from_hf(values, source=path), values


def do_lower_case_of(model_dir):
    """The tokenizer's `do_lower_case` from tokenizer_config.json, or None when it is not said."""
    path = os.path.join(model_dir, TOKENIZER_CONFIG_FILE)
    if not fileio.exists(path):
        return None
    with fileio.open_file(path) as f:
        value = json.load(f).get("do_lower_case")
    return value if isinstance(value, bool) else None


def _weight_files(model_dir, allow_pickle):
    """[(path, kind)] of the weight files, kind "safetensors" or "pickle"."""
    single = os.path.join(model_dir, SAFETENSORS_FILE)
    if fileio.exists(single):
        return [(single, "safetensors")]
    index = os.path.join(model_dir, SAFETENSORS_INDEX_FILE)
    if fileio.exists(index):
        with fileio.open_file(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        return [(os.path.join(model_dir, shard), "safetensors") for shard in shards]
    pickle = os.path.join(model_dir, PICKLE_FILE)
    if fileio.exists(pickle):
        if not allow_pickle:
            raise InteropError(
                f"{pickle}: a PyTorch pickle; loading a pickle can run arbitrary code, so "
                f"bert_tf reads {SAFETENSORS_FILE} only. Re-save the model with safetensors, or "
                "opt in with allow_pickle=True (--allow_pickle) and torch installed to read it "
                "with torch.load(weights_only=True)")
        return [(pickle, "pickle")]
    raise InteropError(f"{model_dir}: no {SAFETENSORS_FILE}, {SAFETENSORS_INDEX_FILE} or "
                       f"{PICKLE_FILE}")


def check_weight_files(model_dir, allow_pickle=False):
    """Opens the headers of a local Hugging Face directory's safetensors files, so that a
    truncated or corrupt file is reported before a run starts (remote files are read once, at
    loading). Raises InteropError naming the file."""
    for path, kind in _weight_files(model_dir, allow_pickle):
        if kind == "safetensors" and not fileio.is_remote(path):
            _open_safetensors(path)


def _local_copy(path):
    """A local copy of a remote file, removed at exit: safetensors and torch read local files."""
    directory = tempfile.mkdtemp(prefix="bert_tf_safetensors_")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    local = os.path.join(directory, os.path.basename(path))
    fileio.gfile().copy(path, local)
    return local


def _open_safetensors(path):
    """name -> (shape, read) for one safetensors file, read lazily as float32 numpy."""
    from safetensors import SafetensorError, safe_open

    named = path
    if fileio.is_remote(path):
        path = _local_copy(path)
    tensors = {}
    try:
        with safe_open(path, framework="numpy") as f:
            for key in f.keys():
                info = f.get_slice(key)
                tensors[key] = (tuple(info.get_shape()), info.get_dtype())
    except SafetensorError as e:
        raise InteropError(f"{named}: not a readable safetensors file ({e}); it is truncated or "
                           "corrupt (an interrupted download or copy?): fetch it again") from None

    def reader(key, dtype):
        def read():
            if dtype == "BF16":
                return _read_bfloat16(path, key)
            with safe_open(path, framework="numpy") as f:
                return np.asarray(f.get_tensor(key), dtype=np.float32)
        return read

    return {key: (shape, reader(key, dtype)) for key, (shape, dtype) in tensors.items()}


def _read_bfloat16(path, key):
    """Reads a BF16 tensor as float32 (numpy has no bfloat16; ml_dtypes, a TF dependency, does)."""
    import ml_dtypes

    with fileio.open_file(path, "rb") as f:
        header_size = int.from_bytes(f.read(8), "little")
        entry = json.loads(f.read(header_size))[key]
        start, end = entry["data_offsets"]
        f.seek(8 + header_size + start)
        data = f.read(end - start)
    value = np.frombuffer(data, dtype=ml_dtypes.bfloat16).reshape(entry["shape"])
    return value.astype(np.float32)


def _open_pickle(path):
    try:
        import torch
    except ImportError:
        raise InteropError(f"{path}: allow_pickle=True needs PyTorch to read the file "
                           f"(pip install torch), or convert it to {SAFETENSORS_FILE}") from None
    state = torch.load(_local_copy(path) if fileio.is_remote(path) else path, map_location="cpu",
                       weights_only=True)
    return {key: (tuple(value.shape), lambda v=value: v.float().numpy())
            for key, value in state.items()}


def read_huggingface(model_dir, allow_pickle=False):
    """Opens a Hugging Face BERT directory as a WeightSource (tensors are read on demand).

    Args:
      model_dir: a directory with config.json and model.safetensors (or a sharded
        model.safetensors.index.json, or with allow_pickle a pytorch_model.bin).
      allow_pickle: read a pytorch_model.bin with torch.load(weights_only=True).

    Returns:
      WeightSource with `config` (a BertConfig or ModernBertConfig) and `head_kind` (from
      `architectures`).

    Raises:
      InteropError: no weights file, a refused pickle, a config bert_tf cannot express, or an
        MLM decoder that is not tied to the word embeddings.
    """
    config, values = read_config(model_dir)
    raw = {}
    for path, kind in _weight_files(model_dir, allow_pickle):
        raw.update(_open_safetensors(path) if kind == "safetensors" else _open_pickle(path))
    if modernbert.is_modernbert(values):
        return _modernbert_source(model_dir, config, values, raw)
    electra = values.get("model_type") == ELECTRA_MODEL_TYPE
    tensors, unused = {}, []
    for key in sorted(raw):
        if key in (_TIED_DECODER_WEIGHT, _TIED_DECODER_BIAS):
            continue
        name, transposed = electra_tf1_name(key) if electra else tf1_name(key)
        if name is None:
            unused.append(key)
            continue
        shape, read = raw[key]
        tensors[name] = weights.SourceTensor(name=key, shape=shape, transpose=transposed,
                                             read=read)
    _check_tied_decoder(model_dir, raw, tensors)
    if electra:
        prefix = _ELECTRA_PREFIX if any(key.startswith(_ELECTRA_PREFIX) for key in raw) else ""
        native_name = functools.partial(electra_hf_name, prefix=prefix)
    else:
        prefix = "bert." if any(key.startswith("bert.") for key in raw) else ""
        layer_norm_names = (("gamma", "beta") if any(key.endswith("LayerNorm.gamma")
                                                     for key in raw) else ("weight", "bias"))
        native_name = functools.partial(hf_name, prefix=prefix,
                                        layer_norm_names=layer_norm_names)
    return weights.WeightSource(
        description=model_dir, format="huggingface", tensors=tensors, unused=unused,
        config=config, head_kind=_named_head_kind(values), native_name=native_name)


def _named_head_kind(values):
    """The kind of head (weights.*) config.json's `architectures` names, else None."""
    if modernbert.is_modernbert(values):
        return modernbert.head_kind_of(values)
    kinds = {_HEAD_KINDS[a] for a in values.get("architectures") or [] if a in _HEAD_KINDS}
    return kinds.pop() if len(kinds) == 1 else None


def _modernbert_source(model_dir, config, values, raw):
    """The WeightSource of a ModernBERT directory (names: bert_tf.interop.modernbert)."""
    kind = modernbert.head_kind_of(values)
    if kind is None and "decoder.bias" in raw:
        kind = weights.PRETRAINING
    tensors, unused = {}, []
    for key in sorted(raw):
        name, transposed = modernbert.bert_tf_name(key, kind)
        if name is None:
            if key != modernbert.TIED_DECODER_WEIGHT:
                unused.append(key)
            continue
        shape, read = raw[key]
        tensors[name] = weights.SourceTensor(name=key, shape=shape, transpose=transposed,
                                             read=read)
    word_embeddings = tensors.get("bert/embeddings/word_embeddings")
    if modernbert.TIED_DECODER_WEIGHT in raw and word_embeddings is not None:
        if not np.array_equal(raw[modernbert.TIED_DECODER_WEIGHT][1](), word_embeddings.read()):
            raise InteropError(f"{model_dir}: {modernbert.TIED_DECODER_WEIGHT} differs from the "
                               "word embeddings; bert_tf ties the MLM decoder to them, as "
                               "ModernBERT does")
    prefix = "model." if any(key.startswith("model.") for key in raw) else ""
    return weights.WeightSource(
        description=model_dir, format="huggingface", tensors=tensors, unused=unused,
        config=config, head_kind=kind,
        native_name=lambda name: modernbert.hf_key(name, kind, prefix))


def _check_tied_decoder(model_dir, raw, tensors):
    """The MLM decoder must be the word embeddings (and its bias the MLM bias) as in BERT."""
    if _TIED_DECODER_WEIGHT in raw and "bert/embeddings/word_embeddings" in tensors:
        decoder = raw[_TIED_DECODER_WEIGHT][1]()
        if not np.array_equal(decoder, tensors["bert/embeddings/word_embeddings"].read()):
            raise InteropError(f"{model_dir}: {_TIED_DECODER_WEIGHT} differs from the word "
                               "embeddings; bert_tf ties the MLM decoder to them, as BERT does")
    if _TIED_DECODER_BIAS in raw:
        shape, read = raw[_TIED_DECODER_BIAS]
        if "cls/predictions/output_bias" not in tensors:
            tensors["cls/predictions/output_bias"] = weights.SourceTensor(
                name=_TIED_DECODER_BIAS, shape=shape, transpose=False, read=read)
        elif not np.array_equal(read(), tensors["cls/predictions/output_bias"].read()):
            raise InteropError(f"{model_dir}: {_TIED_DECODER_BIAS} differs from "
                               "cls.predictions.bias; bert_tf has one MLM output bias")


def load_huggingface(model_dir, allow_pickle=False):
    """Builds a bert_tf model from a Hugging Face BERT directory.

    Args:
      model_dir: a directory with config.json, model.safetensors and (usually) vocab.txt.
      allow_pickle: accept a pytorch_model.bin (needs torch; read with weights_only=True).

    Returns:
      (model, config, vocab_file): a BertPretrainer when the checkpoint has the MLM head
      (cls.predictions.*; with NSP when it has cls.seq_relationship.*), else an encoder
      (BertEncoder or ModernBertEncoder; an ELECTRA discriminator's encoder, whose head
      `read_huggingface` gives too); its config; the path of vocab.txt, or None when
      the directory has none. A checkpoint without a pooler (BertForMaskedLM) leaves the
      pooler newly initialised.

    Raises:
      InteropError: see read_huggingface; also a missing weight or a shape that differs from
        config.json (naming the tensor and both shapes).

    Examples:

    >>> model, config, vocab_file = load_huggingface("bert-base-uncased/")  # doctest: +SKIP
    >>> type(model).__name__  # doctest: +SKIP
    'BertPretrainer'
    """
    source = read_huggingface(model_dir, allow_pickle=allow_pickle)
    config = source.config
    encoder = build_encoder(config)
    if any(name.startswith("cls/predictions/") for name in source.tensors):
        has_nsp = any(name.startswith("cls/seq_relationship/") for name in source.tensors)
        # ModernBERT's masked-LM head has no pooler to read (its classifier head is the pooler).
        model = BertPretrainer(encoder, use_next_sentence_label=has_nsp)
    else:
        model = encoder
    weights.transfer(source, model, strict=True, optional_scopes=(weights.POOLER_SCOPE,))
    vocab_file = next((path for path in (os.path.join(model_dir, VOCAB_FILE),
                                         os.path.join(model_dir, file_names.SENTENCEPIECE_FILE))
                       if fileio.exists(path)), None)
    return model, config, vocab_file


def load_huggingface_task(model_dir, allow_pickle=False):
    """A Hugging Face task model with its head and label names: what a fine-tuned checkpoint of
    transformers (e.g. a sentiment classifier) serves with.

    Args:
      model_dir: a Hugging Face directory (config.json, model.safetensors) of a
        BertForSequenceClassification (problem_type regression: one output; multi-label:
        a sigmoid per label), BertForTokenClassification, BertForQuestionAnswering or
        ModernBertForSequenceClassification; any other architecture reads as
        load_huggingface reads it.
      allow_pickle: as load_huggingface.

    Returns:
      (model, task, labels, vocab_file): a BertClassifier, BertTokenClassifier or
      BertSpanLabeler with the checkpoint's head (else load_huggingface's model); the
      task_info.json task it serves ("classification", "multi_label", "regression",
      "tagging", "squad"; else None); config.json's id2label in id order for a classifier or
      tagger (transformers' LABEL_0, ... when it names none), else None; the tokenizer file
      (vocab.txt, spiece.model or tokenizer.json) or None.

    Raises:
      InteropError: as load_huggingface; also an id2label that does not name ids 0..C-1.
    """
    source = read_huggingface(model_dir, allow_pickle=allow_pickle)
    _, values = read_config(model_dir)
    task, labels = _task(values, source.head_kind, os.path.join(model_dir, CONFIG_FILE))
    if task is None:
        model, _, _ = load_huggingface(model_dir, allow_pickle=allow_pickle)
        return model, None, None, tokenizer_files.model_tokenizer_file(model_dir)
    encoder = build_encoder(source.config)
    if task == "squad":
        model = BertSpanLabeler(encoder)
    elif task == "tagging":
        model = BertTokenClassifier(encoder, len(labels))
    else:
        model = BertClassifier(encoder, 1 if labels is None else len(labels),
                               multi_label=task == "multi_label")
    # transformers' token and span heads have no pooler (they do not use one).
    weights.transfer(source, model, strict=True, optional_scopes=(weights.POOLER_SCOPE,))
    return model, task, labels, tokenizer_files.model_tokenizer_file(model_dir)


def task_labels(model_dir):
    """(task, labels) of the head a Hugging Face directory's config.json names, from the file
    alone (no weights read): as load_huggingface_task builds it ("classification",
    "multi_label", "regression", "tagging" or "squad"; labels as it gives them), else (None,
    None)."""
    _, values = read_config(model_dir)
    return _task(values, _named_head_kind(values), os.path.join(model_dir, CONFIG_FILE))


def _task(values, kind, path):
    """(task, labels) of a head of `kind` (weights.*) described by config.json's `values`."""
    if kind == weights.SPAN:
        return "squad", None
    if kind not in (weights.CLASSIFICATION, weights.TOKEN_CLASSIFICATION):
        return None, None
    labels = _id2label(values, path)
    if kind == weights.TOKEN_CLASSIFICATION:
        return "tagging", labels
    if values.get("problem_type") == "regression" or len(labels) == 1:
        return "regression", None
    return ("multi_label" if values.get("problem_type") == MULTI_LABEL_PROBLEM
            else "classification"), labels


def _id2label(values, path):
    """The label names of config.json's id2label (keys "0".."C-1"), in id order; transformers'
    LABEL_i for a config that names none but says num_labels."""
    id2label = values.get("id2label")
    if not id2label:
        count = values.get("num_labels", 2)
        return [f"LABEL_{i}" for i in range(count)]
    if not isinstance(id2label, dict) or sorted(id2label, key=str) != sorted(
            str(i) for i in range(len(id2label))):
        raise InteropError(f"{path}: id2label must map the ids 0..C-1 to label names, got "
                           f"{id2label!r}")
    names = [id2label[str(i)] for i in range(len(id2label))]
    if label_names_problem(names):
        raise InteropError(f"{path}: id2label must name each id with a distinct non-empty "
                           f"string, got {id2label!r}")
    return names


def _layout(model):
    """(architecture, name prefix, keep the pooler, config.json extras) of a bert_tf model."""
    encoder = weights.encoder_of(model)
    if model is encoder:
        return "BertModel", "", True, {}
    if isinstance(model, ElectraPretrainer):
        # The discriminator: ELECTRA has no pooler, and the generator is not written.
        return ELECTRA_PRETRAINING, _ELECTRA_PREFIX, False, {}
    if isinstance(model, BertPretrainer):
        if model.next_sentence is not None:
            return "BertForPreTraining", "bert.", True, {}
        # transformers' BertForMaskedLM has no pooler.
        return "BertForMaskedLM", "bert.", False, {}
    if isinstance(model, BertClassifier):
        return ("BertForSequenceClassification", "bert.", True,
                {"num_labels": model.num_classes, "regression": model.num_classes == 1,
                 "multi_label": model.multi_label})
    if isinstance(model, BertTokenClassifier):
        return "BertForTokenClassification", "bert.", False, {"num_labels": model.num_classes}
    if isinstance(model, BertSpanLabeler):
        return "BertForQuestionAnswering", "bert.", False, {}
    raise InteropError(f"cannot write a {type(model).__name__} in Hugging Face format")


def save_huggingface(model, output_dir, vocab_file=None, do_lower_case=None, labels=None):
    """Writes a bert_tf model as a Hugging Face BERT directory.

    Writes config.json (Hugging Face BertConfig fields, model_type "bert", `architectures`
    naming the matching transformers class), model.safetensors (float32, the MLM decoder tied
    to the word embeddings and so not stored), and vocab.txt and tokenizer_config.json when
    given (for the modern encoder too: a ModernBERT directory with a WordPiece vocabulary).
    Every file is written atomically.

    Args:
      model: BertEncoder (BertModel), BertPretrainer (BertForPreTraining, or BertForMaskedLM
        without NSP), BertClassifier (BertForSequenceClassification), BertTokenClassifier
        (BertForTokenClassification), BertSpanLabeler (BertForQuestionAnswering) or
        ElectraPretrainer (ElectraForPreTraining: the discriminator and its head, model_type
        "electra"; transformers also loads it as ElectraModel and, with a new head,
        ElectraForSequenceClassification).
      output_dir: created if needed.
      vocab_file: copied to output_dir/vocab.txt.
      do_lower_case: written to tokenizer_config.json when not None.
      labels: a classifier's or tagger's class names in logit order (a fine-tuning run's
        task_info.json labels), written as config.json's id2label / label2id; None:
        transformers' LABEL_0, LABEL_1, ...

    Returns:
      output_dir.

    Raises:
      ValueError: labels for a model without classes, or not one distinct name per class.
    """
    from safetensors.numpy import save

    names = _label_names(model, labels)
    if weights.encoder_of(model).config.architecture == "modernbert":
        _save_modernbert(model, output_dir, save, names)
        _write_vocabulary(output_dir, vocab_file, do_lower_case, tokenizer_json=True)
        return output_dir
    electra = isinstance(model, ElectraPretrainer)
    weights.require_plain_bert(model, "Hugging Face ELECTRA" if electra else "Hugging Face BERT",
                               factorized_embeddings=electra)
    architecture, prefix, keep_pooler, extras = _layout(model)
    arrays = weights.model_arrays(model)
    tensors = {}
    for name, value in arrays.items():
        if name.startswith(weights.POOLER_SCOPE) and not keep_pooler:
            continue
        if name.startswith(weights.GENERATOR_SCOPES):
            continue
        key, transposed = electra_hf_name(name, prefix) if electra else hf_name(name, prefix)
        tensors[key] = np.ascontiguousarray(value.T if transposed else value)
    fileio.makedirs(output_dir)
    write_bytes_atomic(os.path.join(output_dir, SAFETENSORS_FILE),
                       save(tensors, metadata={"format": "pt"}))
    config = weights.encoder_of(model).config
    values = dict(hf_config_from_bert(config, architecture, **extras), **names)
    write_text_atomic(os.path.join(output_dir, CONFIG_FILE),
                      json.dumps(values, indent=2, sort_keys=True) + "\n")
    _write_vocabulary(output_dir, vocab_file, do_lower_case)
    return output_dir


def _label_names(model, labels):
    """config.json's id2label / label2id of `labels` (checked against the model's classes), or
    {} to keep the writer's LABEL_<i>."""
    if labels is None:
        return {}
    labels = [str(name) for name in labels]
    num_classes = getattr(model, "num_classes", None)
    if not isinstance(model, (BertClassifier, BertTokenClassifier)) or num_classes == 1:
        raise ValueError(f"labels {labels} for a {type(model).__name__}, which has no classes")
    if len(labels) != num_classes or len(set(labels)) != len(labels) or not all(labels):
        raise ValueError(f"labels {labels}: expected {num_classes} distinct names, one per "
                         f"class of the {type(model).__name__}")
    return {"id2label": {str(i): name for i, name in enumerate(labels)},
            "label2id": {name: i for i, name in enumerate(labels)}}


def _write_vocabulary(output_dir, vocab_file, do_lower_case, tokenizer_json=False):
    """vocab.txt (a copy of vocab_file) and tokenizer_config.json, each when given: a modern
    encoder trained on a WordPiece vocabulary needs them as much as BERT does, and (with
    `tokenizer_json`) the same WordPiece as tokenizer.json, the one file transformers'
    AutoTokenizer reads for a ModernBERT directory. A SentencePiece vocabulary is written as
    spiece.model with a tokenizer_config.json naming AlbertTokenizer, which prepares text and
    segments it as bert_tf's SentencePieceTokenizer does."""
    if vocab_file and tokenizer_files.is_sentencepiece_model(vocab_file):
        tokenizer = tokenizer_files.load_tokenizer(vocab_file, do_lower_case)
        tokenizer_files.write_tokenizer_file(output_dir, tokenizer, vocab_file)
        write_tokenizer_config(output_dir, tokenizer.do_lower_case,
                               tokenizer_files.special_tokens(tokenizer), sentencepiece=True)
        return
    if vocab_file:
        copy_vocab(vocab_file, os.path.join(output_dir, VOCAB_FILE))
    roles = None
    if vocab_file and tokenizer_json:
        tokenizer = tokenization.WordpieceTokenizer(
            vocab_file, do_lower_case=True if do_lower_case is None else do_lower_case)
        write_text_atomic(os.path.join(output_dir, TOKENIZER_JSON_FILE), json.dumps(
            bpe.wordpiece_tokenizer_json(tokenizer), ensure_ascii=False, indent=2) + "\n")
        roles = tokenizer_files.special_tokens(tokenizer)
    if do_lower_case is not None:
        write_tokenizer_config(output_dir, do_lower_case, roles)


def write_tokenizer_config(output_dir, do_lower_case, roles=None, sentencepiece=False):
    """Writes tokenizer_config.json recording the vocabulary's casing (as transformers reads it)
    and, given `roles` ({"cls": "[CLS]", ...}), its special tokens (transformers reads the
    padding token of a tokenizer.json-only tokenizer from there). For a SentencePiece model
    (`sentencepiece`) it names AlbertTokenizer with ALBERT's text preparation, which is how
    bert_tf's SentencePieceTokenizer prepares text (tools/make_sentencepiece_reference.py
    loads its reference ids through the same file)."""
    values = {"do_lower_case": bool(do_lower_case), "tokenizer_class": "BertTokenizer"}
    if sentencepiece:
        values.update({"keep_accents": False, "remove_space": True,
                       "tokenizer_class": "AlbertTokenizer"})
    values.update({f"{role}_token": token for role, token in (roles or {}).items()})
    write_text_atomic(os.path.join(output_dir, TOKENIZER_CONFIG_FILE),
                      json.dumps(values, indent=2, sort_keys=True) + "\n")


def _save_modernbert(model, output_dir, save, label_names=None):
    """save_huggingface for a modern encoder: a ModernBertModel, ModernBertForMaskedLM or
    ModernBertForSequenceClassification directory."""
    config = weights.encoder_of(model).config
    num_labels = None
    if isinstance(model, BertPretrainer) and model.next_sentence is None:
        architecture, prefix, kind = modernbert.MASKED_LM, "model.", weights.PRETRAINING
    elif isinstance(model, BertClassifier):
        architecture, prefix, kind = (modernbert.SEQUENCE_CLASSIFICATION, "model.",
                                      weights.CLASSIFICATION)
        num_labels = model.num_classes
    elif isinstance(model, Encoder):
        architecture, prefix, kind = "ModernBertModel", "", None
    else:
        raise InteropError(f"cannot write a {type(model).__name__} as ModernBERT (an encoder, "
                           "a masked-LM pretrainer without NSP or a classifier can be)")
    values = dict(modernbert.hf_config_from_bert(config, architecture, num_labels),
                  **(label_names or {}))
    if getattr(model, "multi_label", False):
        values["problem_type"] = MULTI_LABEL_PROBLEM
    tensors = {}
    for name, value in weights.model_arrays(model).items():
        if name.startswith(weights.POOLER_SCOPE) and kind != weights.CLASSIFICATION:
            continue  # ModernBertModel and ModernBertForMaskedLM have no pooler.
        key, transposed = modernbert.hf_key(name, kind, prefix)
        tensors[key] = np.ascontiguousarray(value.T if transposed else value)
    # decoder.weight is tied to the word embeddings (tie_word_embeddings): not stored, as
    # transformers' save_pretrained leaves it out.
    fileio.makedirs(output_dir)
    write_bytes_atomic(os.path.join(output_dir, SAFETENSORS_FILE),
                       save(tensors, metadata={"format": "pt"}))
    write_text_atomic(os.path.join(output_dir, CONFIG_FILE),
                      json.dumps(values, indent=2, sort_keys=True) + "\n")
    return output_dir
