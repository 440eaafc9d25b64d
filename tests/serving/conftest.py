"""The exports the bert_tf.serving tests share, made once per test session.

`serving_run` trains a tiny model of every type for a few steps, saves it as .keras, exports
it with every signature (the pre-trained one with tools/export_saved_model.py from a
run_pretraining-style directory, the others with bert_tf.serving.export), moves the whole
export tree elsewhere (the exports must not depend on where they were written), and runs all
signature calls in one fresh process that imports only tensorflow and tensorflow_text
(serving_client.py). The test modules compare those
outputs with the Keras models and the Python tokenizer.

Under pytest-xdist the workers share one copy: the first to arrive builds it under a file
lock in the session's common temporary directory, the others read it.
"""

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import serving
from bert_tf.modeling import (BertClassifier, BertEncoder, BertPretrainer, BertSpanLabeler,
                              BertTokenClassifier)
from bert_tf.text.layers import BertTokenizerLayer

import serving_cases as cases
import zygote

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_client.py")
TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools", "export_saved_model.py")


def _train_briefly(model, features, labels):
    """Two optimizer steps, so the export sees a trained, compiled model (eagerly: tracing a
    train step would cost more than the steps)."""
    model.compile(optimizer=keras.optimizers.Adam(1e-2), run_eagerly=True)
    model.fit(features, labels, batch_size=4, epochs=1, verbose=0)


def _build_models(tok):
    keras.utils.set_random_seed(1)
    config = cases.tiny_config()
    texts = cases.TEXTS[:4] * 2
    features = cases.pack_batch(tok, [tok.encode(t) for t in texts])
    batch = len(texts)
    rng = np.random.default_rng(0)

    pretrainer = BertPretrainer(BertEncoder(config))
    positions = np.tile(np.arange(1, 5, dtype=np.int32), [batch, 1])
    pretrain_features = dict(features, masked_lm_positions=positions,
                             masked_lm_ids=rng.integers(5, len(cases.VOCAB), size=(batch, 4)),
                             masked_lm_weights=np.ones((batch, 4), np.float32),
                             next_sentence_labels=rng.integers(0, 2, size=batch))
    _train_briefly(pretrainer, pretrain_features, None)

    classifier = BertClassifier(BertEncoder(config), num_classes=3)
    _train_briefly(classifier, features, rng.integers(0, 3, size=batch))
    squad = BertSpanLabeler(BertEncoder(config))
    _train_briefly(squad, features, {"start_logits": rng.integers(1, 8, size=batch),
                                     "end_logits": rng.integers(8, 12, size=batch)})
    tagging = BertTokenClassifier(BertEncoder(config), num_classes=len(cases.TAGS))
    _train_briefly(tagging, features,
                   rng.integers(0, len(cases.TAGS), size=(batch, cases.SEQ_LENGTH)))
    return {"classifier": classifier, "squad": squad,
            "tagging": tagging, "fill_mask": pretrainer, "embedding": pretrainer.encoder}


EXPORT_OPTIONS = {
    "classifier": dict(labels=cases.CLASS_LABELS, text_pair=True),
    "squad": dict(max_query_length=cases.MAX_QUERY_LENGTH,
                  max_answer_length=cases.MAX_ANSWER_LENGTH, doc_stride=cases.DOC_STRIDE),
    "tagging": dict(labels=cases.TAGS, length_buckets=cases.TAGGING_LENGTH_BUCKETS),
    "embedding": {},
}


def _examples(inputs):
    """Serialized tf.Examples of the text inputs; text_pair is left out where it is empty."""
    batch = len(next(iter(inputs.values())))
    serialized = []
    for i in range(batch):
        feature = {name: tf.train.Feature(bytes_list=tf.train.BytesList(
            value=[values[i].encode("utf-8")])) for name, values in inputs.items()
            if not (name == "text_pair" and not values[i])}
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        serialized.append(base64.b64encode(example.SerializeToString()).decode("ascii"))
    return serialized


