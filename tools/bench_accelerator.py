"""accelerator case: pre-training throughput on one GPU or TPU, bert_tf on JAX beside Hugging Face
transformers on PyTorch, in one command a short rental can run.

Three models train in bfloat16 on synthetic full-length batches (random ids; every row full):
  bert_base_128         BERT-base, 128 tokens, MLM (20 predictions a row) + NSP
  bert_large_512        BERT-large, 512 tokens, MLM (76 predictions) + NSP
  modernbert_base_1024  ModernBERT-base, 1,024 tokens, MLM (30%), local/global attention
bert_tf: KERAS_BACKEND=jax, mixed_bfloat16, the JAX loop's compiled step
(training.jax_runner.compile_train_step: forward, backward and the optimizer update in one
program), BERT's AdamW or ModernBERT's StableAdamW, attention through
jax.nn.dot_product_attention where the fused kernel applies (no attention dropout: the
modern encoder). Hugging Face (--torch_python, the same interpreter by default):
BertForPreTraining / ModernBertForMaskedLM with SDPA attention, torch.autocast bfloat16, fused
AdamW, eager PyTorch.

Reported per model and side: tokens/s, step time, model FLOP utilisation against the chip's
dense bfloat16 peak (PEAK_TFLOPS, matched on the device's name; none for an unknown device),
peak device memory, the device's name; and bert_tf / Hugging Face tokens/s. Both sides count
the same model FLOPs (`model_flops`): the matrix products of the encoder and of the MLM head at
the predicted positions, and attention over the keys each query sees (a local layer's window);
the work Hugging Face's BertForPreTraining spends scoring all positions is not counted.

Needs only this repository, JAX, Keras (with namex and optree) and, for the peer, PyTorch and
transformers: no TensorFlow, no network. --quick runs tiny models a few steps on whatever
device JAX has (CPU in CI).
"""

import json
import os
import sys
import time

from bench_common import SCRIPTS, emit, print_row, run_command

# Dense bfloat16 peak TFLOP/s by the device name JAX or PyTorch reports (vendor datasheets).
PEAK_TFLOPS = (("H200", 989.0), ("H100", 989.0), ("GH200", 989.0), ("A100", 312.0),
               ("L40S", 362.0), ("TPU v6", 918.0), ("TPU v5p", 459.0), ("TPU v5 lite", 197.0),
               ("TPU v5e", 197.0), ("TPU v4", 275.0))

MODELS = {
    "bert_base_128": dict(preset="bert_base", seq=128, batch=256, predictions=20, nsp=True),
    "bert_large_512": dict(preset="bert_large", seq=512, batch=64, predictions=76, nsp=True),
    "modernbert_base_1024": dict(preset="modernbert_base", seq=1024, batch=64, predictions=308,
                                 nsp=False),
}
# --quick: one tiny model per code path (BERT-large runs BERT-base's code at other sizes; its
# tiny twin cost the suite a JAX process and a compilation, ~10 s, for nothing new).
QUICK = {
    "bert_base_128": dict(preset="bert_tiny", seq=32, batch=4, predictions=5, nsp=True,
                          overrides=dict(vocab_size=512)),
    "modernbert_base_1024": dict(preset="modernbert_tiny", seq=64, batch=2, predictions=19,
                                 nsp=False, overrides={}),
}


def peak_tflops(device_name):
    for name, peak in PEAK_TFLOPS:
        if name.lower() in device_name.lower():
            return peak
    return None


def model_flops(config, batch, seq, predictions):
    """Training FLOPs of one step (forward + backward = 3x forward): 6 x the multiply-adds
    of every matrix product with a weight, 12 x those of attention's two products per key a
    query sees.

    Args: config: the BertConfig as a dict; batch, seq; predictions: MLM positions per row.
    """
    hidden, inner, layers = config["hidden_size"], config["intermediate_size"], \
        config["num_hidden_layers"]
    modern = config.get("architecture") == "modernbert"
    per_layer = 4 * hidden * hidden + (3 if modern else 2) * hidden * inner
    tokens = batch * seq
    flops = 6 * tokens * layers * per_layer
    window = config.get("local_attention_window", 0)
    every = config.get("global_attn_every_n_layers", 1)
    for layer in range(layers):
        local = window and layer % every
        keys = min(seq, window + 1) if local else seq
        flops += 12 * tokens * hidden * keys
    vocab = config["vocab_size"]
    flops += 6 * batch * predictions * (hidden * hidden + hidden * vocab)
    if config.get("architecture") != "modernbert":
        flops += 6 * batch * hidden * hidden  # the pooler (NSP)
    return flops


