"""The `packing` case of tools/benchmark.py: packed vs unpacked pre-training records.

On a corpus of short documents (paragraphs of CPython's pydoc_data topics, 2-4 sentences,
news-snippet lengths; nothing downloaded) it writes unpacked and packed records
(create_pretraining_data, with and without --pack_sequences) at each sequence length, reports
their real-token fractions, then trains the same model (bert_tiny; same batch of rows, same
machine, both in one process timed in alternating rounds) on each and reports real
tokens/s, instances/s and the packed / unpacked ratio against the targets (>= 3x at 512,
>= 1.6x at 128; records >= 85% real tokens at 512).

This module must not import tools/benchmark.py (run as __main__, importing it again would
define its flags twice): benchmark.py registers WORKERS and passes its worker runner in.
"""

import dataclasses
import json
import os
import statistics
import time

_RESULT_PREFIX = "BENCH_RESULT "
# Targets of issue 14 for real tokens/s packed / unpacked, per sequence length.
TARGETS = {128: 1.6, 512: 3.0}
TARGET_PACKED_FRACTION_512 = 0.85


def _emit(result):
    print(_RESULT_PREFIX + json.dumps(result), flush=True)


def _shapes(quick):
    """Per sequence length: (rows per batch, unpacked max_predictions_per_seq)."""
    if quick:
        return {64: (4, 10), 128: (2, 20)}
    return {128: (32, 20), 512: (8, 80)}


def worker_packing_data(args):
    """Writes the corpus, vocab and the unpacked / packed records of every length."""
    from bert_tf.data.pretraining import create_pretraining_data as cpd
    from bert_tf.data.pretraining import demo_corpus
    from bert_tf.data.pretraining import row_packing
    from bert_tf.fileio import write_text_atomic
    from bert_tf.text import build_vocab, write_vocab

    documents = demo_corpus.short_documents()
    if args["quick"]:
        documents = documents[:60]
    corpus, vocab = os.path.join(args["dir"], "short.txt"), os.path.join(args["dir"], "vocab.txt")
    write_text_atomic(corpus, demo_corpus.format_documents(documents))
    vocab_tokens = build_vocab(corpus, 1000 if args["quick"] else 4000, True)
    write_vocab(vocab_tokens, vocab)
    results = []
    for seq, (_, preds) in sorted((int(k), v) for k, v in args["shapes"].items()):
        row = {"seq": seq, "documents": len(documents)}
        for packed in (False, True):
            options = cpd.PretrainingDataOptions(
                max_seq_length=seq, max_predictions_per_seq=preds, dupe_factor=args["dupe"],
                random_seed=12345, pack_sequences=packed)
            if packed:
                # --pack_sequences' default P per row (tools/create_pretraining_data.py).
                options = dataclasses.replace(
                    options, max_predictions_per_seq=row_packing.
                    default_max_predictions_per_row(seq, options.masked_lm_prob,
                                                    options.instances_per_row))
            path = os.path.join(args["dir"], f"{'packed' if packed else 'unpacked'}-{seq}.tfrecord")
            start = time.perf_counter()
            stats = cpd.create_pretraining_data(corpus, [path], vocab, options=options)
            key = "packed" if packed else "unpacked"
            row.update({f"{key}_rows": stats.rows, f"{key}_real_fraction":
                        round(stats.tokens / (stats.rows * seq), 4),
                        f"{key}_create_s": round(time.perf_counter() - start, 2),
                        f"{key}_preds": options.max_predictions_per_seq})
            row["instances"] = stats.instances
            if packed:
                row["max_instances_per_row"] = options.instances_per_row
        row["instances_per_row"] = round(row["instances"] / row["packed_rows"], 3)
        results.append(row)
    _emit({"vocab_size": len(vocab_tokens), "records": results})


def worker_packing_train(args):
    """Train-step real tokens/s on unpacked and packed records, per sequence length.

    Both configurations live in this one process (two models of the same config and seed)
    and are timed in alternating rounds, so a load change on a shared machine hits both.
    """
    import keras
    import tensorflow as tf

    from bert_tf.config import BertConfig

    config = BertConfig.from_preset(args["model"], vocab_size=args["vocab_size"],
                                    max_position_embeddings=512)
    _emit({"results": [_measure_pair(tf, keras, config, args, shape)
                       for shape in args["shapes"]], "load_avg": round(os.getloadavg()[0], 2)})