def _calls(tok, export_dirs):
    calls = []
    for kind in cases.KINDS:
        export_dir = export_dirs[kind]
        ids = cases.ids_inputs(tok, kind)
        calls.append({"key": f"{kind}/ids", "export_dir": export_dir,
                      "signature": "serving_default",
                      "inputs": {k: {"dtype": "int32", "value": v.tolist()}
                                 for k, v in ids.items()}})
        inputs = cases.text_inputs(kind)
        calls.append({"key": f"{kind}/text", "export_dir": export_dir,
                      "signature": "serve_text",
                      "inputs": {k: {"dtype": "string", "value": v} for k, v in inputs.items()}})
        calls.append({"key": f"{kind}/text_short", "export_dir": export_dir,
                      "signature": "serve_text",
                      "inputs": {k: {"dtype": "string", "value": v}
                                 for k, v in cases.text_inputs(kind, "text_short").items()}})
        if kind in ("squad", "tagging"):
            calls.append({"key": f"{kind}/text_unicode", "export_dir": export_dir,
                          "signature": "serve_text",
                          "inputs": {k: {"dtype": "string", "value": v} for k, v in
                                     cases.text_inputs(kind, "text_unicode").items()}})
        calls.append({"key": f"{kind}/text_one", "export_dir": export_dir,
                      "signature": "serve_text",
                      "inputs": {k: {"dtype": "string", "value": v[:1]}
                                 for k, v in inputs.items()}})
        calls.append({"key": f"{kind}/text_empty", "export_dir": export_dir,
                      "signature": "serve_text",
                      "inputs": {k: {"dtype": "string", "value": []} for k in inputs}})
        calls.append({"key": f"{kind}/examples", "export_dir": export_dir,
                      "signature": "serve_examples",
                      "inputs": {"examples": {"dtype": "base64", "value": _examples(inputs)}}})
    rest = [{"key": key, "export_dir": export_dirs[kind], "request": request}
            for key, (kind, request) in cases.REST_REQUESTS.items()]
    bad = [{"key": key, "export_dir": export_dirs[kind], "signature": signature,
            "inputs": {k: {"dtype": "int32" if signature == "serving_default" else "string",
                           "value": v} for k, v in inputs.items()}}
           for key, (kind, signature, inputs, _) in cases.BAD_CALLS.items()]
    return {"calls": calls, "rest": rest, "bad": bad}


class ServingRun:
    """The shared exports and what the fresh process answered.

    Attributes:
      root: the directory of it all.
      export_dirs: kind -> export version directory (after the move).
      moved_from: kind -> where it was written first (gone now).
      model_files: kind -> the trained model's .keras file.
      pretraining_run: a run_pretraining output directory with the fill-mask and embedding
        models, which tools/export_saved_model.py exported for the fill_mask kind.
      tool_stdout: what the tool printed.
      outputs: dict "<kind>/<call>/<output>" -> numpy array.
      report: serving_client.py's JSON report (REST responses, signature specs, modules).
    """

    def __init__(self, root):
        self.root = root
        with open(os.path.join(root, "run.json"), encoding="utf-8") as f:
            values = json.load(f)
        self.export_dirs = values["export_dirs"]
        self.moved_from = values["moved_from"]
        self.model_files = values["model_files"]
        self.pretraining_run = values["pretraining_run"]
        self.tool_stdout = values["tool_stdout"]
        with np.load(os.path.join(root, "client.npz")) as arrays:
            self.outputs = dict(arrays)
        with open(os.path.join(root, "client.json"), encoding="utf-8") as f:
            self.report = json.load(f)
        self._models = {}

    def model(self, kind):
        if kind not in self._models:
            self._models[kind] = keras.saving.load_model(self.model_files[kind],
                                                         compile=False)
        return self._models[kind]

    def output(self, kind, call):
        prefix = f"{kind}/{call}/"
        return {k[len(prefix):]: v for k, v in self.outputs.items() if k.startswith(prefix)}


