"""FillMask: the pre-trained masked-LM head's guesses for the masks written in a text."""

import numpy as np

from bert_tf import file_names
from bert_tf.modeling import BertPretrainer
from bert_tf.tasks import sources
from bert_tf.tasks.base import TaskError, TextTask, as_texts, check_positive_int, softmax


class FillMask(TextTask):
    """A BertPretrainer with its tokenizer: texts with masks in, the likeliest tokens out.

    A mask is written in the text as the tokenizer's mask token ("[MASK]" for WordPiece; a
    byte-level BPE tokenizer.json's own, e.g. ModernBERT's "[MASK]" or RoBERTa's "<mask>"),
    as bert-tf-export's fill-mask signature reads it. A mask cut off by truncation gets no
    guesses.

    Args:
      model: a BertPretrainer (what bert-tf-pretrain saves as pretrainer.keras).
      tokenizer: a bert_tf.text Tokenizer, or a vocab.txt / tokenizer.json path.
      top_k: guesses per mask.
      max_seq_length, do_lower_case, batch_size: see bert_tf.tasks.TextTask.

    Examples:

    >>> fill = bert_tf.load_task("/tmp/bert_tf_demo/pretraining_output")   # doctest: +SKIP
    >>> fill.predict("The [MASK] sat on the mat.")                          # doctest: +SKIP
    [[{'token': 'cat', 'score': 0.41, 'id': 2368}, ...]]
    """

    model_class = BertPretrainer
    task_name = "fill_mask"
    model_file = file_names.PRETRAINER_FILE

    def __init__(self, model, tokenizer, *, max_seq_length=128, top_k=5, do_lower_case=None,
                 batch_size=32):
        super().__init__(model, tokenizer, max_seq_length, do_lower_case, batch_size)
        if self.tokenizer.mask_id is None:
            raise TaskError("FillMask: the tokenizer has no mask token")
        self.top_k = check_positive_int("top_k", top_k, "FillMask")
        mask_token = self.tokenizer.convert_ids_to_tokens([self.tokenizer.mask_id])[0]
        self.mask_token = mask_token

    @classmethod
    def from_pretrained(cls, path, *, tokenizer=None, do_lower_case=None, **options):
        """The masked-LM head of any model bert_tf.load_model reads that has one (a
        pre-training run, an original TF1 checkpoint, a Hugging Face BertForPreTraining or
        ...ForMaskedLM directory); **options: the class's settings."""
        model, tokenizer = sources.pretrained(path, tokenizer, do_lower_case)
        if not isinstance(model, BertPretrainer):
            raise TaskError(f"{path} holds a {type(model).__name__}, not a pre-trained model "
                            "with a masked-LM head (a pre-training run's pretrainer.keras, a TF1 "
                            "checkpoint, a Hugging Face ...ForMaskedLM directory)")
        return cls(model, tokenizer, **options)

    def _encode(self, text):
        """Ids of `text` with mask_id at each mask written in it."""
        ids = self.tokenizer.encode(text)
        if self.tokenizer.mask_id in ids or self.mask_token not in text:
            return ids  # a tokenizer.json finds its mask (an added token) by itself
        # WordPiece splits "[MASK]" as punctuation and a word: the parts are tokenized apart.
        ids = []
        for i, part in enumerate(text.split(self.mask_token)):
            if i:
                ids.append(self.tokenizer.mask_id)
            ids.extend(self.tokenizer.encode(part))
        return ids

    def predict(self, texts, top_k=None, batch_size=None):
        """The likeliest tokens for every mask of every text.

        Args:
          texts: a str, or a list of str, each with any number of masks.
          top_k: guesses per mask (default the task's).
          batch_size: texts per forward pass (default the task's).

        Returns:
          Per text (one list for a single str): per mask, in order, a list of top_k
          {"token": its text, "score": its probability, "id"}, likeliest first.
        """
        texts, one = as_texts(texts)
        top_k = self.top_k if top_k is None else check_positive_int("top_k", top_k)
        rows, truncated = [], 0
        for text in texts:
            row, cut = self.pack(self._encode(text))
            row["masked_lm_positions"] = [i for i, token in enumerate(row["input_word_ids"])
                                          if token == self.tokenizer.mask_id]
            rows.append(row)
            truncated += cut
        self.log_truncated(truncated, len(rows))
        outputs = self.run(rows, batch_size)
        vocab_size = self.tokenizer.vocab_size
        answers = []
        for row, output in zip(rows, outputs):
            count = len(row["masked_lm_positions"])
            # Rows past the tokenizer's vocabulary (a padded vocab_size) are no token.
            probabilities = softmax(output["mlm_logits"][:count, :vocab_size])
            masks = []
            for distribution in probabilities:
                best = np.argsort(-distribution, kind="stable")[:top_k]
                masks.append([{"token": self.tokenizer.decode([int(i)]),
                               "score": float(distribution[i]), "id": int(i)} for i in best])
            answers.append(masks)
        return answers[0] if one else answers
