"""How pre-training instances are cut, masked and packed: one recipe for records and raw text.

`create_pretraining_data` writes records with it (its PretrainingDataOptions extends it with
what only record making needs) and `text_pretraining_dataset` masks raw text on the fly with
it, so both read the same settings under the same names (the command-line flag names).
No TensorFlow here.
"""

import dataclasses

from bert_tf.data.pretraining import row_packing

# P of unpacked instances when max_predictions_per_seq is not given (the original's).
DEFAULT_MAX_PREDICTIONS_PER_SEQ = 20


def resolve_max_predictions(settings, highest_masked_lm_prob=None):
    """P of masking settings (a MaskingSettings) whose max_predictions_per_seq may be unset
    (None): the value given, else 20 for instances and, for packed rows,
    row_packing.default_max_predictions_per_row with I = resolve_instances_per_row and the
    highest rate the run masks at (default settings.masked_lm_prob; a masking schedule's
    largest)."""
    if settings.max_predictions_per_seq is not None:
        return settings.max_predictions_per_seq
    if not settings.pack_sequences:
        return DEFAULT_MAX_PREDICTIONS_PER_SEQ
    return row_packing.default_max_predictions_per_row(
        settings.max_seq_length, highest_masked_lm_prob or settings.masked_lm_prob,
        resolve_instances_per_row(settings))


def highest_masked_lm_prob(masked_lm_prob, masked_lm_prob_end=None):
    """The largest rate training masks at (a schedule's start or end): what P must hold."""
    return max(masked_lm_prob, masked_lm_prob_end or 0.0)


def resolve_instances_per_row(settings):
    """I of packed rows of masking settings (a MaskingSettings): max_instances_per_row, or its
    default max(2, S // 16) when 0."""
    return (settings.max_instances_per_row
            or row_packing.default_max_instances_per_row(settings.max_seq_length))


@dataclasses.dataclass
class MaskingSettings:
    """The masking flags as a command takes them (bert_tf.cli.flags MASKING group): the part
    of a job's config that pre-training and record making share. max_predictions_per_seq None
    means "not given" (resolve_max_predictions)."""

    max_seq_length: int = 128
    max_predictions_per_seq: int | None = None
    masked_lm_prob: float = 0.15
    do_whole_word_mask: bool = False
    sentence_order_prediction: bool = False
    do_span_mask: bool = False
    ngram_mask: int = 0
    pack_sequences: bool = False
    max_instances_per_row: int = 0


def ngram_mask_problem(ngram_mask, do_span_mask):
    """None, or why --ngram_mask cannot be used as given (a sentence naming the flags)."""
    if ngram_mask and do_span_mask:
        return ("--ngram_mask and --do_span_mask are two span-length distributions (ALBERT's "
                "and SpanBERT's): pass one of them")
    if ngram_mask < 0 or ngram_mask == 1:
        return (f"--ngram_mask={ngram_mask} must be 0 (off) or at least 2 (n-grams of 1 to N "
                "whole words; one word alone is --do_whole_word_mask)")
    return None


@dataclasses.dataclass(frozen=True)
class MaskingRecipe:
    """The masked-LM recipe of pre-training instances; field names are the flag names.

    Args:
      max_seq_length: S, tokens per instance (a packed row) including [CLS] and [SEP]s (>= 5).
      max_predictions_per_seq: P, the cap on masked positions per instance (per row when
        packed, capping each instance too).
      masked_lm_prob: fraction of the real, non-special tokens to mask (in training with
        masked_lm_prob_end, the rate at the start).
      masked_lm_prob_end: None (the rate is constant), or the rate at the end of training:
        raw text masked on the fly then masks at masked_lm_prob + (masked_lm_prob_end -
        masked_lm_prob) * p, p the share of training done (text_pretraining_dataset's
        masking_progress); evaluation masks at masked_lm_prob.
      short_seq_prob: probability of a shorter random target length (as the original).
      do_whole_word_mask: mask all WordPiece pieces of a word together.
      sentence_order_prediction: ALBERT's sentence-order pairs (label 1 = swapped) instead of
        next-sentence pairs.
      do_span_mask: SpanBERT's span masking (whole-word spans of geometric length), with the
        spans' boundaries in the output.
      span_geometric_p: p of the geometric span-length distribution (do_span_mask).
      max_span_length: longest span in words (do_span_mask).
      ngram_mask: N >= 2 for ALBERT's n-gram masking: spans of n = 1..N whole words with
        p(n) proportional to 1 / n, placed as do_span_mask places its spans, without span
        boundaries in the output; 0: off.
      pack_sequences: several whole instances per row of S tokens.
      max_instances_per_row: I, instances per packed row; 0 = max(2, S // 16).
    """

    max_seq_length: int = 128
    max_predictions_per_seq: int = DEFAULT_MAX_PREDICTIONS_PER_SEQ
    masked_lm_prob: float = 0.15
    masked_lm_prob_end: float | None = None
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    sentence_order_prediction: bool = False
    do_span_mask: bool = False
    span_geometric_p: float = 0.2
    max_span_length: int = 10
    ngram_mask: int = 0
    pack_sequences: bool = False
    max_instances_per_row: int = 0

    @property
    def masks_spans(self):
        """Whether words are masked in spans of several (do_span_mask or ngram_mask)."""
        return self.do_span_mask or self.ngram_mask > 0

    def span_length_weights(self):
        """Relative weights of span lengths 1..M in words (list of M floats): n-grams' 1 / n
        up to ngram_mask, else the geometric p (1 - p)^(l - 1) truncated at max_span_length."""
        if self.ngram_mask:
            return [1.0 / n for n in range(1, self.ngram_mask + 1)]
        q = 1.0 - self.span_geometric_p
        return [self.span_geometric_p * q ** (length - 1)
                for length in range(1, self.max_span_length + 1)]

    @property
    def highest_masked_lm_prob(self):
        """The largest rate training masks at: what P must hold."""
        return highest_masked_lm_prob(self.masked_lm_prob, self.masked_lm_prob_end)

    def masked_lm_prob_at(self, done):
        """The rate training masks at when `done` (a float, or a float32 scalar tensor, in
        [0, 1]) of it is done: masked_lm_prob moving linearly to masked_lm_prob_end, or
        masked_lm_prob throughout without a schedule."""
        if self.masked_lm_prob_end is None:
            return self.masked_lm_prob
        return self.masked_lm_prob + (self.masked_lm_prob_end - self.masked_lm_prob) * done

    @property
    def instances_per_row(self):
        """I of packed rows: max_instances_per_row, or its default max(2, S // 16)."""
        return (self.max_instances_per_row
                or row_packing.default_max_instances_per_row(self.max_seq_length))
