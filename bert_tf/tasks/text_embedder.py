"""TextEmbedder: sentence vectors of raw texts."""

import os

import numpy as np

from bert_tf.modeling import BertSentenceEmbedder
from bert_tf.tasks.base import TextTask, as_texts


class TextEmbedder(TextTask):
    """A BertSentenceEmbedder with its tokenizer: texts in, vectors out.

    What bert-tf-embed trains and embeds with; its vectors are the command's (the same
    tokens, the same pooling and normalisation; the command tokenises in the TensorFlow graph,
    bert_tf.training.bulk_embedder, this task in Python).

    Args:
      model: a BertSentenceEmbedder.
      tokenizer: a bert_tf.text Tokenizer, or a vocab.txt / tokenizer.json path.
      max_seq_length, do_lower_case, batch_size: see bert_tf.tasks.TextTask.

    Examples:

    >>> embedder = bert_tf.load_task("all-MiniLM-L6-v2/")              # doctest: +SKIP
    >>> vectors = embedder.predict(["a query", "a passage"])           # doctest: +SKIP
    >>> float(vectors[0] @ vectors[1])                                 # doctest: +SKIP
    """

    model_class = BertSentenceEmbedder
    task_name = "sentence_embedding"

    @classmethod
    def from_pretrained(cls, path, *, pooling=None, normalize=None, tokenizer=None,
                        do_lower_case=None, max_seq_length=None, batch_size=32):
        """The embedder of any model source: a sentence-transformers directory or an
        embedding run (their pooling), or any encoder bert_tf.load_model reads, pooled by
        `pooling` ("mean", "cls", "max" or a list of them; None: mean) and `normalize`
        (None: true) (bert_tf.interop.sentence_transformers.load_embedder, as bert-tf-embed
        --init_checkpoint reads it; TensorFlow reads the checkpoints). A model with its own
        pooling refuses another one, naming both."""
        from bert_tf.interop.sentence_transformers import load_embedder

        if isinstance(pooling, str):
            pooling = [pooling]

        given_file = isinstance(tokenizer, (str, os.PathLike))
        loaded = load_embedder(str(path), pooling=pooling, normalize=normalize,
                               vocab_file=str(tokenizer) if given_file else None,
                               do_lower_case=do_lower_case, max_seq_length=max_seq_length,
                               flag=None)
        if tokenizer is None or given_file:
            tokenizer = loaded.tokenizer
        return cls(loaded.model, tokenizer, max_seq_length=loaded.max_seq_length,
                   batch_size=batch_size)

    def predict(self, texts, batch_size=None):
        """float32 vectors [N, D] of the texts, in order ([D] for a single str)."""
        texts, one = as_texts(texts)
        rows, truncated = [], 0
        for text in texts:
            row, cut = self.pack(self.tokenizer.encode(text))
            rows.append(row)
            truncated += cut
        self.log_truncated(truncated, len(rows))
        vectors = np.zeros((len(rows), self.model.embedding_dim), np.float32)
        for i, vector in enumerate(self.run(rows, batch_size)):
            vectors[i] = vector
        return vectors[0] if one else vectors