def worker_accelerator_jax(args):
    """One model's train steps under bert_tf on JAX; emits the result row."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax
    import keras

    from bert_tf.config import EncoderConfig
    from bert_tf.modeling import BertPretrainer, build_encoder
    from bert_tf.training import jax_runner
    from bert_tf.training.optimization import create_optimizer

    spec = args["spec"]
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    jax_runner.data_parallel()
    config = EncoderConfig.from_preset(spec["preset"], **spec.get("overrides", {}))
    modern = config.architecture == "modernbert"
    model = BertPretrainer(build_encoder(config), use_next_sentence_label=spec["nsp"])
    optimizer = create_optimizer(1e-4, num_train_steps=10_000, num_warmup_steps=100,
                                 optimizer_type="stable_adamw" if modern else "adamw",
                                 lr_schedule="wsd" if modern else "linear")
    optimizer.build(model.trainable_variables)
    batch = synthetic_batch(config.vocab_size, spec["batch"], spec["seq"], spec["predictions"],
                            spec["nsp"])

    def loss_fn(model, features, training):
        return model.compute_pretraining_losses(features, model(features, training=training))

    mesh = jax_runner.device_mesh()
    step, state = jax_runner.compile_train_step(model, optimizer, loss_fn, mesh)
    micro = jax_runner.shard_micro_batches({k: v[None] for k, v in batch.items()}, mesh)
    start = time.perf_counter()
    state, parts, _ = step(state, micro)
    float(parts["loss"])
    compile_seconds = time.perf_counter() - start
    for _ in range(args["warmup"]):
        state, parts, _ = step(state, micro)
    float(parts["loss"])
    start = time.perf_counter()
    for _ in range(args["steps"]):
        state, parts, _ = step(state, micro)
    loss = float(parts["loss"])
    seconds = (time.perf_counter() - start) / args["steps"]
    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    emit(result_row("bert_tf_jax", args["model"], config.to_dict() | {
        "architecture": config.architecture}, spec, seconds, compile_seconds,
        device_name(), stats.get("peak_bytes_in_use"),
        loss, attention=_attention_kind(config, device)))


def device_name():
    """The kind of JAX's first device ("NVIDIA H100 80GB HBM3", "TPU v5 lite"), or its
    platform ("cpu")."""
    import jax

    device = jax.devices()[0]
    return getattr(device, "device_kind", device.platform)


def _attention_kind(config, device):
    """What computed attention: the fused kernel on GPUs where no dropout touches the
    probabilities (kernels.fused_attention), else XLA's products and softmax."""
    fused = (device.platform == "gpu" and config.attention_probs_dropout_prob == 0
             and os.environ.get("BERT_TF_FUSED_ATTENTION", "auto") == "auto")
    return "jax.nn.dot_product_attention (cudnn)" if fused else "xla"


