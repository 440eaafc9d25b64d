"""The models and inputs of the cross-backend parity tests, and the worker that computes them.

The test process (TensorFlow) builds each case's model, saves it as .keras with its inputs and
its outputs; `python backend_cases.py DIR` under KERAS_BACKEND=jax loads every model, computes
the same outputs (and gradients of one training step) and writes them beside, then builds one
model of its own and saves it with its outputs for the TensorFlow side to load, and runs a
preset's encoder (no_tensorflow.json). Only numpy, keras and bert_tf.modeling here: the worker
runs with TensorFlow hidden.
"""

import json
import os
import sys

import keras
import numpy as np
from keras import ops

from bert_tf.config import BertConfig, ModernBertConfig
from bert_tf.modeling import (BertClassifier, BertPretrainer, BertSentenceEmbedder,
                              BertSpanLabeler, BertTokenClassifier, ElectraPretrainer,
                              build_encoder)

VOCAB = 96


def _bert(**overrides):
    # Dropout off: a training step's gradients are compared, and the backends draw different
    # random masks.
    values = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=512, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    return BertConfig(**dict(values, **overrides))


def _modern(**overrides):
    values = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48,
                  max_position_embeddings=2048, local_attention_window=16)
    return ModernBertConfig.from_preset("modernbert_tiny", **dict(values, **overrides))


