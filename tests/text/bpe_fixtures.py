"""The byte-level BPE fixture (tools/make_bpe_reference.py) and its `tokenizers` reference ids."""

import functools
import gzip
import json
import os

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
BPE_TOKENIZER_JSON = os.path.join(FIXTURES, "bpe_tokenizer.json")


@functools.lru_cache(maxsize=1)
def bpe_reference():
    """dict: texts, ids ([CLS] A [SEP] per text), pairs and pair_ids, as `tokenizers` gave them."""
    with gzip.open(os.path.join(FIXTURES, "bpe_reference.json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


def without_specials(ids):
    """Reference ids of one text without the post-processor's [CLS] and [SEP]."""
    return ids[1:-1]


def write_tiny_byte_level_tokenizer(path):
    """A byte-level BPE tokenizer.json of 100 tokens, for models with a small vocab_size (the
    ModernBERT interop fixture's 128): [PAD] [CLS] [SEP] [MASK] [UNK] (ids 0-4, the ids
    ModernBERT's config.json gives pad/cls/sep), the 95 printable ASCII bytes, no merges."""
    from bert_tf.text.bpe import bytes_to_unicode
    from bert_tf.text.bpe_trainer import tokenizer_json

    specials = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"]
    ascii_chars = [bytes_to_unicode()[b] for b in range(32, 127)]  # byte order: "Ġ" first
    data = tokenizer_json(ascii_chars, [], specials, do_lower_case=False)
    # Unlike a learned vocabulary (all 256 bytes), this one needs an unknown token; its [MASK]
    # keeps the space before it.
    data["model"]["unk_token"] = "[UNK]"
    for token in data["added_tokens"]:
        token["lstrip"] = False
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return path


def make_modernbert_dir(directory):
    """A Hugging Face ModernBERT directory with a tokenizer.json and no vocab.txt: the interop
    tests' random 6-layer ModernBertForMaskedLM (hidden 32, vocab_size 128) and the 100-token
    byte-level BPE of write_tiny_byte_level_tokenizer (cased, as ModernBERT's)."""
    import shutil

    source = os.path.join(os.path.dirname(FIXTURES), "..", "interop", "fixtures",
                          "hf_modernbert_mlm")
    os.makedirs(directory, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(source, name), os.path.join(directory, name))
    write_tiny_byte_level_tokenizer(os.path.join(directory, "tokenizer.json"))
    return directory


def make_converted_modernbert_run(directory, tokenizer_json=BPE_TOKENIZER_JSON, seed=0):
    """What `bert-tf-convert-checkpoint --from=huggingface --to=bert_tf` writes for a
    ModernBERT (bert_config.json, encoder.keras, tokenizer.json, no vocab.txt), tiny: rotary
    positions, pre-norm gated blocks, no segment embeddings, local attention, 2 layers of
    width 32, random weights (seed), and `tokenizer_json` (default: the cased byte-level BPE
    fixture)."""
    import dataclasses
    import shutil

    import keras

    from bert_tf.config import BertConfig
    from bert_tf.modeling import ModernBertEncoder
    from bert_tf.text import load_tokenizer
    from bert_tf.training.checkpointing import save_keras_model

    repo = os.path.dirname(os.path.dirname(os.path.dirname(FIXTURES)))
    tokenizer = load_tokenizer(tokenizer_json)
    config = dataclasses.replace(
        BertConfig.from_json_file(os.path.join(repo, "official_configs", "models",
                                               "modernbert_demo_tiny.json")),
        vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=48,
        num_hidden_layers=2, global_attn_every_n_layers=2, local_attention_window=8,
        max_position_embeddings=64)
    os.makedirs(directory, exist_ok=True)
    config.to_json_file(os.path.join(directory, "bert_config.json"))
    keras.utils.set_random_seed(seed)
    save_keras_model(ModernBertEncoder(config), os.path.join(directory, "encoder.keras"))
    shutil.copy(tokenizer_json, os.path.join(directory, "tokenizer.json"))
    return directory
