"""The modernbert case of tools/benchmark.py: the modern encoder against Hugging Face
ModernBERT (PyTorch, SDPA) on the same config, and the local layers' cost against length.

Rows (float32, batch 1 forwards; --quick: modernbert_tiny and shorter inputs):
  forward      latency and peak RSS of a ModernBertModel-shaped forward at 512 and 8,192
               tokens: bert_tf ModernBertEncoder (a tf.function, oneDNN, no XLA) vs transformers'
               ModernBertModel with SDPA attention under --torch_python.
  train        one MLM training step at 512 tokens (batch 2, 30% = 153 predicted positions,
               AdamW, clipping): bert_tf BertPretrainer with the run_pretraining loop's
               gradient function and AdamWeightDecay vs ModernBertForMaskedLM with
               sparse_prediction (logits at the labelled positions only) and torch AdamW.
  local_layer  one local (sliding-window) block alone at 1,024 and 8,192 tokens: time and the
               growth of peak RSS over the built layer; the 8k/1k ratios show the linear cost
               (x8 or less is linear), beside a global block's.
Every measurement runs in its own process, so peak RSS is that of one model and one length.
"""

import json
import os
import resource
import time

from bench_common import SCRIPTS, emit, load, median_rate, print_row, run_command, run_worker

_PRESET = {"base": "modernbert_base", "tiny": "modernbert_tiny"}


def _peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _config(model, seq):
    from bert_tf.config import ModernBertConfig
    return ModernBertConfig.from_preset(_PRESET[model], max_position_embeddings=max(seq, 8192))


def _hf_config(config):
    return dict(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                intermediate_size=config.intermediate_size,
                num_hidden_layers=config.num_hidden_layers,
                num_attention_heads=config.num_attention_heads,
                max_position_embeddings=config.max_position_embeddings,
                local_attention=config.local_attention_window,
                global_attn_every_n_layers=config.global_attn_every_n_layers,
                pad_token_id=0, bos_token_id=1, cls_token_id=1, eos_token_id=2, sep_token_id=2)


def worker_modernbert(args):
    """One bert_tf measurement: forward, train or local_layer (see the module docstring)."""
    import tensorflow as tf
    from bert_tf.modeling import BertPretrainer, ModernBertEncoder
    from bert_tf.modeling.modern_block import ModernTransformerBlock

    mode, seq, batch = args["mode"], args["seq"], args["batch"]
    config = _config(args["model"], seq)
    ids = tf.random.stateless_uniform([batch, seq], [0, 1], 5, config.vocab_size, tf.int32)
    features = {"input_word_ids": ids, "input_mask": tf.ones_like(ids),
                "input_type_ids": tf.zeros_like(ids)}
    if mode == "forward":
        encoder = ModernBertEncoder(config)
        run = tf.function(lambda x: encoder(x)["sequence_output"])
        call = lambda: run(features).numpy()  # noqa: E731
    elif mode == "train":
        from bert_tf.training import optimization, tf_runner
        preds = args["preds"]
        model = BertPretrainer(ModernBertEncoder(config), use_next_sentence_label=False)
        positions = tf.sort(tf.stack([tf.random.shuffle(tf.range(1, seq), seed=i)[:preds]
                                      for i in range(batch)]), axis=-1)
        features.update(masked_lm_positions=tf.cast(positions, tf.int32),
                        masked_lm_ids=tf.random.stateless_uniform(
                            [batch, preds], [0, 2], 5, config.vocab_size, tf.int32),
                        masked_lm_weights=tf.ones([batch, preds]))
        optimizer = optimization.create_optimizer(1e-4, 10_000, 100)

        def loss_fn(model, batch_features, training):
            return model.compute_pretraining_losses(
                batch_features, model(batch_features, training=training))

        grad_fn = tf_runner._make_grad_fn(model, loss_fn, False)
        model(features)
        variables = model.trainable_variables
        optimizer.build(variables)

        @tf.function
        def step():
            parts, grads = grad_fn(features)
            optimizer.apply(grads, variables)
            return parts["loss"]

        call = lambda: step().numpy()  # noqa: E731
    else:
        local = args["layer"] == "local"
        block = ModernTransformerBlock(
            config.hidden_size, config.num_attention_heads, config.intermediate_size,
            hidden_act=config.hidden_act, local_window=config.local_attention_window if local
            else 0, rope_theta=config.local_rope_theta)
        hidden = tf.random.stateless_normal([batch, seq, config.hidden_size], [0, 3])
        mask = tf.ones([batch, seq], tf.int32)
        positions = tf.range(seq)[tf.newaxis]
        block.build()
        run = tf.function(lambda h: block(h, mask, positions))
        call = lambda: run(hidden).numpy()  # noqa: E731
    built_mb = _peak_mb()
    start = time.perf_counter()
    call()
    first_s = time.perf_counter() - start
    first_mb = _peak_mb()
    seconds, _ = median_rate(call, 1, warmup=args["warmup"], repeats=args["repeats"])
    emit({"impl": "bert_tf", "mode": mode, "layer": args.get("layer"), "batch": batch,
          "seq": seq, "ms": round(1000 * seconds, 1), "first_call_s": round(first_s, 1),
          "peak_rss_mb": round(_peak_mb(), 1), "model_rss_mb": round(built_mb, 1),
          "first_call_growth_mb": round(first_mb - built_mb, 1), "load_avg": load()})