def pretraining_features(batch, length, seed, packed=False, predictions=6):
    """Padded rows (the last row shorter), or two instances packed per row."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, size=(batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    mask[-1, length * 3 // 4:] = 0
    types = np.zeros((batch, length), "int32")
    types[:, length // 3:] = 1
    features = {"input_word_ids": ids * mask, "input_mask": mask, "input_type_ids": types * mask,
                "masked_lm_positions": np.sort(rng.choice(np.arange(1, length * 3 // 4),
                                                          size=(batch, predictions)), axis=1
                                               ).astype("int32"),
                "masked_lm_ids": rng.integers(5, VOCAB, size=(batch, predictions)
                                              ).astype("int32"),
                "masked_lm_weights": np.ones((batch, predictions), "float32"),
                "next_sentence_labels": rng.integers(0, 2, size=(batch, 1)).astype("int32")}
    if packed:
        split = length // 2
        instance = np.where(np.arange(length) < split, 1, 2)[None, :].repeat(batch, 0)
        features["input_instance_ids"] = (instance * mask).astype("int32")
        features["next_sentence_positions"] = np.array([[0, split]] * batch, "int32")
        features["next_sentence_labels"] = rng.integers(0, 2, size=(batch, 2)).astype("int32")
        features["next_sentence_weights"] = np.ones((batch, 2), "float32")
    return features


def encoder_inputs(features):
    return {k: features[k] for k in ("input_word_ids", "input_mask", "input_type_ids")}


# name -> (model builder, features, what to compare). Lengths 16 to 2,048 tokens; modern local
# layers take the blocked path above 3 half-windows (24 tokens here).
CASES = {
    "bert_128": (lambda: BertPretrainer(build_encoder(_bert())),
                 lambda: pretraining_features(3, 128, 1), "pretrainer"),
    "bert_16_packed": (lambda: BertPretrainer(build_encoder(_bert())),
                       lambda: pretraining_features(2, 16, 2, packed=True, predictions=3),
                       "pretrainer"),
    "albert_shared_64": (lambda: BertPretrainer(build_encoder(
        _bert(embedding_size=16, share_parameters="all")), sentence_order_prediction=True),
        lambda: pretraining_features(2, 64, 3), "pretrainer"),
    "sinusoidal_spans_96": (lambda: BertPretrainer(build_encoder(
        _bert(position_embedding_type="sinusoidal")), span_boundary_objective=True),
        lambda: _with_spans(pretraining_features(2, 96, 4)), "pretrainer"),
    # The budget recipe's model: the modern block, masked LM and the [CLS] bag of words.
    "modern_20": (lambda: BertPretrainer(build_encoder(_modern()), use_next_sentence_label=False,
                                         bag_of_words_weight=0.5),
                  lambda: pretraining_features(2, 20, 5), "pretrainer"),
    "modern_512_packed": (lambda: BertPretrainer(build_encoder(_modern())),
                          lambda: pretraining_features(2, 512, 6, packed=True), "pretrainer"),
    "modern_2048": (lambda: BertClassifier(build_encoder(_modern()), num_classes=3),
                    lambda: pretraining_features(1, 2048, 7), "task"),
    "bert_classifier_40": (lambda: BertClassifier(build_encoder(_bert()), num_classes=4),
                           lambda: pretraining_features(3, 40, 8), "task"),
    "bert_span_48": (lambda: BertSpanLabeler(build_encoder(_bert())),
                     lambda: pretraining_features(2, 48, 9), "task"),
    "modern_tagger_300": (lambda: BertTokenClassifier(build_encoder(_modern()), num_classes=5),
                          lambda: pretraining_features(2, 300, 10), "task"),
    "bert_embedder_32": (lambda: BertSentenceEmbedder(build_encoder(_bert()),
                                                      pooling=("mean", "cls")),
                         lambda: pretraining_features(3, 32, 11), "task"),
    # ELECTRA with factorized embeddings (E=16) and the generator projecting them to its 8.
    "electra_24": (lambda: ElectraPretrainer(build_encoder(_bert(embedding_size=16))),
                   lambda: _with_replacements(pretraining_features(3, 24, 12)), "electra"),
}
# Cases also run through the fused attention function (padded rows, local windows).
FUSED_CASES = ("bert_128", "modern_tagger_300")
# Cases whose one training step's gradients are compared.
GRADIENT_CASES = ("bert_128", "bert_16_packed", "albert_shared_64", "sinusoidal_spans_96",
                  "modern_20", "modern_512_packed", "electra_24")


def _with_spans(features):
    positions = features["masked_lm_positions"]
    features["span_left_boundaries"] = np.maximum(positions - 1, 0).astype("int32")
    features["span_right_boundaries"] = np.minimum(positions + 1, 95).astype("int32")
    return features


def _with_replacements(features):
    """Fixed tokens for ELECTRA's masked positions (the backends' samplers draw differently):
    some equal to the original, so not every masked position is replaced."""
    rng = np.random.default_rng(13)
    replacements = rng.integers(5, VOCAB, size=features["masked_lm_ids"].shape)
    keep = rng.random(replacements.shape) < 0.3
    features["replacement_ids"] = np.where(keep, features["masked_lm_ids"],
                                           replacements).astype("int32")
    return features


def _electra_outputs(model, features, training=False):
    """ElectraPretrainer's outputs with the features' replacement_ids instead of samples."""
    result = dict(model.detect_replacements(features, features["replacement_ids"],
                                            training=training))
    result["mlm_logits"] = model.generate(features, training=training)
    return result


def _outputs(model, features, kind):
    """name -> tensor: every output of the model (and the encoder's and the losses, for
    pre-trainers)."""
    if kind == "electra":
        result = _electra_outputs(model, features)
        parts = model.compute_pretraining_losses(features, result)
        result.update({f"part_{k}": v for k, v in parts.items()})
        return result
    if kind == "pretrainer":
        result = dict(model(features))
        encoder_features = encoder_inputs(features)
        if "input_instance_ids" in features:
            encoder_features["input_instance_ids"] = features["input_instance_ids"]
        encoder_out = model.encoder(encoder_features)
        result["sequence_output"] = encoder_out["sequence_output"]
        result["pooled_output"] = encoder_out["pooled_output"]
        parts = model.compute_pretraining_losses(features, result)
        result.update({f"part_{k}": v for k, v in parts.items()})
        return result
    out = model(encoder_inputs(features))
    return dict(out) if isinstance(out, dict) else {"output": out}


def outputs(model, features, kind):
    """_outputs as numpy arrays; on JAX compiled in one program (op by op, every operation of
    every shape would be compiled on its own: minutes on 2 cores)."""
    if keras.backend.backend() != "jax":
        return {k: ops.convert_to_numpy(v) for k, v in _outputs(model, features, kind).items()}
    import jax

    variables = model.variables

    def run(values, features):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return _outputs(model, features, kind)

    result = jax.jit(run)([v.value for v in variables], features)
    return {k: np.asarray(v) for k, v in result.items()}


def _training_loss(model, features):
    if isinstance(model, ElectraPretrainer):
        out = _electra_outputs(model, features, training=True)
    else:
        out = model(features, training=True)
    return model.compute_pretraining_losses(features, out)["loss"]


def gradients(model, features):
    """index:path -> gradient of the pre-training loss of one step (training=True); the
    index tells apart ELECTRA's two encoders, whose layers have the same paths."""
    variables = model.trainable_variables
    if keras.backend.backend() == "jax":
        import jax

        def loss_of(trainable, non_trainable):
            mapping = (list(zip(variables, trainable))
                       + list(zip(model.non_trainable_variables, non_trainable)))
            with keras.StatelessScope(state_mapping=mapping):
                return _training_loss(model, features)

        grads = jax.jit(jax.grad(loss_of))([v.value for v in variables],
                                           [v.value for v in model.non_trainable_variables])
    else:
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = _training_loss(model, features)
        grads = tape.gradient(loss, variables)
    return {f"{i}:{v.path}": ops.convert_to_numpy(g)
            for i, (v, g) in enumerate(zip(variables, grads))}


OPTIMIZERS = ("adamw", "lamb", "stable_adamw")


def optimizer_steps(kind, directory):
    """Three updates of `kind` (create_optimizer's, warmup 1 of 10 steps) from the saved
    weights and gradients: path -> the weights after them."""
    from bert_tf.training.optimization import create_optimizer

    saved = np.load(os.path.join(directory, "optimizer.inputs.npz"))
    # Names the optimizers' weight decay reads: kernels decay, biases and LayerNorm do not.
    variables = [keras.Variable(saved[f"w{i}"], name=name)
                 for i, name in enumerate(("kernel", "bias", "gamma", "embeddings"))]
    optimizer = create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=1,
                                 optimizer_type=kind, weight_decay_rate=0.1, clip_norm=1.0)
    for step in range(3):
        optimizer.apply([ops.convert_to_tensor(saved[f"g{step}_{i}"])
                         for i in range(len(variables))], variables)
    return {f"{kind}:{v.name}": ops.convert_to_numpy(v) for v in variables}


