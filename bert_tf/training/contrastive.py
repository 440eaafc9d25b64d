"""Contrastive fine-tuning of a BertSentenceEmbedder: in-batch negatives, bucketed pair batches.

The loss is the multiple-negatives ranking loss (Henderson et al. 2017; sentence-transformers'
MultipleNegativesRankingLoss): for a batch of B (anchor, positive[, negative]) rows, anchor i
scores every positive of the batch (and every hard negative) by scale * cosine similarity, and
the loss is the cross-entropy of picking its own positive i. The other B - 1 positives are the
negatives, so a batch needs B >= 2. `symmetric` adds the reverse direction (each positive
picks its anchor among the batch's anchors) and averages the two (sentence-transformers'
MultipleNegativesSymmetricRankingLoss).

Batches: the rows are tokenised once (in-graph WordPiece), shuffled every epoch, batched with
drop_remainder (static B), and each side is packed ([CLS] ids [SEP]) and padded to the smallest
length bucket that holds its own longest text: short queries do not pay for long passages.
"""

import dataclasses
import time

import numpy as np
import keras
import tensorflow as tf
from absl import logging

from bert_tf.config import ENCODER_INPUTS
from bert_tf.metrics.retrieval import retrieval_metrics, spearman
from bert_tf.training import task_loop
from bert_tf.training.loop_config import TrainLoopConfig
from bert_tf.training.optimization import create_optimizer

SIDES = ("anchor", "positive", "negative")


def feature_name(side, name):
    """'anchor_input_word_ids', ...: the batch keys of one side's encoder inputs."""
    return f"{side}_{name}"


def multiple_negatives_ranking_loss(anchors_bd, positives_bd, negatives_bd=None, scale=20.0,
                                    symmetric=False):
    """The in-batch-negatives loss and the number of anchors that ranked their positive first.

    Args:
      anchors_bd, positives_bd: float [B, D] embeddings (normalised here).
      negatives_bd: optional float [B, D] hard negatives, scored as extra candidates.
      scale: the inverse temperature applied to cosine similarities (20 as sentence-
        transformers).
      symmetric: average with the positive -> anchor direction.

    Returns:
      (loss, correct): float32 scalars; correct counts anchors whose own positive scored
      highest among all candidates.
    """
    # keras.ops: the loss runs in TensorFlow's and JAX's compiled steps.
    def unit(x_bd):
        return keras.ops.normalize(keras.ops.cast(x_bd, "float32"), axis=-1, order=2)

    anchors_bd, positives_bd = unit(anchors_bd), unit(positives_bd)
    candidates_nd = positives_bd
    if negatives_bd is not None:
        candidates_nd = keras.ops.concatenate([positives_bd, unit(negatives_bd)], axis=0)
    logits_bn = scale * keras.ops.matmul(anchors_bd, keras.ops.transpose(candidates_nd))
    labels_b = keras.ops.arange(keras.ops.shape(anchors_bd)[0], dtype="int32")
    loss = keras.ops.mean(keras.ops.sparse_categorical_crossentropy(labels_b, logits_bn,
                                                                    from_logits=True))
    if symmetric:
        logits_bb = scale * keras.ops.matmul(positives_bd, keras.ops.transpose(anchors_bd))
        backward = keras.ops.mean(keras.ops.sparse_categorical_crossentropy(
            labels_b, logits_bb, from_logits=True))
        loss = (loss + backward) / 2.0
    correct = keras.ops.sum(keras.ops.cast(keras.ops.equal(
        keras.ops.cast(keras.ops.argmax(logits_bn, axis=-1), "int32"), labels_b), "float32"))
    return loss, correct


def contrastive_loss_fn(scale=20.0, symmetric=False):
    """A loss_fn for the run controller / task_loop.fine_tune over pair batches.

    The batch holds each side's encoder inputs under `feature_name(side, ...)` (the negative
    side optional). Returns {"loss", "correct", "count"}, so task_loop.training_metrics reports
    the in-batch accuracy as `accuracy`.
    """

    def loss_fn(model, batch, training):
        embeddings = {}
        for side in SIDES:
            if feature_name(side, "input_word_ids") in batch:
                embeddings[side] = model({name: batch[feature_name(side, name)]
                                          for name in ENCODER_INPUTS}, training=training)
        loss, correct = multiple_negatives_ranking_loss(
            embeddings["anchor"], embeddings["positive"], embeddings.get("negative"),
            scale=scale, symmetric=symmetric)
        count = keras.ops.cast(keras.ops.shape(embeddings["anchor"])[0], "float32")
        return {"loss": loss, "correct": correct, "count": count}

    return loss_fn