WORKERS = {"modernbert": worker_modernbert}


def _hf(python, mode, model, seq, batch, preds, warmup, repeats):
    args = dict(mode=mode, config=_hf_config(_config(model, seq)), batch=batch, seq=seq,
                preds=preds, warmup=warmup, repeats=repeats)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return run_command("hf_modernbert", [python, os.path.join(SCRIPTS, "hf_modernbert.py"),
                                         json.dumps(args)], env, timeout=3600)


def case_modernbert(quick, torch_python):
    """Rows of the modernbert case (see the module docstring)."""
    model = "tiny" if quick else "base"
    long = 2048 if quick else 8192
    rows = []

    def add(row, **extra):
        row = {"case": "modernbert", "model": _PRESET[model], **extra, **row}
        print_row(row)
        rows.append(row)
        return row

    pairs = {}
    for mode, seq, batch, repeats in (("forward", 512, 1, 5), ("forward", long, 1, 2),
                                      ("train", 512, 2, 3)):
        preds = int(0.3 * seq)
        ours = add(run_worker("modernbert", dict(mode=mode, model=model, seq=seq, batch=batch,
                                                 preds=preds, warmup=1, repeats=repeats)),
                   kind=mode)
        if torch_python:
            theirs = add(_hf(torch_python, mode, model, seq, batch, preds, 1, repeats),
                         kind=mode)
            pairs[(mode, seq)] = (ours, theirs)
    for (mode, seq), (ours, theirs) in pairs.items():
        if "ms" in ours and "ms" in theirs:
            add({"bert_tf_ms": ours["ms"], "hf_ms": theirs["ms"],
                 "speed_vs_hf": round(theirs["ms"] / ours["ms"], 2),
                 "peak_rss_mb": {"bert_tf": ours["peak_rss_mb"], "hf": theirs["peak_rss_mb"]}},
                kind="ratio", mode=mode, seq=seq)
    if not torch_python:
        add({"note": "no --torch_python with torch + transformers: Hugging Face rows skipped"},
            kind="note")
    short = 1024 if not quick else 256
    for layer in ("local", "global"):
        timings = {}
        for seq in (short, 8 * short):
            row = add(run_worker("modernbert", dict(mode="local_layer", layer=layer,
                                                    model=model, seq=seq, batch=1, warmup=1,
                                                    repeats=3)), kind="local_layer")
            timings[seq] = row
        a, b = timings[short], timings[8 * short]
        if "ms" in a and "ms" in b:
            add({"layer": layer, "time_ratio_8x": round(b["ms"] / a["ms"], 2),
                 "memory_ratio_8x": round(max(b["first_call_growth_mb"], 1.0)
                                          / max(a["first_call_growth_mb"], 1.0), 2)},
                kind="scaling", seqs=[short, 8 * short])
    return rows


def format_lines(r):
    kind = r.get("kind")
    if kind == "ratio":
        return [f"modernbert     {r['mode']:7} seq {r['seq']:5}: bert_tf {r['bert_tf_ms']} ms, "
                f"HF SDPA {r['hf_ms']} ms, speed x{r['speed_vs_hf']}, peak RSS MB "
                f"{r['peak_rss_mb']}"]
    if kind == "scaling":
        return [f"modernbert     {r['layer']} layer {r['seqs'][0]} -> {r['seqs'][1]} tokens: "
                f"time x{r['time_ratio_8x']}, memory x{r['memory_ratio_8x']}"]
    if "ms" in r:
        return [f"modernbert     {r['impl']:8} {r.get('mode')} {r.get('layer') or ''} seq "
                f"{r['seq']}: {r['ms']} ms, peak RSS {r['peak_rss_mb']} MB"]
    return []