def write_optimizer_inputs(directory):
    rng = np.random.default_rng(4)
    arrays = {}
    for i, shape in enumerate(((8, 6), (6,), (6,), (20, 6))):
        arrays[f"w{i}"] = rng.normal(size=shape).astype("float32")
        for step in range(3):  # Large enough that the global-norm clip acts.
            arrays[f"g{step}_{i}"] = rng.normal(scale=0.6, size=shape).astype("float32")
    np.savez(os.path.join(directory, "optimizer.inputs.npz"), **arrays)


def compute_optimizers(directory):
    result = {}
    for kind in OPTIMIZERS:
        result.update(optimizer_steps(kind, directory))
    np.savez(os.path.join(directory, f"optimizer.{keras.backend.backend()}.npz"), **result)


def load(path):
    import bert_tf.modeling  # noqa: F401  Registers the classes the file names.

    return keras.saving.load_model(path, compile=False)


def compute(directory, name, model):
    """Writes name.<backend>.npz: the outputs (and gradients) of `model` on name's inputs."""
    _, _, kind = CASES[name]
    features = dict(np.load(os.path.join(directory, f"{name}.inputs.npz")))
    result = outputs(model, features, kind)
    if name in GRADIENT_CASES:
        result.update({f"grad:{k}": v for k, v in gradients(model, features).items()})
    np.savez(os.path.join(directory, f"{name}.{keras.backend.backend()}.npz"), **result)


# Cases written as Hugging Face directories by the JAX worker -> the weights the directory
# leaves out: BertForPreTraining holds all; ModernBertForMaskedLM has no pooler (its [CLS]
# bag-of-words head is the masked-LM head's, and so is kept).
HUGGINGFACE_CASES = {"bert_128": (), "modern_20": ("pooler/",)}
# The outputs a Hugging Face directory keeps (the [CLS] bag-of-words and NSP heads' aside).
HUGGINGFACE_OUTPUTS = ("mlm_logits", "sequence_output")


def write_huggingface(directory, models):
    """Each HUGGINGFACE_CASES model (`models[name]`, loaded from what the TensorFlow side
    saved) written with save_huggingface under JAX and read back with load_huggingface, its
    weights by path (hf_<name>.jax.npz): the Hugging Face format needs no TensorFlow."""
    from bert_tf.interop import load_huggingface, save_huggingface

    for name in HUGGINGFACE_CASES:
        target = os.path.join(directory, f"hf_{name}")
        save_huggingface(models[name], target)
        model, _, _ = load_huggingface(target)
        np.savez(os.path.join(directory, f"hf_{name}.jax.npz"),
                 **{v.path: ops.convert_to_numpy(v) for v in model.weights})


def main(directory):
    """Under the backend to check: every saved case, then one model of its own."""
    with open(os.path.join(directory, "cases.json")) as f:
        names = json.load(f)
    # Each file loaded once: the fused and Hugging Face passes below take the same models
    # (nothing here changes their weights; the attention path is chosen when traced).
    models = {name: load(os.path.join(directory, f"{name}.keras")) for name in names}
    for name in names:
        compute(directory, name, models[name])
    compute_optimizers(directory)
    # jax.nn.dot_product_attention (cuDNN's fused kernel on GPUs) through its XLA form here.
    os.environ["BERT_TF_FUSED_ATTENTION"] = "xla"
    for name in FUSED_CASES:
        features = dict(np.load(os.path.join(directory, f"{name}.inputs.npz")))
        np.savez(os.path.join(directory, f"{name}.jax_fused.npz"),
                 **outputs(models[name], features, CASES[name][2]))
    del os.environ["BERT_TF_FUSED_ATTENTION"]
    keras.utils.set_random_seed(3)
    own_name = "bert_classifier_40"
    model = CASES[own_name][0]()
    model.save(os.path.join(directory, f"own.{keras.backend.backend()}.keras"))
    features = dict(np.load(os.path.join(directory, f"{own_name}.inputs.npz")))
    np.savez(os.path.join(directory, f"own.{keras.backend.backend()}.npz"),
             **outputs(model, features, "task"))
    # A preset's encoder from bert_tf.config and bert_tf.modeling alone; whether anything
    # imported so far pulled in TensorFlow (the worker runs where `import tensorflow` fails).
    ids = np.ones((2, 40), "int32")
    out = outputs(build_encoder(ModernBertConfig.from_preset("modernbert_tiny")),
                  {"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids}, "task")
    write_huggingface(directory, models)
    with open(os.path.join(directory, "no_tensorflow.json"), "w") as f:
        json.dump({"sequence_output": list(out["sequence_output"].shape),
                   "tensorflow_imported": "tensorflow" in sys.modules}, f)


if __name__ == "__main__":
    main(sys.argv[1])
