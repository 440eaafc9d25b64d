"""Encoding texts with a BertSentenceEmbedder: tokenised in-graph, length-sorted, bucketed.

`TextEncoder(model, vocab_file, do_lower_case, max_seq_length).encode(texts)` returns float32
[N, D] in the order of `texts`. Texts are tokenised in the graph by the layer of the model's
tokenizer file (bert_tf.text.tokenizer_layer: WordPiece ids equal to the original
FullTokenizer's, byte-level BPE ids equal to Hugging Face `tokenizers`'), truncated to
max_seq_length - 2 pieces, sorted by length so a batch holds texts of nearly one length,
and each batch is cut to the smallest length bucket that holds its longest text: the encoder
does the work of the real tokens, not of max_seq_length. Padding is masked, so a text's
vector does not depend on its batch.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.modeling import BertSentenceEmbedder
from bert_tf.text import tokenizer_files
from bert_tf.text.input_packing import bucket_lengths

_TOKENIZE_CHUNK = 4096
_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


class TextEncoder:
    """Sentence vectors of raw texts.

    Args:
      model: a BertSentenceEmbedder.
      vocab_file: its tokenizer: a vocab.txt or tokenizer.json path (or a directory holding
        one), a WordpieceTokenizer or BpeTokenizer, or a BertTokenizerLayer or
        BpeTokenizerLayer.
      do_lower_case: a vocab.txt's casing; for a tokenizer.json None takes the file's (a
        value that contradicts it is a ValueError); ignored for a tokenizer object.
      max_seq_length: tokens per text, [CLS] and [SEP] included; longer texts are truncated.
      batch_size: texts per forward pass.
      buckets: lengths a batch is cut to (increasing, ending with max_seq_length); default
        bert_tf.text.input_packing.bucket_lengths(max_seq_length).
    """

    def __init__(self, model, vocab_file, do_lower_case, max_seq_length, batch_size=64,
                 buckets=None):
        if not isinstance(model, BertSentenceEmbedder):
            raise TypeError(f"TextEncoder: model must be a BertSentenceEmbedder, got "
                            f"{type(model).__name__}")
        if batch_size < 1:
            raise ValueError(f"TextEncoder: batch_size={batch_size} must be >= 1")
        self.model = model
        if isinstance(vocab_file, str) or hasattr(vocab_file, "__fspath__"):
            vocab_file = tokenizer_files.load_tokenizer(vocab_file, do_lower_case)
        self.tokenizer = tokenizer_files.tokenizer_layer(vocab_file)
        missing = [role for role in ("cls", "sep", "pad")
                   if getattr(self.tokenizer, f"{role}_id") is None]
        if missing:
            raise ValueError(f"TextEncoder: the tokenizer has no {'/'.join(missing)} token "
                             "(texts are packed as [CLS] text [SEP] and padded)")
        self.max_seq_length = max_seq_length
        self.batch_size = batch_size
        self.buckets = tuple(buckets or bucket_lengths(max_seq_length))
        self._tokenize = tf.function(self._tokenize_chunk, autograph=False,
                                     input_signature=[tf.TensorSpec([None], tf.string)])
        if keras.backend.backend() == "tensorflow":
            self._forward = tf.function(
                lambda features: model(features, training=False), autograph=False,
                input_signature=[{name: tf.TensorSpec([None, None], tf.int32)
                                  for name in _INPUTS}])
        else:  # Keras' compiled predict step of the backend (jax.jit), one per bucket length.
            self._forward = model.predict_on_batch

    def _tokenize_chunk(self, texts):
        ids = self.tokenizer(texts)[:, :self.max_seq_length - 2]  # [B, (T)]
        return ids.flat_values, ids.row_lengths()

    def token_ids(self, texts):
        """[N] int32 arrays of token ids (without [CLS]/[SEP]), truncated to max_seq_length - 2."""
        result = []
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            flat, lengths = self._tokenize(tf.constant(texts[start:start + _TOKENIZE_CHUNK],
                                                       tf.string))
            result.extend(np.split(flat.numpy(), np.cumsum(lengths.numpy())[:-1]))
        return result

    def pack(self, ids_list):
        """The encoder inputs of a batch: [CLS] ids [SEP], padded to the bucket of the longest.

        Returns:
          dict of int32 [B, L].
        """
        tokenizer = self.tokenizer
        longest = max(len(ids) for ids in ids_list) + 2
        width = next(b for b in self.buckets if b >= longest)
        word_ids = np.full((len(ids_list), width), tokenizer.pad_id, np.int32)
        mask = np.zeros((len(ids_list), width), np.int32)
        for row, ids in enumerate(ids_list):
            word_ids[row, 0] = tokenizer.cls_id
            word_ids[row, 1:len(ids) + 1] = ids
            word_ids[row, len(ids) + 1] = tokenizer.sep_id
            mask[row, :len(ids) + 2] = 1
        return {"input_word_ids": word_ids, "input_mask": mask,
                "input_type_ids": np.zeros_like(mask)}

    def encode(self, texts, progress=None):
        """float32 [N, D] vectors of `texts` (a list of str), in their order.

        Args:
          texts: the texts.
          progress: optional `(done) -> None` called after each batch with the texts done.
        """
        texts = list(texts)
        vectors = np.zeros((len(texts), self.model.embedding_dim), np.float32)
        if not texts:
            return vectors
        ids_list = self.token_ids(texts)
        # Longest first: the first batch shows the memory peak, as sentence-transformers does.
        order = sorted(range(len(texts)), key=lambda i: -len(ids_list[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            vectors[rows] = keras.ops.convert_to_numpy(
                self._forward(self.pack([ids_list[i] for i in rows])))
            if progress is not None:
                progress(start + len(rows))
        return vectors
