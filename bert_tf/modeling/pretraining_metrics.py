"""The pre-training losses' shared parts and the metrics reported from them.

`masked_token_loss` and `hits` (the masked-LM loss and hit counts, which ELECTRA's generator
shares), `pretraining_metric_terms` (the one definition of the reported metrics), the
`pretraining_metrics` the custom training loop reports from summed parts, and
`PretrainingLossTrackers`, the Keras metric trackers `fit` / `evaluate` report them with.
Task metrics in plain Python / NumPy live in bert_tf.metrics.
"""

import keras
from keras import ops

from bert_tf.modeling import kernels

# Added to the weight sum in the masked-LM loss denominator, as the original does, so a batch
# without predictions gives a loss of 0 rather than NaN.
_MLM_WEIGHT_EPSILON = 1e-5


def pair_metric_names(sentence_order_prediction):
    """(loss name, accuracy name) of the pair head: NSP, or SOP when sentence_order_prediction."""
    if sentence_order_prediction:
        return "sop_loss", "sentence_order_accuracy"
    return "nsp_loss", "next_sentence_accuracy"


def pretraining_metric_terms(sentence_order_prediction=False, pair_head=True,
                             span_boundary=False, packed=False, bag_of_words=False):
    """The one definition of the reported pre-training metrics.

    Returns:
      [(metric name, summed part, divisor)] over the parts of
      `BertPretrainer.compute_pretraining_losses` (bert_tf.modeling.pretrainer; plus
      `instances` and `rows` for packed rows): divisor None means a mean over the summed
      terms (batches x replicas), a part name a ratio of sums (exact across batches and
      replicas). Used by `pretraining_metrics` (the custom loop) and by BertPretrainer's Keras
      trackers (fit/evaluate).
    """
    terms = [("loss", "loss", None), ("mlm_loss", "mlm_loss", None),
             ("masked_lm_accuracy", "mlm_correct", "mlm_weight_sum")]
    if pair_head:
        loss_name, accuracy_name = pair_metric_names(sentence_order_prediction)
        terms += [(loss_name, "nsp_loss", None), (accuracy_name, "nsp_correct", "nsp_count")]
    if packed:
        terms.append(("instances_per_row", "instances", "rows"))
    if span_boundary:
        terms += [("sbo_loss", "sbo_loss", None),
                  ("span_boundary_accuracy", "sbo_correct", "mlm_weight_sum")]
    if bag_of_words:
        terms.append(("bow_loss", "bow_loss", None))
    return terms


def pretraining_metrics(sums, count, sentence_order_prediction=False):
    """Reported metrics from the summed parts of BertPretrainer.compute_pretraining_losses.

    Args:
      sums: part name -> float, each part summed over `count` (micro-batch, replica) terms;
        `instances` and `rows` too for packed rows.
      count: the number of summed terms.
      sentence_order_prediction: name the pair head's metrics sop_loss /
        sentence_order_accuracy instead of nsp_loss / next_sentence_accuracy.

    Returns:
      name -> float, as `pretraining_metric_terms` defines them; the pair head's metrics only
      when it predicted something (nsp_count > 0), sbo_loss / span_boundary_accuracy with the
      span-boundary objective, bow_loss with the [CLS] bag-of-words objective,
      instances_per_row for packed rows.
    """
    terms = pretraining_metric_terms(sentence_order_prediction, pair_head=sums["nsp_count"] > 0,
                                     span_boundary="sbo_loss" in sums, packed="instances" in sums,
                                     bag_of_words="bow_loss" in sums)
    return {name: sums[part] / (count if divisor is None else max(sums[divisor], 1e-12))
            for name, part, divisor in terms}


def _tracker_attribute(part):
    # mlm_loss -> mlm_loss_tracker, mlm_correct -> mlm_accuracy_tracker, ...
    return part.replace("_correct", "_accuracy") + "_tracker"


def masked_token_loss(logits_bpv, ids_bp, weights_bp, weight_sum):
    """The original masked-LM loss sum(w * CE) / (sum(w) + 1e-5) and the weighted hit count.

    Args:
      logits_bpv: float [B, P, V] logits at the masked positions.
      ids_bp: int32 [B, P] the original ids.
      weights_bp: float32 [B, P], 1 on real predictions.
      weight_sum: float32 scalar, sum of weights_bp.

    Returns:
      (loss, correct): float32 scalars.
    """
    logits_bpv = ops.cast(logits_bpv, "float32")
    ce_bp = ops.sparse_categorical_crossentropy(ids_bp, logits_bpv, from_logits=True)
    loss = ops.sum(weights_bp * ce_bp) / (weight_sum + _MLM_WEIGHT_EPSILON)
    return loss, ops.sum(weights_bp * hits(logits_bpv, ids_bp))


