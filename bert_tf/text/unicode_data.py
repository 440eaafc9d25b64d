"""Precomputed Unicode tables of the in-graph tokenizers, shipped with the package.

`BertTokenizerLayer` reads per-code-point normalization arrays and a final-sigma pattern that
are derived from Python's own `unicodedata` and `str.lower` by looping over all 1.1M code points
(`tokenization.char_normalization_table`, `tokenization.final_sigma_pattern`): about 1.8 s of
CPU in every process that builds an uncased layer (each export, fine-tuning run, raw-text
pre-training run). `SentencePieceTokenizerLayer` reads its own tables, made the same way
(`sentencepiece_layer.compute_unicode_tables`, half a second). `tools/make_unicode_data.py`
writes them once into unicode_data.npz, keyed by `unicodedata.unidata_version`; a Python with
another Unicode version computes them instead, so the tables always agree with the
interpreter's own rules (tests/text/test_unicode_data.py checks the shipped file against the
computation).
"""

import functools
import os
import unicodedata

import numpy as np

DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unicode_data.npz")
CASINGS = {True: "uncased", False: "cased"}
ARRAY_NAMES = ("block_index", "blocks", "values", "starts", "lengths")
SENTENCEPIECE_PREFIX = "sentencepiece_"
# RE2 classes and pattern (str), then int32 code points.
SENTENCEPIECE_KEYS = ("combining", "unassigned", "final_sigma", "lower_from", "lower_to")


@functools.lru_cache(maxsize=1)
def _shipped():
    """name -> array of DATA_FILE, or {} when it is missing or of another Unicode version."""
    if not os.path.isfile(DATA_FILE):
        return {}
    with np.load(DATA_FILE, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    if str(arrays.get("unidata_version")) != unicodedata.unidata_version:
        return {}
    return arrays


def normalization_arrays(do_lower_case):
    """The shipped (block_index, blocks, values, starts, lengths) int32 arrays of one casing
    (see bert_tf.text.layers), or None."""
    arrays = _shipped()
    names = [f"{CASINGS[bool(do_lower_case)]}_{name}" for name in ARRAY_NAMES]
    if not all(name in arrays for name in names):
        return None
    return tuple(arrays[name] for name in names)


def final_sigma_pattern():
    """The shipped `tokenization.final_sigma_pattern()`, or None."""
    pattern = _shipped().get("final_sigma_pattern")
    return None if pattern is None else str(pattern)


def sentencepiece_tables():
    """The shipped `sentencepiece_layer.compute_unicode_tables()` dict, or None."""
    arrays = _shipped()
    names = [SENTENCEPIECE_PREFIX + key for key in SENTENCEPIECE_KEYS]
    if not all(name in arrays for name in names):
        return None
    return {key: str(arrays[name]) if arrays[name].dtype.kind == "U" else arrays[name]
            for key, name in zip(SENTENCEPIECE_KEYS, names)}


def write(path, arrays_by_casing, sigma_pattern, sentencepiece):
    """Writes the tables (tools/make_unicode_data.py): arrays_by_casing maps do_lower_case to the
    five arrays of `normalization_arrays`; sentencepiece is the dict of
    `sentencepiece_tables`."""
    data = {"unidata_version": np.array(unicodedata.unidata_version),
            "final_sigma_pattern": np.array(sigma_pattern)}
    for key in SENTENCEPIECE_KEYS:
        data[SENTENCEPIECE_PREFIX + key] = np.asarray(sentencepiece[key])
    for do_lower_case, arrays in arrays_by_casing.items():
        for name, array in zip(ARRAY_NAMES, arrays):
            data[f"{CASINGS[do_lower_case]}_{name}"] = np.asarray(array, dtype=np.int32)
    temporary = path + ".tmp.npz"
    np.savez_compressed(temporary, **data)
    os.replace(temporary, path)