def _measure_pair(tf, keras, config, args, shape):
    """The unpacked and packed runs of one shape (seq, batch, preds, paths)."""
    from bert_tf.data.pretraining.record_dataset import pretraining_dataset, record_layout
    from bert_tf.modeling import BertEncoder, BertPretrainer
    from bert_tf.training.optimization import create_optimizer

    seq, batch = shape["seq"], shape["batch"]
    runs = []
    for path in shape["paths"]:
        layout = record_layout(path)
        preds, slots = (layout[1], layout[2]) if layout else (shape["preds"], None)
        ds = pretraining_dataset(path, batch_size=batch, max_seq_length=seq,
                                 max_predictions_per_seq=preds, is_training=False,
                                 max_instances_per_row=slots)
        # Batches are read first, so only the train steps are timed.
        batches = [b for b, _ in zip(ds, range(args["num_batches"]))]
        keras.utils.set_random_seed(0)
        model = BertPretrainer(BertEncoder(config))
        optimizer = create_optimizer(1e-4, 1000, 10)
        model(batches[0])
        optimizer.build(model.trainable_variables)

        def step(features, model=model, optimizer=optimizer):
            with tf.GradientTape() as tape:
                outputs = model(features, training=True)
                loss = model.compute_pretraining_losses(features, outputs)["loss"]
            variables = model.trainable_variables
            optimizer.apply(tape.gradient(loss, variables), variables)
            return loss

        step = tf.function(step, reduce_retracing=True)
        real_tokens = sum(int(tf.reduce_sum(b["input_mask"])) for b in batches)
        instances = (len(batches) * batch if slots is None else
                     sum(int(tf.reduce_sum(b["next_sentence_weights"])) for b in batches))
        runs.append({"path": path, "packed": layout is not None, "preds": preds,
                     "batches": batches, "step": step, "times": [],
                     "real_tokens": real_tokens, "instances": instances})

    def run_all(run):
        for b in run["batches"]:
            loss = run["step"](b)
        return float(loss)

    for run in runs:
        run["final_loss"] = run_all(run)  # traces and warms up
    for _ in range(args["repeats"]):
        for run in runs:
            start = time.perf_counter()
            run["final_loss"] = run_all(run)
            run["times"].append(time.perf_counter() - start)
    results = []
    for run in runs:
        seconds = statistics.median(run["times"])
        steps = len(run["batches"])
        results.append({
            "seq": seq, "packed": run["packed"], "model": args["model"], "batch": batch,
            "preds": run["preds"], "steps": steps, "repeats": args["repeats"],
            "ms_per_step": round(1000 * seconds / steps, 2),
            "real_tokens_per_s": round(run["real_tokens"] / seconds, 1),
            # The fastest round: on a machine shared with other jobs, the least disturbed.
            "real_tokens_per_s_best": round(run["real_tokens"] / min(run["times"]), 1),
            "instances_per_s": round(run["instances"] / seconds, 2),
            "real_fraction_of_batches": round(run["real_tokens"] / (steps * batch * seq), 4),
            "final_loss_finite": run["final_loss"] == run["final_loss"]})
    return results


WORKERS = {"packing_data": worker_packing_data, "packing_train": worker_packing_train}


def case_packing(workdir, quick, run_worker):
    """Runs the case; returns result rows (kind records, train, ratio, or error)."""
    shapes = _shapes(quick)
    directory = os.path.join(workdir, "packing")
    os.makedirs(directory, exist_ok=True)
    data = run_worker("packing_data", {"dir": directory, "quick": quick,
                                       "dupe": 1 if quick else 5,
                                       "shapes": {str(k): v for k, v in shapes.items()}})
    if "error" in data:
        return [{"case": "packing", "kind": "error", **data}]
    rows = [{"case": "packing", "kind": "records", **r} for r in data["records"]]
    model = "bert_tiny"
    result = run_worker("packing_train", {
        "shapes": [{"seq": seq, "batch": batch, "preds": preds,
                    "paths": [os.path.join(directory, f"{kind}-{seq}.tfrecord")
                              for kind in ("unpacked", "packed")]}
                   for seq, (batch, preds) in shapes.items()],
        "model": model, "vocab_size": data["vocab_size"], "num_batches": 2 if quick else 8,
        "repeats": 1 if quick else 7})
    if "error" in result:
        return rows + [{"case": "packing", "kind": "error", **result}]
    for unpacked, packed in result["results"]:
        for r in (unpacked, packed):
            rows.append({"case": "packing", "kind": "train", **r, "load_avg": result["load_avg"]})
        ratio = packed["real_tokens_per_s"] / unpacked["real_tokens_per_s"]
        target = TARGETS.get(packed["seq"])
        rows.append({"case": "packing", "kind": "ratio", "seq": packed["seq"], "model": model,
                     "real_tokens_per_s_ratio": round(ratio, 3),
                     "real_tokens_per_s_ratio_best": round(
                         packed["real_tokens_per_s_best"] / unpacked["real_tokens_per_s_best"],
                         3),
                     "instances_per_s_ratio": round(
                         packed["instances_per_s"] / unpacked["instances_per_s"], 3),
                     "target": target,
                     "meets_target": None if target is None else ratio >= target})
    return rows


def format_row(r):
    """One line of the benchmark table for a packing row."""
    kind = r["kind"]
    if kind == "records":
        return (f"{'packing':14} seq {r['seq']:4} records: real tokens unpacked "
                f"{100 * r['unpacked_real_fraction']:5.1f}%, packed "
                f"{100 * r['packed_real_fraction']:5.1f}% ({r['instances_per_row']} instances "
                f"per row, {r['instances']} instances)")
    if kind == "train":
        return (f"{'packing':14} seq {r['seq']:4} {'packed  ' if r['packed'] else 'unpacked'} "
                f"{r['model']} batch {r['batch']} ({100 * r['real_fraction_of_batches']:5.1f}% "
                f"real): {r['real_tokens_per_s']:9.0f} real tok/s "
                f"{r['instances_per_s']:8.1f} inst/s {r['ms_per_step']:8.1f} ms/step  "
                f"load {r['load_avg']}")
    if kind == "ratio":
        return (f"{'packing':14} seq {r['seq']:4} packed / unpacked real tokens/s = "
                f"x{r['real_tokens_per_s_ratio']} (best rounds x"
                f"{r['real_tokens_per_s_ratio_best']}; target x{r['target']})")
    return f"{'packing':14} ERROR {r.get('error')}"