def original_word_ids(word_ids_bs, positions_bp, ids_bp, weights_bp):
    """The rows' tokens before masking: int32 [B, S].

    Args:
      word_ids_bs: int [B, S] the masked input.
      positions_bp, ids_bp: int [B, P] the masked positions and their original ids.
      weights_bp: float32 [B, P], 1 on real predictions (padding slots point at position 0).
    """
    word_ids_bs = ops.cast(word_ids_bs, "int32")
    # [B, P, S] is small (P ~ 0.15 S); ids stay exact in float32 (< 2**24). The max, not the
    # sum, over P: a position named twice (never by bert_tf's masking) stays one valid id.
    slots_bps = (ops.one_hot(ops.cast(positions_bp, "int32"), ops.shape(word_ids_bs)[1])
                 * ops.expand_dims(ops.cast(weights_bp > 0, "float32"), -1))
    masked_bs = ops.max(slots_bps, axis=1)
    restored_bs = ops.max(slots_bps * ops.expand_dims(ops.cast(ids_bp, "float32"), -1), axis=1)
    return ops.where(masked_bs > 0, ops.cast(ops.round(restored_bs), "int32"), word_ids_bs)


def bag_of_words_loss(logits_bv, word_ids_bs, mask_bs):
    """Cross-entropy of each row's words under one distribution predicted for the row.

    The mean over rows of -sum_s m_s log p(w_s) / sum_s m_s: the prediction that minimises it
    is the row's word frequencies, so one vector per row learns what the row is about.

    Args:
      logits_bv: float [B, V] one prediction per row.
      word_ids_bs: int32 [B, S] the row's words.
      mask_bs: float32 [B, S], 1 on the words to predict.

    Returns:
      float32 scalar.
    """
    log_probs_bv = ops.log_softmax(ops.cast(logits_bv, "float32"), axis=-1)
    log_probs_bs = ops.take_along_axis(log_probs_bv, word_ids_bs, axis=1)
    per_row_b = -ops.sum(mask_bs * log_probs_bs, axis=1) / ops.maximum(ops.sum(mask_bs, axis=1),
                                                                      1.0)
    return ops.mean(per_row_b)


def hits(logits_nc, labels_n):
    """1.0 where the arg-max class is the label. Args: float [..., C], int32 [...]."""
    predicted = ops.cast(ops.argmax(logits_nc, axis=-1), "int32")
    return ops.cast(ops.equal(predicted, labels_n), "float32")


class PretrainingLossTrackers:
    """`fit` / `evaluate` for a pre-trainer whose `compute_pretraining_losses(features, outputs)`
    returns summed parts: `compute_loss` trains on parts["loss"] and keeps a Keras tracker per
    reported metric. Mixed into keras.Model subclasses, which call `_create_trackers(terms)`
    (the [(metric name, part, divisor)] of e.g. `pretraining_metric_terms`) in __init__.
    """

    def _tracker_attribute(self, name, part):
        return _tracker_attribute(part)

    def _create_trackers(self, terms):
        # Keras' own tracker reports `loss`; the others are Means whose sample weight is the
        # divisor, so they accumulate the same ratios of sums as the custom loop's metrics.
        self._metric_terms = [term for term in terms if term[0] != "loss"]
        for name, part, _ in self._metric_terms:
            setattr(self, self._tracker_attribute(name, part), keras.metrics.Mean(name=name))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras hook used by fit/evaluate: `x` is the feature dict; `y` is unused.

        Also updates the pre-training metrics. Returns the per-replica loss scaled by
        1/num_replicas, as Keras' own losses are, so gradients sum to the global mean.
        """
        del y, sample_weight, training
        parts = self.compute_pretraining_losses(x, y_pred)
        loss = parts["loss"]
        if self.losses:
            loss = loss + sum(ops.cast(extra, "float32") for extra in self.losses)

        for name, part, divisor in self._metric_terms:
            tracker = getattr(self, self._tracker_attribute(name, part))
            if divisor is None:
                tracker.update_state(parts[part])
            else:
                # Mean with weight = divisor accumulates sum(part) / sum(divisor) over batches.
                weight = parts[divisor]
                tracker.update_state(parts[part] / ops.maximum(weight, 1e-12),
                                     sample_weight=weight)

        num_replicas = kernels.replicas_in_sync()
        if num_replicas > 1:
            loss = loss * (1.0 / num_replicas)
        return loss
