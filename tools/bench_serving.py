"""The `serving` case of tools/benchmark.py: latency and throughput of an exported classifier.

A BertClassifier (bert_small; tiny with --quick) exported by bert_tf.serving with its id
(serving_default) and text (serve_text) signatures at seq 128, loaded in a process that imports
only TensorFlow and tensorflow-text: p50/p99 latency at batch 1 and sequences/s at batch 32 of
each signature, on passages of corpus sentences (the ids: the same passages tokenized and
padded), and the text/ids ratios (target: text p50 within 1.2x of ids); serve_text at batch 1
on short single corpus sentences (5-14 wordpieces) against the passages (target: short p50 <=
0.4x full, the text signatures running at the request's length bucket).

This module must not import tools/benchmark.py (run as __main__, importing it again would
define its flags twice): benchmark.py registers WORKERS and passes the flag values in.
"""

import json
import os
import statistics
import sys
import time

from bench_common import MODELS, emit, load, run_worker


def _passages(corpus, tokenizer, max_tokens, limit):
    """Full-length passages: one document's words joined while they fit in max_tokens wordpieces.

    Each passage ends only when its next word would not fit, so it fills the sequence (within
    a word of max_tokens): the text signature runs it at the full length S, the request the
    short sentences are compared with, and every position is tokenized, none is padding. No
    text is truncated (the id inputs then hold exactly what the text signature sees).
    """
    with open(corpus, encoding="utf-8") as f:
        documents = [d.split() for d in f.read().split("\n\n")]
    passages = []
    for words in documents:
        text, length = [], 0
        for word in words:
            n = len(tokenizer.encode(word))
            if length + n > max_tokens:
                if length > max_tokens - 8:  # within a word of full: a full-length passage
                    passages.append(" ".join(text))
                text, length = [], 0
            text.append(word)
            length += n
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
    from bert_tf.text.input_packing import pack_inputs

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
    emit({"export_s": round(export_seconds, 1), "texts": len(texts),
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
    emit({"results": results, "short": short, "parity": parity,
           "load_s": round(load_seconds, 1),
           "bert_tf_modules_loaded": sorted(m for m in sys.modules if m.startswith("bert_tf")),
           "load_avg": load()})


WORKERS = {"serving_export": worker_serving_export, "serving_measure": worker_serving_measure}


def case_serving(setup, quick):
    """Exports a classifier in one process, measures its signatures in another."""
    setup.ensure()
    model = "tiny" if quick else "small"
    seq, batch = 128, 32
    export_dir = os.path.join(setup.workdir, "serving", "1")
    inputs_file = os.path.join(setup.workdir, "serving_inputs.json")
    exported = run_worker("serving_export", dict(
        model=model, seq=seq, vocab=setup.vocab, corpus=setup.corpus, export_dir=export_dir,
        inputs_file=inputs_file, num_texts=256))
    if "error" in exported:
        return [{"case": "serving", "kind": "error", **exported}]
    measured = run_worker("serving_measure", dict(
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


def format_lines(r):
    """The table lines of one serving row (errors and notes aside)."""
    case, kind = r["case"], r.get("kind")
    if kind == "export":
        return [f"{case:14} {r['model']} classifier ({r['params']} params), seq "
                f"{r['seq']}, {r['mean_tokens_per_text']} tokens/text: export "
                f"{r['export_s']} s, load {r['load_s']} s"]
    if kind == "latency":
        return [f"{case:14} {r['signature']:4} batch 1:  p50 {r['p50_ms']:8.2f} ms  "
                f"p99 {r['p99_ms']:8.2f} ms  ({r['calls']} calls, load {r['load_avg']})"]
    if kind == "throughput":
        return [f"{case:14} {r['signature']:4} batch {r['batch']}: "
                f"{r['sequences_per_s']:8.1f} seq/s  {r['ms_per_batch']:8.1f} ms/batch"]
    if kind == "ratio":
        return [f"{case:14} text / ids: p50 x{r['text_over_ids_p50']}, p99 "
                f"x{r['text_over_ids_p99']}, throughput x{r['text_over_ids_throughput']}"
                f" (target p50 <= x{r['target_text_over_ids_p50']})"]
    if kind == "length":
        return [f"{case:14} text batch 1, short ({r['mean_tokens_per_short_text']} "
                f"tokens) / full ({r['mean_tokens_per_full_text']}): p50 "
                f"{r['short_p50_ms']:.2f} / {r['full_p50_ms']:.2f} ms = "
                f"x{r['short_over_full_p50']}, p99 x{r['short_over_full_p99']} "
                f"(target p50 <= x{r['target_short_over_full_p50']}); CPU per call "
                f"p50 {r['short_cpu_p50_ms']:.2f} / {r['full_cpu_p50_ms']:.2f} ms = "
                f"x{r['short_over_full_cpu_p50']}  load {r['load_avg']}",
                f"{case:14} ids batch 1 of the short sentences padded to 16 only (the "
                f"encoder's floor there): p50 {r['ids_at_16_p50_ms']:.2f} ms, CPU "
                f"{r['ids_at_16_cpu_p50_ms']:.2f} ms"]
    if kind == "parity":
        return [f"{case:14} text vs ids probabilities on {r['texts']} texts: max abs "
                f"diff {r['max_abs_probability_diff']:.2e}; on {r['short_texts']} "
                f"short texts (text at its bucket, ids at full length): "
                f"{r['short_max_abs_probability_diff']:.2e}"]
    return []
