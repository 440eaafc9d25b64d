"""The `tokenizer` case of tools/benchmark.py: WordPiece, byte-level BPE and SentencePiece
throughput and parity.

texts/s and tokens/s of WordpieceTokenizer (Python) and BertTokenizerLayer (in-graph) against
the original FullTokenizer (--original_bert_dir), with an id-for-id comparison; HF
`tokenizers` when installed. Then BpeTokenizer (Python) and BpeTokenizerLayer (in-graph) with
the byte-level BPE tokenizer.json of tests/text/fixtures, against HF `tokenizers` on the same
file, and SentencePieceTokenizer / SentencePieceTokenizerLayer with the fixtures' spiece.model
against the `tokenizers` pipeline transformers 5's AlbertTokenizer builds from it
(albert_tokenizer.json.gz), when installed; each on the corpus and on its fixture's mixed texts
(CJK, emoji, whitespace; numbers, quotes and accents for SentencePiece).

This module must not import tools/benchmark.py (run as __main__, importing it again would
define its flags twice): benchmark.py registers WORKERS and passes the flag values in.
"""

import os
import time

from bench_common import emit, load, median_rate, run_worker


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
        seconds, texts_per_s = median_rate(fn, len(texts), warmup=0, repeats=repeats)
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
    emit({"results": results, "parity": parity, "notes": notes, "load_avg": load()})


def worker_tokenizer_subword(args):
    """Byte-level BPE and SentencePiece (ALBERT's recipe) throughput and id parity: Python,
    in-graph and HF tokenizers, in one process (one TensorFlow start-up for both)."""
    import gzip
    import json

    from bert_tf.text import (BpeTokenizer, BpeTokenizerLayer, SentencePieceTokenizer,
                              SentencePieceTokenizerLayer)

    fixtures = os.path.join(args["repo"], "tests", "text", "fixtures")
    results, parity, notes = [], {}, []
    try:
        import tokenizers
    except ImportError:
        tokenizers = None
        notes.append("HF tokenizers: skipped (not installed)")
    corpus = _read_lines(args["corpus"], args["max_texts"])

    def fixture_texts(name):
        with gzip.open(os.path.join(fixtures, name), "rt", encoding="utf-8") as f:
            texts = json.load(f)["texts"]
        return texts[:args["max_texts"]] if args["max_texts"] else texts

    # BPE: the tokenizer.json itself is the HF pipeline.
    tokenizer_json = os.path.join(fixtures, "bpe_tokenizer.json")
    _subword_rows(
        "bpe", {"corpus": corpus, "mixed": fixture_texts("bpe_reference.json.gz")},
        make_python=lambda: BpeTokenizer(tokenizer_json),
        layer=BpeTokenizerLayer(tokenizer_json),
        hf=tokenizers and tokenizers.Tokenizer.from_file(tokenizer_json), args=args,
        results=results, parity=parity)
    # SentencePiece: the fixture model, and the `tokenizers` pipeline transformers' AlbertTokenizer
    # runs on it (tools/make_sentencepiece_reference.py saved it).
    model_file = os.path.join(fixtures, "spiece.model")
    hf = None
    if tokenizers is not None:
        with gzip.open(os.path.join(fixtures, "albert_tokenizer.json.gz"), "rt",
                       encoding="utf-8") as f:
            hf = tokenizers.Tokenizer.from_str(f.read())
    with open(model_file, "rb") as f:
        model_proto = f.read()
    _subword_rows(
        "sentencepiece",
        {"corpus": corpus, "mixed": fixture_texts("sentencepiece_reference.json.gz")},
        make_python=lambda: SentencePieceTokenizer(model_file),
        layer=SentencePieceTokenizerLayer(model_proto), hf=hf, args=args, results=results,
        parity=parity)
    emit({"results": results, "parity": parity, "notes": notes, "load_avg": load()})


