"""The `input_pipeline` case of tools/benchmark.py: input sequences/s against a train step.

Sequences/s of pretraining_dataset (TFRecords) and text_pretraining_dataset (dynamic masking)
against the consumption rate of the largest bert_tf train step the pretrain case measured.

This module must not import tools/benchmark.py (run as __main__, importing it again would
define its flags twice): benchmark.py registers WORKERS and passes the flag values in.
"""

import os

from bench_common import emit, load, median_rate, run_worker


def worker_input_pipeline(args):
    """Sequences/s of the TFRecord reader and of the dynamic-masking text pipeline."""
    from bert_tf.data.pretraining import create_pretraining_data as cpd
    from bert_tf.data import pretraining_dataset
    from bert_tf.data import text_pretraining_dataset
    from bert_tf.data.pretraining.masking_recipe import MaskingRecipe

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
            recipe=MaskingRecipe(max_seq_length=seq, max_predictions_per_seq=preds), seed=1,
            is_training=True),
    }
    results = []
    for name, make in pipelines.items():
        iterator = iter(make().repeat())
        num_batches = args["batches"]

        def consume():
            for _ in range(num_batches):
                next(iterator)

        _, batches_per_s = median_rate(consume, num_batches, warmup=1,
                                        repeats=args["repeats"])
        results.append({"impl": name, "sequences_per_s": round(batches_per_s * batch, 1)})
    emit({"results": results, "load_avg": load()})


WORKERS = {"input_pipeline": worker_input_pipeline}


def case_input_pipeline(setup, quick, pretrain_rows):
    """Rows per pipeline, with the ratio to the fastest bert_tf train step in pretrain_rows."""
    setup.ensure()
    shape = dict(batch=4, seq=32, preds=5) if quick else dict(batch=32, seq=128, preds=20)
    result = run_worker("input_pipeline", dict(
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


def format_lines(r):
    """The table lines of one input_pipeline row (errors and notes aside)."""
    if r.get("kind") != "throughput":
        return []
    extra = (f"  x{r['ratio_vs_train_step']} of {r['train_step_model']} step"
             if "ratio_vs_train_step" in r else "")
    return [f"{r['case']:14} {r['impl']:44} {r['sequences_per_s']:9.0f} seq/s{extra}"]