def _vocabulary_argument(kind, tok):
    """The three ways to give export the vocabulary: tokens, a Python or an in-graph tokenizer."""
    if kind == "classifier":
        return {"tokenizer": tok}
    if kind == "embedding":
        return {"tokenizer": BertTokenizerLayer(cases.VOCAB)}
    return {"vocab_file": cases.VOCAB}


def _write_pretraining_run(directory, models):
    """What run_pretraining leaves in --output_dir, for the tiny pre-trained model."""
    os.makedirs(directory)
    models["fill_mask"].save(os.path.join(directory, "pretrainer.keras"))
    models["embedding"].save(os.path.join(directory, "encoder.keras"))
    cases.tiny_config().to_json_file(os.path.join(directory, "bert_config.json"))
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in cases.VOCAB))
    with open(os.path.join(directory, "run_pretraining.flags"), "w", encoding="utf-8") as f:
        f.write(f"--bert_config_file=bert_config.json\n--do_lower_case\n"
                f"--max_seq_length={cases.SEQ_LENGTH}\n--max_predictions_per_seq=4\n")


def _build(root):
    tok = cases.python_tokenizer()
    models = _build_models(tok)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    pretraining_run = os.path.join(root, "pretraining_run")
    _write_pretraining_run(pretraining_run, models)
    model_files = {"fill_mask": os.path.join(pretraining_run, "pretrainer.keras"),
                   "embedding": os.path.join(pretraining_run, "encoder.keras")}
    written = {kind: os.path.join(root, "written", kind, "1") for kind in cases.KINDS}
    # The fill-mask export is the command-line tool's, from the pre-training run directory
    # (casing and length from its flagfile); it runs while the others export here.
    tool = subprocess.Popen(
        [zygote.shared_python(), TOOL, f"--model_dir={pretraining_run}",
         f"--export_dir={written['fill_mask']}", f"--top_k={cases.TOP_K}",
         f"--length_buckets={cases.TOOL_LENGTH_BUCKETS}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    os.makedirs(os.path.join(root, "models"))
    for kind, model in models.items():
        if kind in model_files:
            continue
        model_files[kind] = os.path.join(root, "models", f"{kind}.keras")
        model.save(model_files[kind])
    for kind, model in models.items():
        if kind != "fill_mask":
            serving.export(model, written[kind], max_seq_length=cases.SEQ_LENGTH,
                           **EXPORT_OPTIONS[kind], **_vocabulary_argument(kind, tok))
    tool_stdout, tool_stderr = tool.communicate()
    if tool.returncode != 0:
        raise RuntimeError(f"export_saved_model.py failed:\n{tool_stderr[-5000:]}")
    shutil.move(os.path.join(root, "written"), os.path.join(root, "exports"))
    export_dirs = {kind: os.path.join(root, "exports", kind, "1") for kind in cases.KINDS}
    with open(os.path.join(root, "calls.json"), "w", encoding="utf-8") as f:
        json.dump(_calls(tok, export_dirs), f, ensure_ascii=False)
    result = subprocess.run([sys.executable, CLIENT, os.path.join(root, "calls.json"),
                             os.path.join(root, "client")], capture_output=True, text=True,
                            cwd=root, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"serving_client.py failed:\n{result.stderr[-5000:]}")
    with open(os.path.join(root, "client_stderr.txt"), "w", encoding="utf-8") as f:
        f.write(result.stderr)
    with open(os.path.join(root, "run.json"), "w", encoding="utf-8") as f:
        json.dump({"export_dirs": export_dirs, "moved_from": written,
                   "model_files": model_files, "pretraining_run": pretraining_run,
                   "tool_stdout": tool_stdout}, f)


@pytest.fixture(scope="session")
def serving_run(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # Shared by the workers of this session.
    root = os.path.join(str(base), "bert_tf_serving_run")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(str(base), "bert_tf_serving_run.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not os.path.exists(os.path.join(root, "run.json")):
                shutil.rmtree(root)
                os.makedirs(root)
                _build(root)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return ServingRun(root)


@pytest.fixture(scope="session")
def python_tok():
    return cases.python_tokenizer()