def synthetic_batch(vocab_size, batch, seq, predictions, nsp):
    """Full rows of random ids, `predictions` distinct masked positions a row (numpy int32)."""
    import numpy as np

    rng = np.random.default_rng(0)
    positions = np.sort(np.stack([rng.permutation(seq - 1)[:predictions] + 1
                                  for _ in range(batch)]), axis=1).astype("int32")
    features = {
        "input_word_ids": rng.integers(5, vocab_size, (batch, seq)).astype("int32"),
        "input_mask": np.ones((batch, seq), "int32"),
        "input_type_ids": np.concatenate([np.zeros((batch, seq // 2), "int32"),
                                          np.ones((batch, seq - seq // 2), "int32")], 1),
        "masked_lm_positions": positions,
        "masked_lm_ids": rng.integers(5, vocab_size, (batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
    }
    if nsp:
        features["next_sentence_labels"] = rng.integers(0, 2, (batch, 1)).astype("int32")
    return features


def result_row(impl, model, config, spec, seconds, compile_seconds, device_name, peak_bytes,
               loss, **extra):
    tokens = spec["batch"] * spec["seq"]
    flops = model_flops(config, spec["batch"], spec["seq"], spec["predictions"])
    peak = peak_tflops(device_name)
    row = {"case": "accelerator", "impl": impl, "model": model, "device": device_name,
           "batch": spec["batch"], "seq": spec["seq"], "step_ms": round(seconds * 1000, 2),
           "tokens_per_second": round(tokens / seconds, 1),
           "model_tflops_per_step": round(flops / 1e12, 4),
           "achieved_tflops": round(flops / seconds / 1e12, 2),
           "mfu": round(flops / seconds / (peak * 1e12), 4) if peak else None,
           "peak_tflops": peak, "compile_seconds": round(compile_seconds, 1),
           "peak_memory_gib": round(peak_bytes / 2 ** 30, 2) if peak_bytes else None,
           "loss": round(loss, 4), **extra}
    return row


def case_accelerator(quick, torch_python, run_worker, models=None):
    """Runs every model on both sides; prints and returns the rows plus ratios."""
    specs = QUICK if quick else MODELS
    steps, warmup = (3, 1) if quick else (20, 3)
    rows = []
    for model in models or specs:
        spec = specs[model]
        ours = run_worker("accelerator_jax", {"model": model, "spec": spec, "steps": steps,
                                              "warmup": warmup},
                          env={"KERAS_BACKEND": "jax"})
        ours = dict({"case": "accelerator", "impl": "bert_tf_jax", "model": model}, **ours)
        print_row(ours)
        rows.append(ours)
        if not torch_python:
            continue
        peer = run_hf(torch_python, model, spec, steps, warmup)
        print_row(peer)
        rows.append(peer)
        if "error" not in ours and "error" not in peer:
            ratio = {"case": "accelerator", "kind": "ratio", "model": model,
                     "tokens_per_second_ratio": round(ours["tokens_per_second"]
                                                      / peer["tokens_per_second"], 3)}
            print_row(ratio)
            rows.append(ratio)
    if not torch_python:
        note = {"case": "accelerator", "kind": "note",
                "note": "Hugging Face rows skipped: no interpreter with torch and transformers "
                        "(pass --torch_python)"}
        print_row(note)
        rows.append(note)
    return rows


def run_hf(torch_python, model, spec, steps, warmup):
    """Hugging Face's side in --torch_python (bench_scripts/hf_accelerator.py)."""
    from bert_tf.config import EncoderConfig

    config = EncoderConfig.from_preset(spec["preset"], **spec.get("overrides", {}))
    args = {"model": model, "config": config.to_dict() | {"architecture": config.architecture,
                                                          "layer_norm_eps":
                                                              config.layer_norm_eps},
            "spec": spec, "steps": steps, "warmup": warmup}
    script = os.path.join(SCRIPTS, "hf_accelerator.py")
    result = run_command("hf_accelerator", [torch_python, script, json.dumps(args)],
                         dict(os.environ, PYTHONPATH=os.path.dirname(SCRIPTS)), 1800)
    if "error" in result:
        return {"case": "accelerator", "impl": "huggingface_torch", "model": model, **result}
    result["mfu"] = (round(result["achieved_tflops"] / result["peak_tflops"], 4)
                     if result.get("peak_tflops") else None)
    return result


def format_lines(row):
    if row.get("kind") == "ratio":
        return [f"accelerator {row['model']:22} bert_tf/HF tokens/s "
                f"{row['tokens_per_second_ratio']:.2f}x"]
    if row.get("kind") == "note":
        return [f"accelerator NOTE {row['note']}"]
    mfu = f"MFU {row['mfu'] * 100:.1f}%" if row.get("mfu") is not None else "MFU n/a"
    return [f"accelerator {row['model']:22} {row['impl']:18} {row['tokens_per_second']:>12,.0f} "
            f"tokens/s  {row['step_ms']:8.1f} ms/step  {mfu}  "
            f"{row.get('peak_memory_gib')} GiB  {row['device']}"]


WORKERS = {"accelerator_jax": worker_accelerator_jax}


if __name__ == "__main__":  # The peer script imports this module for model_flops only.
    sys.exit("run through tools/benchmark.py --cases=accelerator")
