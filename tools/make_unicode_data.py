"""Writes bert_tf/text/unicode_data.npz: the in-graph tokenizer's Unicode tables for this
Python's Unicode version (see bert_tf.text.unicode_data). Run after a Python upgrade changes
`unicodedata.unidata_version`; tests/text/test_unicode_data.py says when the file is stale.

    python tools/make_unicode_data.py
"""

import os
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bert_tf.text import layers, sentencepiece_layer, tokenization, unicode_data  # noqa: E402


def main():
    arrays = {casing: layers.compute_normalization_arrays(casing) for casing in (True, False)}
    unicode_data.write(unicode_data.DATA_FILE, arrays, tokenization.final_sigma_pattern(),
                       sentencepiece_layer.compute_unicode_tables())
    print(f"wrote {unicode_data.DATA_FILE} (Unicode {unicodedata.unidata_version}, "
          f"{os.path.getsize(unicode_data.DATA_FILE)} bytes)")


if __name__ == "__main__":
    main()
