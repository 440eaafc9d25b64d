r"""Checks bert_tf's SavedModels on TF Serving's TensorFlow: every export kind, every signature.

TF Serving's newest model server (2.20) links TensorFlow 2.20 and its tensorflow-text ops, while
bert_tf builds and exports with TensorFlow 2.21. The model server itself cannot be installed
here, so this loads the exports in a Python environment with exactly TensorFlow 2.20 and
tensorflow-text 2.20 (a separate venv), in a process that imports only those two, calls every
signature there and in this environment's TensorFlow, and compares the answers.

  python -m venv /opt/tf220
  /opt/tf220/bin/python -m pip install "tensorflow==2.20.*" "tensorflow-text==2.20.*"
  BERT_TF_SERVING_PYTHON=/opt/tf220/bin/python python tools/check_serving_compat.py \
      --output=benchmarks/results/$(date +%F)-serving-compat-tf220.json

The exports (tiny models at random initialisation, written by bert_tf.serving.export as
`bert-tf-export` writes them): with a WordPiece vocabulary (BERT encoder) and with a byte-level
BPE tokenizer.json (the modern encoder: rotary positions, local attention), each of a
single-text classifier, a sentence-pair classifier, a tagger, a SQuAD span model, a fill-mask
pre-trainer, a sentence embedder and an encoder (embeddings). Each signature (serving_default
on ids, serve_text, serve_examples) is called on a batch with an empty text, a text longer than
the sequence length and non-ASCII text. Strings, ids and offsets must be equal and floats
within --atol. The JSON result lists every export and signature with its largest difference,
the versions on both sides and the warnings each side printed while loading; the exit status
is 1 if anything failed or differed.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVING_PYTHON_VARIABLE = "BERT_TF_SERVING_PYTHON"
SEQ_LENGTH = 32
TEXTS = ["The cat sat on the mat.", "", "Ünïcödé café in Paris — 北京 🙂",
         "A long text: " + "the parser reads every token of the module . " * 12,
         "What is a [MASK] statement?"]
PAIRS = ["Where is the cat?", "", "", "a module", "x"]
QUESTIONS = ["Where did the cat sit?", "What does the parser read?", "", "Ünïcödé?",
             "What is it?"]
CONTEXTS = ["The cat sat on the mat.", "The parser reads every token. " * 10, "x", "",
            "A statement ends the line."]
MASKED = ["The [MASK] sat on the mat.", "[MASK] [MASK] module", "", "no mask here",
          "A long text: " + "the parser reads every token . " * 12 + " [MASK]"]
TAGS = ["O", "B-LOC", "I-LOC"]
KINDS = ("classifier", "pair_classifier", "tagging", "squad", "fill_mask",
         "sentence_embedding", "embedding")
TOKENIZERS = ("wordpiece", "bpe")


# ---------------------------------------------------------------------------------------------
# The serving side: runs in either interpreter and imports only TensorFlow and tensorflow-text.

def serve(calls_path, output_path):
    """Loads each export of CALLS.json, calls its signatures, writes the outputs (.npz) and
    the versions, signature lists and loaded bert_tf modules (.json beside it)."""
    import base64

    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tokenizer ops before loading

    with open(calls_path, encoding="utf-8") as f:
        calls = json.load(f)
    models, arrays, report = {}, {}, {"signatures": {}, "errors": {}}
    for call in calls:
        path = call["export_dir"]
        if path not in models:
            models[path] = tf.saved_model.load(path)
            report["signatures"][path] = sorted(models[path].signatures)
        inputs = {}
        for name, (dtype, value) in call["inputs"].items():
            if dtype == "string":
                inputs[name] = tf.constant([v.encode("utf-8") for v in value], tf.string)
            elif dtype == "base64":
                inputs[name] = tf.constant([base64.b64decode(v) for v in value], tf.string)
            else:
                inputs[name] = tf.constant(np.array(value, dtype=dtype))
        try:
            outputs = models[path].signatures[call["signature"]](**inputs)
        except Exception as e:  # noqa: BLE001  reported; the comparison fails it
            report["errors"][call["key"]] = f"{type(e).__name__}: {e}"[:2000]
            continue
        for name, value in outputs.items():
            value = value.numpy()
            if value.dtype == object:
                value = value.astype(bytes)
            arrays[f"{call['key']}/{name}"] = value
    report["tensorflow"] = tf.__version__
    report["tensorflow_text"] = tensorflow_text.__version__
    report["python"] = platform.python_version()
    report["bert_tf_modules"] = sorted(m for m in sys.modules if m.startswith("bert_tf"))
    np.savez(output_path, **arrays)
    with open(output_path + ".json", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)


# ---------------------------------------------------------------------------------------------
# The exporting side: this environment, with bert_tf.

def _corpus(directory):
    from bert_tf.data.pretraining import demo_corpus

    sentences = [s for doc in demo_corpus.pydoc_documents()[:60] for s in doc]
    path = os.path.join(directory, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(sentences + TEXTS + PAIRS + QUESTIONS + CONTEXTS) + "\n")
    return path


def _tokenizer_file(name, directory):
    """A vocab.txt ("wordpiece") or a tokenizer.json ("bpe") learned on pydoc prose."""
    from bert_tf.text import bpe_trainer, build_vocab, write_vocab

    corpus = _corpus(directory)
    if name == "wordpiece":
        path = os.path.join(directory, "vocab.txt")
        write_vocab(build_vocab(corpus, 600, do_lower_case=True), path)
    else:
        path = os.path.join(directory, "tokenizer.json")
        bpe_trainer.write_tokenizer_json(bpe_trainer.build_bpe_tokenizer(corpus, 500), path)
    return path


def _model(kind, tokenizer_name):
    import bert_tf
    from bert_tf.config import BertConfig, ModernBertConfig

    if tokenizer_name == "bpe":
        config = ModernBertConfig.from_preset("modernbert_tiny", vocab_size=512)
    else:
        config = BertConfig(vocab_size=640, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64,
                            max_position_embeddings=64)
    encoder = bert_tf.build_encoder(config)
    if kind in ("classifier", "pair_classifier"):
        return bert_tf.BertClassifier(encoder, num_classes=3)
    if kind == "tagging":
        return bert_tf.BertTokenClassifier(encoder, num_classes=len(TAGS))
    if kind == "squad":
        return bert_tf.BertSpanLabeler(encoder)
    if kind == "fill_mask":
        return bert_tf.BertPretrainer(encoder,
                                      use_next_sentence_label=config.architecture == "bert")
    if kind == "sentence_embedding":
        return bert_tf.BertSentenceEmbedder(encoder)
    return encoder


def _export(kind, tokenizer_name, tokenizer_file, export_dir):
    import keras

    from bert_tf import serving
    from bert_tf.text import load_tokenizer

    keras.utils.set_random_seed(len(kind) + len(tokenizer_name))
    options = {"classifier": dict(labels=["negative", "neutral", "positive"]),
               "pair_classifier": dict(labels=["negative", "neutral", "positive"],
                                       text_pair=True),
               "tagging": dict(labels=TAGS),
               "squad": dict(max_query_length=8, doc_stride=8),
               "fill_mask": dict(top_k=3)}.get(kind, {})
    tokenizer = load_tokenizer(tokenizer_file, do_lower_case=tokenizer_name == "wordpiece" or None)
    serving.export(_model(kind, tokenizer_name), export_dir, tokenizer=tokenizer,
                   max_seq_length=SEQ_LENGTH, **options)


def _text_inputs(kind):
    if kind == "pair_classifier":
        return {"text": TEXTS, "text_pair": PAIRS}
    if kind == "squad":
        return {"question": QUESTIONS, "context": CONTEXTS}
    if kind == "fill_mask":
        return {"text": MASKED}
    return {"text": TEXTS}


def _examples(inputs):
    import base64

    import tensorflow as tf

    rows = []
    for i in range(len(next(iter(inputs.values())))):
        feature = {name: tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[values[i].encode("utf-8")])) for name, values in inputs.items()}
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        rows.append(base64.b64encode(example.SerializeToString()).decode("ascii"))
    return rows


def _calls(kind, key, export_dir):
    ids = [[2, 7, 9, 11, 3, 0, 0], [2, 12, 3, 0, 0, 0, 0]]
    id_inputs = {"input_word_ids": ["int32", ids],
                 "input_mask": ["int32", [[int(t > 0) for t in row] for row in ids]],
                 "input_type_ids": ["int32", [[0] * len(ids[0])] * 2],
                 "masked_lm_positions": ["int32", [[1, 2], [1, 0]]]}
    with open(os.path.join(export_dir, "assets.extra", "bert_tf_export.json"),
              encoding="utf-8") as f:
        id_names = json.load(f)["signatures"]["serving_default"]
    id_inputs = {name: id_inputs[name] for name in id_names}
    text = _text_inputs(kind)
    return [
        {"key": f"{key}/serving_default", "export_dir": export_dir,
         "signature": "serving_default", "inputs": id_inputs},
        {"key": f"{key}/serve_text", "export_dir": export_dir, "signature": "serve_text",
         "inputs": {name: ["string", values] for name, values in text.items()}},
        {"key": f"{key}/serve_examples", "export_dir": export_dir,
         "signature": "serve_examples", "inputs": {"examples": ["base64", _examples(text)]}},
    ]


def _run_serving(python, calls_path, output_path):
    """Runs `serve` under `python` without bert_tf on its path; returns its stderr lines."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "2")
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import check_serving_compat as c; c.serve(sys.argv[1], sys.argv[2])")
    proc = subprocess.run([python, "-c", code, calls_path, output_path], capture_output=True,
                          text=True, env=env, cwd=os.path.dirname(calls_path), timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{python} failed to serve the exports:\n{proc.stderr[-4000:]}")
    return proc.stderr.splitlines()


def _compare(reference, target, atol):
    """{call key: {"outputs": n, "max_abs_diff": float, "equal": bool, "problems": [...]}}."""
    import numpy as np

    results = {}
    for name in sorted(set(reference) | set(target)):
        key, output = name.rsplit("/", 1)
        entry = results.setdefault(key, {"outputs": 0, "max_abs_diff": 0.0, "equal": True,
                                         "problems": []})
        entry["outputs"] += 1
        if name not in reference or name not in target:
            entry["problems"].append(f"{output}: only in "
                                     f"{'the reference' if name in reference else 'the target'}")
            continue
        a, b = reference[name], target[name]
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            entry["problems"].append(f"{output}: {a.dtype}{list(a.shape)} vs "
                                     f"{b.dtype}{list(b.shape)}")
        elif a.dtype.kind == "f":
            diff = float(np.max(np.abs(a - b))) if a.size else 0.0
            entry["max_abs_diff"] = max(entry["max_abs_diff"], diff)
            if not diff <= atol:
                entry["problems"].append(f"{output}: differs by {diff:.3g} > {atol}")
        elif not np.array_equal(a, b):
            entry["problems"].append(f"{output}: values differ")
    for entry in results.values():
        entry["equal"] = not entry["problems"]
    return results


def _load_warnings(lines):
    """The distinct warning lines a serving process printed, with their counts."""
    counts = {}
    for line in lines:
        if "WARNING" in line or line[:1] in ("W", "E") and line[1:5].isdigit():
            text = line.split("] ", 1)[-1] if "] " in line else line
            if "unsaved custom gradients" in text:
                text = "Importing a function (...) with ops with unsaved custom gradients."
            counts[text] = counts.get(text, 0) + 1
    return [{"line": text, "count": n} for text, n in sorted(counts.items())]


def _machine():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30).stdout
        model = next(l.split(":", 1)[1].strip() for l in out.splitlines()
                     if l.startswith("Model name"))
        return f"{os.cpu_count()}-core {model}"
    except (OSError, StopIteration, subprocess.SubprocessError):
        return platform.processor() or platform.machine()