def _subword_rows(vocabulary, sets, *, make_python, layer, hf, args, results, parity):
    """Appends to `results` the throughput rows, and adds to `parity` the mismatch counts, of
    one tokenizer kind on each set of texts: its Python tokenizer (`make_python()`, fresh per
    timing: a cold word cache for the warm-up), its layer in a tf.function, and HF
    `tokenizers` (None: skipped)."""
    import tensorflow as tf

    # No autograph, as the serving signatures run the layers: the layer's code has no Python
    # control flow on tensors, and converting it took ~1 s of CPU (not timed) per vocabulary.
    tokenize = tf.function(layer.call, input_signature=[tf.TensorSpec([None], tf.string)],
                           autograph=False)
    batch = args["batch"]
    for set_name, texts in sets.items():
        ours = make_python()
        our_ids = [ours.encode(t) for t in texts]
        num_tokens = sum(len(ids) for ids in our_ids)

        def add(name, fn):
            seconds, texts_per_s = median_rate(fn, len(texts), warmup=1, repeats=args["repeats"])
            results.append({"impl": f"{name} [{set_name}]", "vocabulary": vocabulary,
                            "texts_per_s": round(texts_per_s, 1),
                            "tokens_per_s": round(num_tokens / seconds, 1),
                            "us_per_text": round(1e6 * seconds / len(texts), 1)})

        timed = make_python()
        add(f"bert_tf.{type(timed).__name__} (Python)", lambda: [timed.encode(t) for t in texts])
        batches = [tf.constant(texts[i:i + batch]) for i in range(0, len(texts), batch)]
        graph_ids = [r for b in batches for r in tokenize(b).to_list()]
        add(f"bert_tf.{type(layer).__name__} (in-graph, batch {batch})",
            lambda: [tokenize(b).flat_values.numpy() for b in batches])
        key = f"{vocabulary}_{set_name}"
        parity[f"{key}_texts"] = len(texts)
        parity[f"{key}_in_graph_vs_python_mismatched_texts"] = sum(
            a != b for a, b in zip(graph_ids, our_ids))
        if hf is not None:
            add("HF tokenizers Tokenizer.encode_batch",
                lambda: hf.encode_batch(texts, add_special_tokens=False))
            hf_ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
            parity[f"{key}_python_vs_hf_mismatched_texts"] = sum(
                a != b for a, b in zip(our_ids, hf_ids))


WORKERS = {"tokenizer": worker_tokenizer, "tokenizer_subword": worker_tokenizer_subword}


def case_tokenizer(setup, quick, original_bert_dir=None):
    """Throughput rows per tokenizer, ratios to the original, the id parity row and notes."""
    setup.ensure()
    result = run_worker("tokenizer", {
        "corpus": setup.corpus, "vocab": setup.vocab, "max_texts": 300 if quick else 0,
        "batch": 256, "repeats": 2 if quick else 3, "original_dir": original_bert_dir})
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
    rows.extend(_subword_case_rows(setup, quick))
    return rows


def _subword_case_rows(setup, quick):
    result = run_worker("tokenizer_subword", {
        "corpus": setup.corpus, "repo": os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))), "max_texts": 300 if quick else 0, "batch": 256,
        "repeats": 2 if quick else 3})
    if "error" in result:
        return [{"case": "tokenizer", "kind": "error", **result}]
    rows = [{"case": "tokenizer", "kind": "throughput", "load_avg": result["load_avg"], **r}
            for r in result["results"]]
    for r in rows:  # Ratios to HF tokenizers on the same texts, same kind of tokenizer.
        texts = r["impl"].rsplit("[", 1)[-1]
        hf = [h for h in rows if h["impl"].startswith("HF") and h["impl"].endswith(texts)
              and h["vocabulary"] == r["vocabulary"]]
        if hf:
            r["ratio_vs_hf"] = round(r["texts_per_s"] / hf[0]["texts_per_s"], 3)
    for vocabulary in ("bpe", "sentencepiece"):
        prefix = vocabulary + "_"
        rows.append({"case": "tokenizer", "kind": "parity", "vocabulary": vocabulary,
                     **{k[len(prefix):]: v for k, v in result["parity"].items()
                        if k.startswith(prefix)}})
    rows.extend({"case": "tokenizer", "kind": "note", "note": n} for n in result["notes"])
    return rows


def format_lines(r):
    """The table lines of one tokenizer row (errors and notes aside)."""
    case, kind = r["case"], r.get("kind")
    if kind == "throughput":
        ratio, hf = r.get("ratio_vs_original"), r.get("ratio_vs_hf")
        # BPE and SentencePiece rows (HF's have one name) say which tokenizer they measure.
        impl = f"{r['vocabulary']}: {r['impl']}" if r.get("vocabulary") else r["impl"]
        return [f"{case:14} {impl:48} {r['texts_per_s']:9.0f} texts/s "
                f"{r['tokens_per_s']:10.0f} tok/s" + (f"  x{ratio} original" if ratio else "")
                + (f"  x{hf} HF tokenizers" if hf else "")]
    if kind == "parity":
        counts = ", ".join(f"{k}={v}" for k, v in r.items() if k.endswith("_texts"))
        if "texts" in r:
            return [f"{case:14} parity on {r['texts']} texts: {counts}"]
        names = {"bpe": "BPE", "sentencepiece": "SentencePiece"}
        return [f"{case:14} {names[r['vocabulary']]} parity: {counts}"]
    return []
