"""The `pretrain` case of tools/benchmark.py: train-step throughput beside keras-hub and
Hugging Face.

bert_tf BertPretrainer (MLM + NSP, the loop's compiled step with AdamWeightDecay) and keras-hub
BertMaskedLM (MLM only, the same step shape with Keras AdamW), each in every dtype / XLA
configuration; bert_tf on Keras' JAX backend (the JAX loop's compiled step, XLA always) in
every dtype, beside TensorFlow on the same CPU; Hugging Face BertForPreTraining (float32,
eager PyTorch) under --torch_python (bench_scripts/hf_pretrain.py); ratios of bert_tf's best
configuration to each peer and model FLOP utilisation against a matmul peak measured in the
same run.

This module must not import tools/benchmark.py (run as __main__, importing it again would
define its flags twice): benchmark.py registers WORKERS and passes the flag values in.
"""

import json
import math
import os
import statistics
import subprocess
import sys
import time

from absl import app

from bench_common import MODELS, SCRIPTS, emit, load, median_rate, print_row, run_command, \
    run_worker


def _flops_per_step(config, batch, seq, preds, nsp):
    """Training FLOPs of one step: 3 x forward (forward + 2x backward), matmuls only.

    Forward per token: 2 x the encoder's matmul weights (Q, K, V, output, two FFN) plus attention
    (Q.K^T and A.V: 2 x 2 x S x H per layer); per prediction: the MLM transform and the tied
    decoder 2 x (H^2 + H x V); per sequence with NSP: pooler and classifier 2 x (H^2 + 2H).
    """
    h, i, layers, v = (config.hidden_size, config.intermediate_size, config.num_hidden_layers,
                       config.vocab_size)
    encoder_matmul = layers * (4 * h * h + 2 * h * i)
    forward = batch * seq * (2 * encoder_matmul + 4 * layers * seq * h)
    forward += batch * preds * 2 * (h * h + h * v)
    if nsp:
        forward += batch * 2 * (h * h + 2 * h)
    return 3 * forward


def worker_matmul_peak(args):
    """Best-case FLOP/s of one large square matmul chain, float32 and bfloat16."""
    import tensorflow as tf
    n, iters = args["n"], args["iters"]
    out = {"load_avg": load()}
    for dtype in ("float32", "bfloat16"):
        # Scaled so that repeated products stay O(1); each product feeds the next, so no
        # graph optimisation can hoist or skip any of them.
        x = tf.cast(tf.random.normal([n, n]), dtype)
        b = tf.cast(tf.random.normal([n, n], stddev=n ** -0.5), dtype)

        @tf.function
        def chain(x=x, b=b):
            for _ in tf.range(iters):
                x = tf.matmul(x, b)
            return tf.reduce_sum(tf.cast(x[:1, :1], tf.float32))

        seconds, _ = median_rate(lambda: chain().numpy(), 1, warmup=1, repeats=3)
        out[f"{dtype}_gflops"] = round(2 * n ** 3 * iters / seconds / 1e9, 1)
    emit(out)


