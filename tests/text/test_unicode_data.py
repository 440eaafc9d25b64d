"""The shipped Unicode tables of the in-graph tokenizers equal what Python's rules compute."""

import unicodedata

import numpy as np

from bert_tf.text import layers, sentencepiece_layer, tokenization, unicode_data


def test_shipped_tables_equal_the_computed_ones():
    # Shipped for the Unicode version of the Python the suite runs on; stale after an upgrade
    # (then the layer computes them, and tools/make_unicode_data.py rewrites the file).
    shipped = unicode_data._shipped()
    assert str(shipped.get("unidata_version")) == unicodedata.unidata_version, (
        "bert_tf/text/unicode_data.npz is for another Unicode version: run "
        "python tools/make_unicode_data.py")
    for casing in (True, False):
        for name, got, want in zip(unicode_data.ARRAY_NAMES,
                                   unicode_data.normalization_arrays(casing),
                                   layers.compute_normalization_arrays(casing)):
            np.testing.assert_array_equal(got, want, err_msg=f"{casing} {name}")
    assert unicode_data.final_sigma_pattern() == tokenization.final_sigma_pattern()
    shipped_sp = unicode_data.sentencepiece_tables()
    computed_sp = sentencepiece_layer.compute_unicode_tables()
    assert sorted(shipped_sp) == sorted(computed_sp)
    for key, want in computed_sp.items():
        if isinstance(want, str):
            assert shipped_sp[key] == want, key
        else:
            np.testing.assert_array_equal(shipped_sp[key], want, err_msg=key)
            assert shipped_sp[key].dtype == np.int32, key


def test_another_unicode_version_is_not_used(monkeypatch):
    unicode_data._shipped.cache_clear()
    monkeypatch.setattr(unicodedata, "unidata_version", "0.0.0")
    try:
        assert unicode_data.normalization_arrays(True) is None
        assert unicode_data.final_sigma_pattern() is None
        assert unicode_data.sentencepiece_tables() is None
    finally:
        unicode_data._shipped.cache_clear()