def _packed_side(ids, batch_size, width_buckets, cls_id, sep_id, pad_id):
    """ragged int32 [B, (T)] -> the encoder inputs [B, L], L the bucket of the longest row."""
    edge = tf.ones([batch_size, 1], tf.int32)
    ids = tf.concat([edge * cls_id, ids, edge * sep_id], axis=1)
    longest = tf.reduce_max(ids.row_lengths())
    width = tf.reduce_min(tf.where(width_buckets >= longest, width_buckets,
                                   width_buckets[-1]))
    word_ids = ids.to_tensor(default_value=pad_id, shape=[batch_size, width])
    mask = tf.ones_like(ids).to_tensor(default_value=0, shape=[batch_size, width])
    return {"input_word_ids": word_ids, "input_mask": mask,
            "input_type_ids": tf.zeros_like(mask)}


def pair_dataset(side_ids, batch_size, buckets, cls_id, sep_id, pad_id, seed=None,
                 shuffle=True, repeat=True):
    """Batches of tokenised rows for contrastive training.

    Args:
      side_ids: side name -> list of int32 arrays (each text's WordPiece ids, at most
        max_seq_length - 2), one per row; "anchor" and "positive" required.
      batch_size: B; the last partial batch of an epoch is dropped (B >= 2 everywhere).
      buckets: increasing lengths ending with max_seq_length.
      cls_id, sep_id, pad_id: the vocabulary's special ids.
      seed: shuffle seed (reshuffled every epoch).
      shuffle, repeat: shuffle the rows; repeat the epochs forever.

    Returns:
      Dataset of dicts `feature_name(side, input)` -> int32 [B, L_side].
    """
    ragged = {side: tf.RaggedTensor.from_row_lengths(
        np.concatenate(rows).astype(np.int32), [len(ids) for ids in rows])
        for side, rows in side_ids.items()}
    dataset = tf.data.Dataset.from_tensor_slices(ragged)
    if shuffle:
        dataset = dataset.shuffle(len(side_ids["anchor"]), seed=seed,
                                  reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.ragged_batch(batch_size, drop_remainder=True)
    buckets_t = tf.constant(buckets, tf.int64)

    def pack(rows):
        features = {}
        for side, ids in rows.items():
            packed = _packed_side(ids, batch_size, buckets_t, cls_id, sep_id, pad_id)
            for name, value in packed.items():
                features[feature_name(side, name)] = value
        return features

    return dataset.map(pack, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


@dataclasses.dataclass
class RetrievalSet:
    """Queries, a corpus and the relevant corpus indices of each query (from a pair file: each
    anchor is a query, the distinct positives (and negatives) the corpus)."""

    queries: list
    corpus: list
    relevant: list

    @classmethod
    def from_pairs(cls, pairs):
        index = {}
        for text in pairs.positives + (pairs.negatives or []):
            index.setdefault(text, len(index))
        # Identical queries share their positives.
        relevant_of = {}
        for anchor, positive in zip(pairs.anchors, pairs.positives):
            relevant_of.setdefault(anchor, set()).add(index[positive])
        queries = list(relevant_of)
        return cls(queries=queries, corpus=list(index),
                   relevant=[relevant_of[q] for q in queries])


def evaluate_embeddings(embedder, retrieval=None, scored=None):
    """Retrieval metrics on `retrieval` and Spearman on `scored`, with the model's current
    weights.

    Args:
      embedder: a bert_tf.training.bulk_embedder.BulkEmbedder.
      retrieval: a RetrievalSet, or None.
      scored: a bert_tf.data.tasks.pairs.ScoredPairs, or None.

    Returns:
      dict: recall@1, recall@10, mrr@10, ndcg@10 (with retrieval) and spearman (the rank
      correlation of cosine similarities with the scores, with scored).
    """
    metrics = {}
    if retrieval is not None:
        queries = _unit(embedder.embed(retrieval.queries))
        corpus = _unit(embedder.embed(retrieval.corpus))
        metrics.update(retrieval_metrics(queries @ corpus.T, retrieval.relevant))
    if scored is not None:
        a = _unit(embedder.embed(scored.texts_a))
        b = _unit(embedder.embed(scored.texts_b))
        metrics["spearman"] = spearman((a * b).sum(1), scored.scores)
    return metrics


def _unit(vectors):
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


@dataclasses.dataclass
class ContrastiveConfig:
    """Settings of a contrastive fine-tuning run (bert-tf-embed's training flags:
    bert_tf.jobs.embedding.contrastive_config builds it from an EmbeddingConfig's trainer,
    task and runtime sections).

    Attributes:
      output_dir: checkpoints, summaries, best/.
      train_batch_size: rows per batch (>= 2: in-batch negatives).
      num_train_epochs: passes over the rows (each drops its last partial batch).
      learning_rate, warmup_proportion, weight_decay_rate: AdamW with linear warmup and decay.
      scale: inverse temperature of the cosine similarities.
      symmetric_loss: add the positive -> anchor direction.
      length_buckets: lengths a side of a batch is padded to (ending with max_seq_length).
      save_checkpoints_steps: checkpoint and evaluate every N steps (None: once per epoch).
      steps_per_loop, log_steps, jit_compile: as TrainLoopConfig's.
      seed: shuffle seed.
    """

    output_dir: str
    train_batch_size: int = 32
    num_train_epochs: float = 1.0
    learning_rate: float = 2e-5
    warmup_proportion: float = 0.1
    weight_decay_rate: float = 0.01
    scale: float = 20.0
    symmetric_loss: bool = False
    length_buckets: tuple = (16, 32, 48, 64, 96, 128)
    save_checkpoints_steps: int = None
    steps_per_loop: int = 100
    log_steps: int = None
    jit_compile: object = False
    seed: int = None

    def __post_init__(self):
        if self.train_batch_size < 2:
            raise ValueError(f"--train_batch_size={self.train_batch_size}: in-batch negatives "
                             "need at least 2 rows per batch")


def train_embedder(config, model, embedder, train_pairs, runtime, retrieval=None,
                   scored=None):
    """Fine-tunes `model` contrastively; leaves the best weights (by nDCG@10 on `retrieval`,
    else Spearman on `scored`, else the last ones) in it.

    Args:
      config: a ContrastiveConfig.
      model: the BertSentenceEmbedder, built under `runtime.scope()`.
      embedder: a BulkEmbedder of `model` (tokenises the rows and evaluates).
      train_pairs: bert_tf.data.tasks.pairs.TextPairs (pairs or triplets).
      runtime: the training.runtime.Runtime.
      retrieval, scored: optional dev sets (RetrievalSet, ScoredPairs).

    Returns:
      dict: "before" (metrics of the model as given), "evaluations", "best", "step", "train"
      (the loop's final metrics and timing) and "tokenize_seconds".
    """
    if len(train_pairs) < config.train_batch_size:
        raise ValueError(f"--train_batch_size={config.train_batch_size} exceeds the "
                         f"{len(train_pairs)} pairs of {train_pairs.path}")
    start = time.time()
    side_ids = {"anchor": embedder.token_ids(train_pairs.anchors),
                "positive": embedder.token_ids(train_pairs.positives)}
    if train_pairs.negatives is not None:
        side_ids["negative"] = embedder.token_ids(train_pairs.negatives)
    tokenize_seconds = time.time() - start
    logging.info("Tokenised %d training rows in %.1f s", len(train_pairs), tokenize_seconds)
    tokenizer = embedder.tokenizer
    batch_size = config.train_batch_size // runtime.num_replicas

    def dataset_fn(input_context):
        del input_context
        return pair_dataset(side_ids, batch_size, config.length_buckets, tokenizer.cls_id,
                            tokenizer.sep_id, tokenizer.pad_id, seed=config.seed)

    steps_per_epoch = len(train_pairs) // config.train_batch_size
    num_train_steps = max(1, int(steps_per_epoch * config.num_train_epochs))
    with runtime.scope():
        optimizer = create_optimizer(
            config.learning_rate, num_train_steps,
            task_loop.num_warmup_steps(num_train_steps, config.warmup_proportion),
            weight_decay_rate=config.weight_decay_rate)
    evaluate_fn, best_metric, before = None, None, {}
    if retrieval is not None or scored is not None:
        best_metric = "ndcg@10" if retrieval is not None else "spearman"

        def evaluate_fn():
            return evaluate_embeddings(embedder, retrieval, scored)

        before = evaluate_fn()
        logging.info("Before training: %s",
                     " ".join(f"{k}={v:.4f}" for k, v in sorted(before.items())))
    results = task_loop.fine_tune(
        model=model, optimizer=optimizer,
        loss_fn=contrastive_loss_fn(config.scale, config.symmetric_loss),
        train_dataset_fn=dataset_fn, runtime=runtime, output_dir=config.output_dir,
        loop_config=TrainLoopConfig(
            num_train_steps=num_train_steps, steps_per_loop=config.steps_per_loop,
            save_checkpoints_steps=config.save_checkpoints_steps or steps_per_epoch,
            log_steps=config.log_steps, global_batch_size=config.train_batch_size,
            jit_compile=config.jit_compile),
        evaluate_fn=evaluate_fn, best_metric=best_metric)
    return {"before": before, "best": results["best"], "step": results["step"],
            "evaluations": results["evaluations"], "tokenize_seconds": tokenize_seconds,
            "train": {k: v for k, v in results["train"].items()
                      if isinstance(v, (int, float))}}

