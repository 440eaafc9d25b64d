"""The run controller's loss functions of the training jobs: `(model, batch, training) ->
dict` of float32 scalars with "loss" and summable parts (controller.train's loss_fn), and the
metrics the task losses report.

Written in keras.ops, with no TensorFlow import: they run in TensorFlow's and JAX's compiled
steps, also where TensorFlow is not installed. Feature dicts: task_loop's module doc
(fine-tuning), bert_tf.modeling.BertPretrainer's (pre-training).
"""

from keras import ops


def pretraining_loss_fn(model, batch, training):
    """A BertPretrainer's (or ElectraPretrainer's) losses and summable parts."""
    outputs = model(batch, training=training)
    parts = model.compute_pretraining_losses(batch, outputs)
    if "input_instance_ids" in batch:
        # Packed rows: count instances (the highest instance id of a row) as well as rows, so
        # throughput and NSP accuracy are reported per instance.
        instance_ids = batch["input_instance_ids"]
        parts = dict(parts,
                     instances=ops.sum(ops.cast(ops.max(instance_ids, axis=1), "float32")),
                     rows=ops.cast(ops.shape(instance_ids)[0], "float32"))
    return parts


def _example_weights(batch, labels):
    weights = batch.get("example_weights")
    if weights is None:
        return ops.ones(ops.shape(labels)[:1], "float32")
    return ops.cast(weights, "float32")


def _weighted_mean(values, weights):
    return ops.sum(values * weights) / ops.maximum(ops.sum(weights), 1.0)


def _cross_entropy(labels, logits):
    """Per-position softmax cross-entropy of int labels; logits [..., C]."""
    return ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)


def _hits(labels, logits):
    """float32 1 where the argmax of logits [..., C] is the int label."""
    return ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), labels),
                    "float32")


def classification_loss_fn(model, batch, training):
    """Cross-entropy (or squared error when the model has one output) on `label_ids`; for a
    multi-label model (`model.multi_label`), sigmoid cross-entropy on multi-hot label_ids
    float32 [B, C], averaged over the C labels.

    Returns loss (mean over the batch's real examples) plus summable parts: `correct` (for
    multi-label the fraction of an example's labels predicted right, at probability 0.5)
    or `squared_error`, and `count`.
    """
    logits_bc = ops.cast(model(batch, training=training), "float32")
    weights_b = _example_weights(batch, batch["label_ids"])
    parts = {"count": ops.sum(weights_b)}
    if getattr(model, "multi_label", False):
        targets_bc = ops.cast(batch["label_ids"], "float32")
        per_label_bc = ops.binary_crossentropy(targets_bc, logits_bc, from_logits=True)
        parts["loss"] = _weighted_mean(ops.mean(per_label_bc, axis=-1), weights_b)
        hits_bc = ops.cast(ops.equal(ops.cast(logits_bc > 0, "float32"), targets_bc),
                           "float32")
        parts["correct"] = ops.sum(ops.mean(hits_bc, axis=-1) * weights_b)
        return parts
    if logits_bc.shape[-1] == 1:
        labels_b = ops.cast(batch["label_ids"], "float32")
        squared_b = ops.square(logits_bc[:, 0] - labels_b)
        parts["loss"] = _weighted_mean(squared_b, weights_b)
        parts["squared_error"] = ops.sum(squared_b * weights_b)
        return parts
    labels_b = ops.cast(batch["label_ids"], "int32")
    parts["loss"] = _weighted_mean(_cross_entropy(labels_b, logits_bc), weights_b)
    parts["correct"] = ops.sum(_hits(labels_b, logits_bc) * weights_b)
    return parts


def span_loss_fn(model, batch, training):
    """The original run_squad loss: the mean of the start and end cross-entropies."""
    outputs = model(batch, training=training)
    weights_b = _example_weights(batch, batch["start_positions"])
    parts = {"count": ops.sum(weights_b)}
    total = 0.0
    for name in ("start", "end"):
        logits_bs = ops.cast(outputs[f"{name}_logits"], "float32")
        labels_b = ops.cast(batch[f"{name}_positions"], "int32")
        total += 0.5 * _weighted_mean(_cross_entropy(labels_b, logits_bs), weights_b)
        parts[f"{name}_correct"] = ops.sum(_hits(labels_b, logits_bs) * weights_b)
    parts["loss"] = total
    return parts


def tagging_loss_fn(model, batch, training):
    """Token cross-entropy weighted by `label_weights` (first pieces of words, no padding)."""
    logits_bsc = ops.cast(model(batch, training=training), "float32")
    labels_bs = ops.cast(batch["label_ids"], "int32")
    weights_bs = ops.cast(batch["label_weights"], "float32")
    return {"loss": _weighted_mean(_cross_entropy(labels_bs, logits_bsc), weights_bs),
            "correct": ops.sum(_hits(labels_bs, logits_bsc) * weights_bs),
            "count": ops.sum(weights_bs)}


def training_metrics(sums, count):
    """metrics_fn for the task losses: mean loss, and accuracy / MSE from the summed parts."""
    metrics = {"loss": sums["loss"] / count}
    examples = max(sums["count"], 1e-12)
    if "correct" in sums:
        metrics["accuracy"] = sums["correct"] / examples
    if "squared_error" in sums:
        metrics["mse"] = sums["squared_error"] / examples
    for name in ("start", "end"):
        if f"{name}_correct" in sums:
            metrics[f"{name}_accuracy"] = sums[f"{name}_correct"] / examples
    return metrics
