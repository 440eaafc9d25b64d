"""Generated multilingual strings and vocabularies for them, shared by the bert_tf.text tests."""

import random
import string
import unicodedata

from bert_tf.text import tokenization

# Spacing combining marks with a non-zero combining class: the one documented place where the
# in-graph tokenizer may differ (see bert_tf/text/layers.py), so random fuzzing leaves them out.
SPACING_MARKS_WITH_CCC = frozenset(
    chr(cp) for cp in range(0x110000)
    if not 0xD800 <= cp <= 0xDFFF and unicodedata.combining(chr(cp))
    and unicodedata.category(chr(cp)) != "Mn")

_POOLS = [
    (30, string.ascii_letters + string.digits),
    (6, string.punctuation),
    (6, " \t\n\r\u00a0\u3000\u2028\u2029\u2003\x0b\x0c\x1c\x85\u1680\u202f"),
    (6, "éèêëÉÈÀÅåÄäÖöÜüñÑçÇßİıŁłØøĐđǅǆǄﬁﬂæÆœŒ"),
    (3, "\u0301\u0308\u0327\u0303\u0345\u034f\u20dd"),
    (5, "ΑΒΓΔΣΣΣσςΟΩωάέΐΰϐ"),
    (3, "ПриветЁёЖжЯя"),
    (5, "北京大学中文字\u3400\u4dbf\u9fff\uf900\ufa6e\ufaff\U00020000\U0002a700\U0002f800"
        "\U0002b820\U0002ceaf\u9fa5"),
    (3, "こんにちはカタカナ한국어ㄱ"),
    (5, "¿¡«»—–‘’“”。、・…‹›‽⁇〜‐"),
    (5, "$^`~€£¥©®™°±×÷§¶†‡•№℃←→∑√∞≤≥♥★☆"),
    (4, "\x00\x01\x07\x1b\x7f\x80\x9f\u200b\u200c\u200d\u200e\u2060\ufeff\u00ad\ufffd"
        "\U000e0001"),
    (3, "ＡＢＣａｂｃ１２３！？"),
    (3, "😀👍🏽👨\u200d👩\u200d👧🇩🇪❤️✨🙂"),
    (4, "\u212a\u2126\u0130\u1e9e\u1fef\u037e\u00b5\u2160\u24b6\u1f88\u0149\u01f0"),
]
_POOL_WEIGHTS = [w for w, _ in _POOLS]


def _random_code_point(rng):
    while True:
        cp = rng.randint(0x80, 0x2FFFF) if rng.random() < 0.8 else rng.randint(0x80, 0xFFFF)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        if char not in SPACING_MARKS_WITH_CCC:
            return char


def _random_word(rng):
    kind = rng.random()
    if kind < 0.03:  # Very long words, around the 200-character limit (and 256 bytes).
        return rng.choice(["a", "é", "北", "ab", "Σ", "ж"]) * rng.randint(90, 230)
    if kind < 0.10:
        return "".join(_random_code_point(rng) for _ in range(rng.randint(1, 4)))
    if kind < 0.30:  # Mixed-case English-like words.
        word = "".join(rng.choice("aeiounstrlmkpHEALOT") for _ in range(rng.randint(2, 10)))
        return word.capitalize() if rng.random() < 0.5 else word
    pools = rng.choices([p for _, p in _POOLS], weights=_POOL_WEIGHTS, k=rng.randint(1, 3))
    return "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 12)))


def random_texts(seed, count):
    """`count` random strings mixing scripts, marks, punctuation, controls and emoji."""
    rng = random.Random(seed)
    texts = ["", " ", "\x00", "[CLS] [SEP] [UNK]", "ΟΔΟΣ ΑΣ.Β Σ aΣ ΣΑ", "a" * 201,
             "é" * 199, "İstanbul ǅemal ﬁne Ｋelvin \u212a"]
    while len(texts) < count:
        words = [_random_word(rng) for _ in range(rng.randint(0, 14))]
        seps = [rng.choice([" ", " ", " ", "", "\t", "\n", "  "]) for _ in words]
        texts.append("".join(w + s for w, s in zip(words, seps)))
    return texts


def vocab_for_texts(texts, do_lower_case, seed):
    """A vocabulary covering most characters and some longer pieces of `texts`' words.

    About 5% of characters are left out (as word start and as "##" piece separately) so that
    [UNK] words occur; longer pieces make WordPiece choose between overlapping matches.
    """
    rng = random.Random(seed)
    words = sorted({w for t in texts for w in tokenization.basic_tokenize(t, do_lower_case)})
    chars = sorted({c for w in words for c in w})
    tokens = list(tokenization.SPECIAL_TOKENS)
    for c in chars:
        if rng.random() < 0.95:
            tokens.append(c)
        if rng.random() < 0.95:
            tokens.append("##" + c)
    for word in words:
        if len(word) < 2 or rng.random() < 0.6:
            continue
        start = rng.randint(0, len(word) - 2)
        end = rng.randint(start + 2, min(len(word), start + 6))
        tokens.append(("##" if start else "") + word[start:end])
        if rng.random() < 0.3:
            tokens.append(word)
    seen = set()
    return [t for t in tokens if not (t in seen or seen.add(t))]


def save_ids_module(layer, export_dir):
    """Saves a SavedModel whose call maps tf.string [B] to the layer's ids: {"ids": int32
    [B, T] padded with -1, "lengths": int64 [B]}. Returns export_dir."""
    import tensorflow as tf

    class Tokenize(tf.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def __call__(self, text):
            ids = self.layer(text)
            return {"ids": ids.to_tensor(default_value=-1), "lengths": ids.row_lengths()}

    tf.saved_model.save(Tokenize(), export_dir)
    return export_dir


def ids_in_a_fresh_process(export_dir, texts, cwd):
    """The ids a SavedModel of save_ids_module gives for `texts` (list of str) in a fresh
    Python process that imports only tensorflow and tensorflow_text (as a model server
    has): list of lists of int."""
    import json
    import subprocess
    import sys

    script = ("import json, sys, tensorflow as tf, tensorflow_text\n"
              f"m = tf.saved_model.load({str(export_dir)!r})\n"
              "out = m(tf.constant(json.loads(sys.stdin.read())))\n"
              "print(json.dumps([r[:n] for r, n in zip(out['ids'].numpy().tolist(),"
              " out['lengths'].numpy().tolist())]))")
    result = subprocess.run([sys.executable, "-c", script], input=json.dumps(texts),
                            capture_output=True, text=True, timeout=300, cwd=str(cwd))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
