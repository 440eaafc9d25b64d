"""Sentence vectors of many texts, tokenised in the TensorFlow graph: the embedding job's.

`BulkEmbedder(model, vocab_file, do_lower_case, max_seq_length).embed(texts)` returns float32
[N, D] in the order of `texts`. bert-tf-embed embeds its --input_file with it, and contrastive
training (bert_tf.training.contrastive) tokenises its pairs and evaluates with it. Texts are
tokenised in the graph by the layer of the model's tokenizer file
(bert_tf.text.tokenizer_layer: WordPiece ids equal to the original FullTokenizer's, byte-level
BPE ids equal to Hugging Face `tokenizers'), thousands per call, truncated to
max_seq_length - 2 pieces (`tokenize` counts the texts cut, which bert-tf-embed logs), sorted
by length so a batch holds texts of nearly one length, and each batch is cut to the smallest
length bucket that holds its longest text: the model does the work of the real tokens, not of
max_seq_length. Padding is masked, so a text's vector
does not depend on its batch.

bert_tf.tasks.TextEmbedder computes the same vectors with the Python tokenizer, so that it
predicts on JAX without TensorFlow (tests/cli/test_embed.py checks that the two agree); this
one needs TensorFlow.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.config import ENCODER_INPUTS
from bert_tf.modeling import BertSentenceEmbedder
from bert_tf.text import tokenizer_files
from bert_tf.text.input_packing import bucket_lengths, bucket_of, length_sorted_batches

_TOKENIZE_CHUNK = 4096


class BulkEmbedder:
    """Sentence vectors of raw texts, tokenised in the TensorFlow graph.

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
            raise TypeError(f"BulkEmbedder: model must be a BertSentenceEmbedder, got "
                            f"{type(model).__name__}")
        if batch_size < 1:
            raise ValueError(f"BulkEmbedder: batch_size={batch_size} must be >= 1")
        self.model = model
        if isinstance(vocab_file, str) or hasattr(vocab_file, "__fspath__"):
            vocab_file = tokenizer_files.load_tokenizer(vocab_file, do_lower_case)
        self.tokenizer = tokenizer_files.tokenizer_layer(vocab_file)
        missing = tokenizer_files.missing_roles(self.tokenizer)
        if missing:
            raise ValueError(f"BulkEmbedder: the tokenizer has no {'/'.join(missing)} token "
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
                                  for name in ENCODER_INPUTS}])
        else:  # Keras' compiled predict step of the backend (jax.jit), one per bucket length.
            self._forward = model.predict_on_batch

    def _tokenize_chunk(self, texts):
        ids = self.tokenizer(texts)  # [B, (T)]
        kept = ids[:, :self.max_seq_length - 2]
        truncated = tf.reduce_sum(tf.cast(ids.row_lengths() > self.max_seq_length - 2, tf.int32))
        return kept.flat_values, kept.row_lengths(), truncated

    def tokenize(self, texts):
        """(ids, truncated): [N] int32 arrays of token ids (without [CLS]/[SEP]), truncated to
        max_seq_length - 2, and how many texts were longer."""
        result, truncated = [], 0
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            flat, lengths, cut = self._tokenize(tf.constant(texts[start:start + _TOKENIZE_CHUNK],
                                                            tf.string))
            result.extend(np.split(flat.numpy(), np.cumsum(lengths.numpy())[:-1]))
            truncated += int(cut)
        return result, truncated

    def token_ids(self, texts):
        """[N] int32 arrays of token ids (without [CLS]/[SEP]), truncated to max_seq_length - 2."""
        return self.tokenize(texts)[0]

    def pack(self, ids_list, width=None):
        """The encoder inputs of a batch: [CLS] ids [SEP], padded to `width` (default: the
        bucket of the longest).

        Returns:
          dict of int32 [B, L].
        """
        tokenizer = self.tokenizer
        if width is None:
            width = bucket_of(max(len(ids) for ids in ids_list) + 2, self.buckets)
        word_ids = np.full((len(ids_list), width), tokenizer.pad_id, np.int32)
        mask = np.zeros((len(ids_list), width), np.int32)
        for row, ids in enumerate(ids_list):
            word_ids[row, 0] = tokenizer.cls_id
            word_ids[row, 1:len(ids) + 1] = ids
            word_ids[row, len(ids) + 1] = tokenizer.sep_id
            mask[row, :len(ids) + 2] = 1
        return {"input_word_ids": word_ids, "input_mask": mask,
                "input_type_ids": np.zeros_like(mask)}

    def embed(self, texts, progress=None):
        """float32 [N, D] vectors of `texts` (a list of str), in their order.

        Args:
          texts: the texts.
          progress: optional `(done) -> None` called after each batch with the texts done.
        """
        return self.embed_ids(self.token_ids(list(texts)), progress)

    def embed_ids(self, ids_list, progress=None):
        """float32 [N, D] vectors of texts given as `tokenize` returns their ids, in order;
        `progress` as for `embed`."""
        vectors = np.zeros((len(ids_list), self.model.embedding_dim), np.float32)
        if not ids_list:
            return vectors
        done = 0
        for rows, width in length_sorted_batches([len(ids) + 2 for ids in ids_list],
                                                 self.buckets, self.batch_size):
            vectors[rows] = keras.ops.convert_to_numpy(
                self._forward(self.pack([ids_list[i] for i in rows], width)))
            done += len(rows)
            if progress is not None:
                progress(done)
        return vectors
