"""Serving a LiteRT export on CPU from Python: `LiteRTModel(path).predict(["text", ...])`.

The model runs in TensorFlow's LiteRT interpreter with TensorFlow Text's kernels registered and
the XNNPACK delegate (float32, float16 and int8 models alike); nothing else is imported.
"""

import json
import os
import threading

import numpy as np

from bert_tf.serving import litert


class LiteRTModel:
    """A model.tflite written by `bert-tf-export --format=litert`, ready to answer texts.

    Safe to share between threads: calls run one at a time (a LiteRT interpreter runs one
    request at once; two at a time crash it). For requests in parallel, give each worker thread
    its own LiteRTModel (the file is memory-mapped, so the weights are not loaded twice).

    Args:
      path: the .tflite file, or the export directory holding model.tflite.
      num_threads: CPU threads (XNNPACK and the builtin kernels).

    Attributes:
      signatures: signature name -> {"inputs": [...], "outputs": [...]}.
      info: what bert_tf_litert.json beside the model records (task, labels, quantize, ...),
        or {}.

    Examples:

    >>> model = LiteRTModel("EXPORT")  # doctest: +SKIP
    >>> model.predict(["a gripping, funny film"])["predicted_label"]  # doctest: +SKIP
    array([b'positive'], dtype=object)
    """

    def __init__(self, path, num_threads=2):
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, litert.MODEL_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"LiteRTModel: {path}: no such .tflite file.")
        self.path = path
        self._interpreter = litert.interpreter(path, num_threads=num_threads)
        self.signatures = self._interpreter.get_signature_list()
        self._runners = {}
        self._lock = threading.Lock()
        info_path = os.path.join(os.path.dirname(path), litert.INFO_FILE)
        self.info = {}
        if os.path.isfile(info_path):
            with open(info_path, encoding="utf-8") as f:
                self.info = json.load(f)

    def _check_signature(self, name):
        if name not in self.signatures:
            raise ValueError(f"LiteRTModel: {self.path} has no {name} signature (it has "
                             f"{', '.join(sorted(self.signatures))}).")

    def _runner(self, name):
        """The signature's runner (created on first use); call with self._lock held."""
        self._check_signature(name)
        if name not in self._runners:
            self._runners[name] = self._interpreter.get_signature_runner(name)
        return self._runners[name]

    def predict(self, texts, text_pairs=None):
        """Answers texts through serve_text.

        Args:
          texts: list of str (a batch; one str is taken as a batch of one).
          text_pairs: list of str of the same length, for sentence-pair models ("" or None
            entries mean no second segment).

        Returns:
          dict of numpy arrays [B, ...]: probabilities, label_names and predicted_label
          (classification; multi-label: predicted, bool [B, C], instead of predicted_label),
          score (regression), pooled_output and mean_pooled_output (embedding).
        """
        if isinstance(texts, str):
            texts = [texts]
        self._check_signature(litert.TEXT_SIGNATURE)
        inputs = {"text": np.array([t.encode("utf-8") for t in texts], dtype=object)}
        takes_pair = "text_pair" in self.signatures[litert.TEXT_SIGNATURE]["inputs"]
        if text_pairs is not None and not takes_pair:
            raise ValueError(f"LiteRTModel: {self.path} takes text only, not text_pairs.")
        if takes_pair:
            pairs = text_pairs if text_pairs is not None else [""] * len(texts)
            if len(pairs) != len(texts):
                raise ValueError(f"LiteRTModel: {len(texts)} texts but {len(pairs)} "
                                 "text_pairs.")
            inputs["text_pair"] = np.array([(p or "").encode("utf-8") for p in pairs],
                                           dtype=object)
        with self._lock:
            return self._runner(litert.TEXT_SIGNATURE)(**inputs)

    def predict_ids(self, input_word_ids, input_mask, input_type_ids):
        """Runs serving_default on token ids (int [B, S] each): the model's outputs."""
        with self._lock:
            return litert.run_signature(self._runner(litert.IDS_SIGNATURE), {
                "input_word_ids": input_word_ids, "input_mask": input_mask,
                "input_type_ids": input_type_ids})