def check(serving_python, output, kinds=KINDS, tokenizers=TOKENIZERS, atol=1e-5):
    """Exports every kind, serves it in both interpreters, compares; returns the result dict."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="serving_compat_") as root:
        calls, exports = [], {}
        for tokenizer_name in tokenizers:
            tokenizer_file = _tokenizer_file(tokenizer_name, root)
            for kind in kinds:
                key = f"{tokenizer_name}/{kind}"
                export_dir = os.path.join(root, "exports", tokenizer_name, kind, "1")
                _export(kind, tokenizer_name, tokenizer_file, export_dir)
                exports[key] = export_dir
                calls += _calls(kind, key, export_dir)
        calls_path = os.path.join(root, "calls.json")
        with open(calls_path, "w", encoding="utf-8") as f:
            json.dump(calls, f)
        sides = {}
        for side, python in (("reference", sys.executable), ("target", serving_python)):
            output_path = os.path.join(root, f"{side}.npz")
            stderr = _run_serving(python, calls_path, output_path)
            with open(output_path + ".json", encoding="utf-8") as f:
                report = json.load(f)
            with np.load(output_path) as arrays:
                sides[side] = dict(report, arrays={k: arrays[k] for k in arrays.files},
                                   warnings=_load_warnings(stderr))
    comparison = _compare(sides["reference"]["arrays"], sides["target"]["arrays"], atol)
    for side in sides.values():
        for key, error in side["errors"].items():
            comparison.setdefault(key, {"outputs": 0, "max_abs_diff": 0.0, "problems": []})
            comparison[key]["problems"].append(f"error: {error}")
            comparison[key]["equal"] = False
    result = {
        "case": "serving_compat",
        "command": "python tools/check_serving_compat.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "machine": _machine(),
        "atol": atol,
        "sides": {name: {k: side[k] for k in ("tensorflow", "tensorflow_text", "python",
                                               "bert_tf_modules", "warnings")}
                  for name, side in sides.items()},
        "exports": {key: {"signatures": sides["target"]["signatures"][path],
                          "calls": {c["key"].rsplit("/", 1)[1]: comparison[c["key"]]
                                    for c in calls if c["export_dir"] == path}}
                    for key, path in exports.items()},
    }
    result["ok"] = (all(c["equal"] for c in comparison.values())
                    and not any(side["bert_tf_modules"] for side in sides.values()))
    result["summary"] = (
        f"{len(exports)} exports, {len(calls)} signature calls: "
        f"{sum(c['equal'] for c in comparison.values())} equal in TensorFlow "
        f"{sides['target']['tensorflow']} (tensorflow-text {sides['target']['tensorflow_text']}) "
        f"and {sides['reference']['tensorflow']} "
        f"(tensorflow-text {sides['reference']['tensorflow_text']}); largest float difference "
        f"{max(c['max_abs_diff'] for c in comparison.values()):.3g}")
    if output:
        with open(output, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2, ensure_ascii=False)
            f.write("\n")
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serving_python", default=os.environ.get(SERVING_PYTHON_VARIABLE),
                        help=f"the Python of the TensorFlow 2.20 environment (default: "
                             f"${SERVING_PYTHON_VARIABLE})")
    parser.add_argument("--output", help="where to write the JSON result")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--tokenizers", default=",".join(TOKENIZERS))
    parser.add_argument("--atol", type=float, default=1e-5)
    args = parser.parse_args()
    if not args.serving_python:
        parser.error(f"set {SERVING_PYTHON_VARIABLE} (or --serving_python) to the Python of an "
                     "environment with TensorFlow 2.20 and tensorflow-text 2.20")
    unknown = set(args.kinds.split(",")) - set(KINDS) | set(args.tokenizers.split(",")) - set(
        TOKENIZERS)
    if unknown:
        parser.error(f"unknown kinds or tokenizers: {sorted(unknown)}")
    sys.path.insert(0, REPO)
    from bert_tf.quiet_logs import quiet_tensorflow_startup

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    quiet_tensorflow_startup()
    result = check(args.serving_python, args.output, args.kinds.split(","),
                   args.tokenizers.split(","), args.atol)
    print(result["summary"])
    for key, export in result["exports"].items():
        for signature, call in export["calls"].items():
            for problem in call["problems"]:
                print(f"{key} {signature}: {problem}")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