def _random_batch(tf, batch, seq, preds, vocab_size):
    """Dense pre-training features with random ids, full-length sequences, P real predictions."""
    rng = tf.random.Generator.from_seed(0)
    positions = tf.sort(tf.stack([tf.random.shuffle(tf.range(1, seq), seed=i)[:preds]
                                  for i in range(batch)]), axis=-1)
    return {
        "input_word_ids": rng.uniform([batch, seq], 5, vocab_size, tf.int32),
        "input_mask": tf.ones([batch, seq], tf.int32),
        "input_type_ids": tf.concat([tf.zeros([batch, seq // 2], tf.int32),
                                     tf.ones([batch, seq - seq // 2], tf.int32)], axis=1),
        "masked_lm_positions": tf.cast(positions, tf.int32),
        "masked_lm_ids": rng.uniform([batch, preds], 5, vocab_size, tf.int32),
        "masked_lm_weights": tf.ones([batch, preds], tf.float32),
        "next_sentence_labels": rng.uniform([batch], 0, 2, tf.int32),
    }


def _bert_tf_step_fn(config, jit_compile):
    """(features) -> loss with the run_pretraining loop's grad function and AdamWeightDecay."""
    from bert_tf.modeling import BertEncoder, BertPretrainer
    from bert_tf.training import optimization, tf_runner

    model = BertPretrainer(BertEncoder(config))
    optimizer = optimization.create_optimizer(1e-4, 10_000, 100)

    def loss_fn(model, batch, training):
        return model.compute_pretraining_losses(batch, model(batch, training=training))

    return model, optimizer, tf_runner._make_grad_fn(model, loss_fn, jit_compile)


def _keras_hub_step_fn(config, jit_compile):
    """keras-hub BertMaskedLM built from the config (no preset download), the same step shape."""
    import keras
    import keras_hub
    import tensorflow as tf

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    optimizer = keras.optimizers.AdamW(1e-4, weight_decay=0.01, beta_2=0.999, epsilon=1e-6,
                                       global_clipnorm=1.0)

    def grad_fn(batch):
        with tf.GradientTape() as tape:
            logits_bpv = model({"token_ids": batch["input_word_ids"],
                                "padding_mask": batch["input_mask"] > 0,
                                "segment_ids": batch["input_type_ids"],
                                "mask_positions": batch["masked_lm_positions"]}, training=True)
            ce_bp = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=batch["masked_lm_ids"], logits=tf.cast(logits_bpv, tf.float32))
            weights_bp = batch["masked_lm_weights"]
            loss = tf.reduce_sum(ce_bp * weights_bp) / (tf.reduce_sum(weights_bp) + 1e-5)
        return {"loss": loss}, tape.gradient(loss, model.trainable_variables)

    return model, optimizer, (tf.function(grad_fn, jit_compile=True) if jit_compile else grad_fn)


def _train_steps_fn(tf, impl, config, xla, features):
    """(train_steps(num_steps) -> last loss, trainable variables) of one implementation, traced
    (and with XLA compiled) by a first call."""
    make = _bert_tf_step_fn if impl == "bert_tf" else _keras_hub_step_fn
    model, optimizer, grad_fn = make(config, xla)
    if impl == "bert_tf":
        model(features)  # Builds every variable before the step is traced.
    variables = model.trainable_variables
    optimizer.build(variables)

    @tf.function
    def train_steps(num_steps):
        # Several optimizer steps per call, as the training loop does (steps_per_loop).
        loss = tf.constant(0.0)
        for _ in tf.range(num_steps):
            parts, grads = grad_fn(features)
            optimizer.apply(grads, variables)
            loss = parts["loss"]
        return loss

    train_steps(tf.constant(1)).numpy()
    return train_steps, variables


def worker_pretrain(args):
    """Train-step throughput of one (implementation, model, dtype, XLA) configuration."""
    import keras
    import tensorflow as tf
    from bert_tf.config import BertConfig

    keras.mixed_precision.set_global_policy(args["dtype"])
    config = BertConfig.from_preset(MODELS[args["model"]], vocab_size=30522)
    batch_size, seq, preds = args["batch"], args["seq"], args["preds"]
    features = _random_batch(tf, batch_size, seq, preds, config.vocab_size)
    build_start = time.perf_counter()
    train_steps, variables = _train_steps_fn(tf, args["impl"], config, args["xla"], features)
    compile_seconds = time.perf_counter() - build_start
    steps = args["steps"]
    seconds, _ = median_rate(lambda: train_steps(tf.constant(steps)).numpy(), 1,
                              warmup=args["warmup"], repeats=args["repeats"])
    step_seconds = seconds / steps
    flops = _flops_per_step(config, batch_size, seq, preds, nsp=args["impl"] == "bert_tf")
    loss = float(train_steps(tf.constant(1)).numpy())
    emit({"impl": args["impl"], "model": args["model"], "dtype": args["dtype"],
           "xla": args["xla"], "batch": batch_size, "seq": seq, "preds": preds,
           "ms_per_step": round(1000 * step_seconds, 2),
           "tokens_per_s": round(batch_size * seq / step_seconds, 1),
           "flops_per_step": int(flops),
           "achieved_gflops": round(flops / step_seconds / 1e9, 2),
           "compile_s": round(compile_seconds, 1), "final_loss_finite": loss == loss,
           "params": int(sum(int(tf.size(v)) for v in variables)), "load_avg": load()})


def worker_pretrain_interleaved(args):
    """Several (implementation, XLA) configurations of one dtype in one process, timed in
    alternating rounds (the order reversed every other round), so that a shared machine's
    changing load reaches them alike: the median wall and CPU seconds (user + system of the
    process, which other jobs' load does not inflate) per step of each.

    args: dtype, model, batch, seq, preds, steps (per timed call), rounds, configs (list of
    [impl, xla]). Run as `benchmark.py --worker=pretrain_interleaved --worker_args='{...}'`.
    """
    import keras
    import tensorflow as tf
    from bert_tf.config import BertConfig

    keras.mixed_precision.set_global_policy(args["dtype"])
    config = BertConfig.from_preset(MODELS[args["model"]], vocab_size=30522)
    features = _random_batch(tf, args["batch"], args["seq"], args["preds"], config.vocab_size)
    names = [f"{impl}:{'xla' if xla else 'no_xla'}" for impl, xla in args["configs"]]
    steps_fns = {name: _train_steps_fn(tf, impl, config, xla, features)[0]
                 for name, (impl, xla) in zip(names, args["configs"])}
    wall, cpu = {n: [] for n in names}, {n: [] for n in names}
    steps = tf.constant(args["steps"])
    for round_index in range(args["rounds"]):
        for name in names if round_index % 2 == 0 else names[::-1]:
            start, cpu_start = time.perf_counter(), time.process_time()
            steps_fns[name](steps).numpy()
            wall[name].append((time.perf_counter() - start) / args["steps"])
            cpu[name].append((time.process_time() - cpu_start) / args["steps"])
    tokens = args["batch"] * args["seq"]
    emit({"dtype": args["dtype"], "model": args["model"], "rounds": args["rounds"],
          "load_avg": load(), "configs": {
              n: {"wall_ms_per_step": round(1000 * statistics.median(wall[n]), 1),
                  "cpu_ms_per_step": round(1000 * statistics.median(cpu[n]), 1),
                  "tokens_per_s": round(tokens / statistics.median(wall[n]), 1),
                  "tokens_per_cpu_s": round(tokens / statistics.median(cpu[n]), 1),
                  "wall_ms_rounds": [round(1000 * t) for t in wall[n]]} for n in names}})


def worker_pretrain_jax(args):
    """The same configuration's step under KERAS_BACKEND=jax: training.jax_runner's compiled
    step (forward, backward and AdamWeightDecay in one XLA program)."""
    import keras

    from bench_accelerator import synthetic_batch
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertPretrainer, build_encoder
    from bert_tf.training import jax_runner
    from bert_tf.training.optimization import create_optimizer

    keras.mixed_precision.set_global_policy(args["dtype"])
    keras.utils.set_random_seed(0)
    config = BertConfig.from_preset(MODELS[args["model"]], vocab_size=30522)
    batch_size, seq, preds = args["batch"], args["seq"], args["preds"]
    model = BertPretrainer(build_encoder(config))
    optimizer = create_optimizer(1e-4, 10_000, 100)
    optimizer.build(model.trainable_variables)

    def loss_fn(model, batch, training):
        return model.compute_pretraining_losses(batch, model(batch, training=training))

    mesh = jax_runner.device_mesh()
    batch = synthetic_batch(config.vocab_size, batch_size, seq, preds, nsp=True)
    micro = jax_runner.shard_micro_batches({k: v[None] for k, v in batch.items()}, mesh)
    build_start = time.perf_counter()
    step, state = jax_runner.compile_train_step(model, optimizer, loss_fn, mesh)
    state, parts, _ = step(state, micro)
    float(parts["loss"])
    compile_seconds = time.perf_counter() - build_start

    def train_steps(num_steps):
        nonlocal state
        for _ in range(num_steps):
            state, step_parts, _ = step(state, micro)
        return float(step_parts["loss"])  # waits for the last step

    steps = args["steps"]
    seconds, _ = median_rate(lambda: train_steps(steps), 1, warmup=args["warmup"],
                             repeats=args["repeats"])
    step_seconds = seconds / steps
    flops = _flops_per_step(config, batch_size, seq, preds, nsp=True)
    loss = train_steps(1)
    emit({"impl": "bert_tf_jax", "model": args["model"], "dtype": args["dtype"], "xla": True,
          "batch": batch_size, "seq": seq, "preds": preds,
          "ms_per_step": round(1000 * step_seconds, 2),
          "tokens_per_s": round(batch_size * seq / step_seconds, 1),
          "flops_per_step": int(flops),
          "achieved_gflops": round(flops / step_seconds / 1e9, 2),
          "compile_s": round(compile_seconds, 1), "final_loss_finite": loss == loss,
          "params": int(sum(math.prod(v.shape) for v in model.trainable_variables)),
          "load_avg": load()})


WORKERS = {"matmul_peak": worker_matmul_peak, "pretrain": worker_pretrain,
           "pretrain_interleaved": worker_pretrain_interleaved,
           "pretrain_jax": worker_pretrain_jax}


def _hf_config(config):
    """transformers.BertConfig arguments for the same model; "gelu" here is HF's "gelu_new"."""
    keys = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "hidden_dropout_prob", "attention_probs_dropout_prob",
            "max_position_embeddings", "type_vocab_size", "initializer_range", "layer_norm_eps")
    values = {k: getattr(config, k) for k in keys}
    values["hidden_act"] = {"gelu": "gelu_new", "gelu_exact": "gelu"}.get(
        config.hidden_act, config.hidden_act)
    return values


def run_hf_pretrain(python, model, shape, steps, warmup, repeats, timeout=3600):
    """Hugging Face BertForPreTraining train-step throughput (float32) under `python`."""
    from bert_tf.config import BertConfig
    config = BertConfig.from_preset(MODELS[model], vocab_size=30522)
    args = dict(config=_hf_config(config), steps=steps, warmup=warmup, repeats=repeats, **shape)
    # Not the repo's PYTHONPATH: the interpreter may be another venv's.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    script = os.path.join(SCRIPTS, "hf_pretrain.py")
    result = run_command("hf_pretrain", [python, script, json.dumps(args)], env, timeout)
    if "error" not in result:
        # FLOPs of the same useful work as bert_tf's row (P predictions + NSP), so achieved
        # GFLOP/s compare across rows; HF also runs the MLM head on the other S - P positions.
        flops = _flops_per_step(config, shape["batch"], shape["seq"], shape["preds"], nsp=True)
        result.update(flops_per_step=int(flops),
                      achieved_gflops=round(flops * result["tokens_per_s"]
                                            / (shape["batch"] * shape["seq"]) / 1e9, 2),
                      mlm_head_positions=shape["seq"])
    return result


def default_torch_python():
    """This interpreter if it can import torch and transformers, else None."""
    import importlib.util
    if all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
        return sys.executable
    return None


def check_torch_python(python):
    """A usage error unless `python` runs and imports torch and transformers."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise app.UsageError(f"--torch_python={python}: no such executable file")
    proc = subprocess.run([python, "-c", "import torch, transformers"], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode])[-1]
        raise app.UsageError(f"--torch_python={python} cannot import torch and transformers: "
                             f"{last}")


def _jax_env(quick):
    """The JAX worker's environment. --quick compiles at XLA's optimisation level 0 without
    the MLIR fusion emitters, as every JAX process of the tests does (docs/design.md, "Tests"):
    a tiny model's few steps spend most of their time compiling the step (level 0: the
    worker's CPU 16.0 -> 12.6 s)."""
    env = {"KERAS_BACKEND": "jax"}
    if quick:
        env["XLA_FLAGS"] = " ".join(["--xla_backend_optimization_level=0",
                                     "--xla_cpu_use_fusion_emitters=false",
                                     os.environ.get("XLA_FLAGS", "")]).strip()
    return env


def case_pretrain(setup, quick, torch_python=None, *, models, dtypes, xla_modes,
                  all_configs_for_base):
    """Runs every configuration in its own process; adds MFU and bert_tf/peer ratios.

    torch_python: an interpreter with torch + transformers for the HF rows, or None to skip.
    models, dtypes, xla_modes, all_configs_for_base: the benchmark's flags of those names.
    """
    shape = dict(batch=4, seq=32, preds=5) if quick else dict(batch=32, seq=128, preds=20)
    peak = run_worker("matmul_peak", {"n": 256 if quick else 2048, "iters": 2 if quick else 8})
    rows = [dict(case="pretrain", kind="matmul_peak", **peak)]
    print_row(rows[0])
    configs = [(d, x == "on") for d in dtypes for x in xla_modes]
    best, previous_best = {}, {}
    for model in models:
        if model not in MODELS:
            raise app.UsageError(f"--models: unknown {model!r}; expected {', '.join(MODELS)}")
        for impl in ("bert_tf", "keras_hub", "bert_tf_jax"):
            # JAX compiles the whole step whatever the flag: one row per dtype.
            todo = [(d, True) for d in dtypes] if impl == "bert_tf_jax" else configs
            if (model == "base" and not quick and not all_configs_for_base
                    and impl in previous_best):
                todo = [previous_best[impl][1:]]
            runs = []
            for dtype, xla in todo:
                steps = {"tiny": 10, "small": 2, "base": 1}[model] if not quick else 2
                jax_backend = impl == "bert_tf_jax"
                result = run_worker("pretrain_jax" if jax_backend else "pretrain", dict(
                    impl=impl, model=model, dtype=dtype, xla=xla, steps=steps, warmup=1,
                    repeats=3 if model != "base" else 2, **shape),
                    env=_jax_env(quick) if jax_backend else None)
                result.update(case="pretrain", kind="step", impl=impl, model=model, dtype=dtype,
                              xla=xla)
                if "error" not in result:
                    peak_key = "bfloat16_gflops" if dtype == "mixed_bfloat16" else "float32_gflops"
                    if peak.get(peak_key):
                        result["mfu"] = round(result["achieved_gflops"] / peak[peak_key], 3)
                    runs.append(result)
                rows.append(result)
                print_row(result)
            if runs:
                top = max(runs, key=lambda r: r["tokens_per_s"])
                best[impl] = (top["tokens_per_s"], top["dtype"], top["xla"])
        if "bert_tf" in best and "bert_tf_jax" in best:
            rows.append({"case": "pretrain", "kind": "ratio", "model": model,
                         "versus": "bert_tf_jax",
                         "bert_tf_best_tokens_per_s": best["bert_tf"][0],
                         "bert_tf_best_config": list(best["bert_tf"][1:]),
                         "bert_tf_jax_best_tokens_per_s": best["bert_tf_jax"][0],
                         "bert_tf_jax_best_config": list(best["bert_tf_jax"][1:]),
                         "ratio": round(best["bert_tf"][0] / best["bert_tf_jax"][0], 3)})
            print_row(rows[-1])
        if "bert_tf" in best and "keras_hub" in best:
            rows.append({"case": "pretrain", "kind": "ratio", "model": model, "versus": "keras_hub",
                         "bert_tf_best_tokens_per_s": best["bert_tf"][0],
                         "bert_tf_best_config": list(best["bert_tf"][1:]),
                         "keras_hub_best_tokens_per_s": best["keras_hub"][0],
                         "keras_hub_best_config": list(best["keras_hub"][1:]),
                         "ratio": round(best["bert_tf"][0] / best["keras_hub"][0], 3)})
            print_row(rows[-1])
        if torch_python:
            result = run_hf_pretrain(
                torch_python, model, shape,
                steps={"tiny": 10, "small": 2, "base": 1}[model] if not quick else 2, warmup=1,
                repeats=3 if model != "base" else 2)
            result.update(case="pretrain", kind="step", impl="hf_torch", model=model,
                          dtype="float32", xla=False, **shape)
            if "error" not in result and peak.get("float32_gflops"):
                result["mfu"] = round(result["achieved_gflops"] / peak["float32_gflops"], 3)
            rows.append(result)
            print_row(result)
            if "error" not in result and "bert_tf" in best:
                rows.append({"case": "pretrain", "kind": "ratio", "model": model,
                             "versus": "hf_torch",
                             "bert_tf_best_tokens_per_s": best["bert_tf"][0],
                             "bert_tf_best_config": list(best["bert_tf"][1:]),
                             "hf_torch_tokens_per_s": result["tokens_per_s"],
                             "hf_torch_config": ["float32", False],
                             "ratio": round(best["bert_tf"][0] / result["tokens_per_s"], 3)})
                print_row(rows[-1])
        # Base runs in the best configuration found on the largest smaller model.
        previous_best, best = best, {}
    if torch_python:
        note = ("HF transformers BertForPreTraining (torch CPU, float32 only, eager, AdamW): its "
                "MLM head computes logits at all seq positions (labels -100 except the "
                "predictions), as its standard forward with labels does; run by " + torch_python)
    else:
        note = ("HF transformers BertForPreTraining (torch CPU): skipped, torch/transformers not "
                "installed in this interpreter (pass --torch_python)")
    rows.append({"case": "pretrain", "kind": "note", "note": note})
    print_row(rows[-1])
    return rows


def format_lines(r):
    """The table lines of one pretrain row (errors and notes aside)."""
    case, kind = r["case"], r.get("kind")
    if kind == "matmul_peak":
        return [f"{case:14} matmul peak: fp32 {r['float32_gflops']} GFLOP/s, "
                f"bf16 {r['bfloat16_gflops']} GFLOP/s"]
    if kind == "step":
        return [f"{case:14} {r['model']:5} {r['impl']:11} {r['dtype']:14} "
                f"xla={'on ' if r['xla'] else 'off'} {r['tokens_per_s']:9.0f} tok/s "
                f"{r['ms_per_step']:9.1f} ms/step  MFU {r.get('mfu', float('nan')):.2f}"
                f"  load {r['load_avg']}"]
    if kind == "ratio":
        peer = {"keras_hub": "keras-hub best", "hf_torch": "HF torch fp32",
                "bert_tf_jax": "bert_tf on JAX best"}[r["versus"]]
        return [f"{case:14} {r['model']:5} bert_tf best / {peer} = {r['ratio']}"]
    return []
