"""Task models built on BertEncoder.

BertPretrainer (masked LM + next-sentence prediction, or the BERT-family objectives:
sentence-order prediction, SpanBERT's span-boundary objective, masked LM alone) for
pre-training; BertClassifier ([CLS] classification or regression), BertSpanLabeler
(start/end logits for span QA) and BertTokenClassifier (per-token tags) for fine-tuning.
"""

import keras
from keras import ops

from bert_tf.config import ENCODER_INPUTS
from bert_tf.modeling import kernels
from bert_tf.modeling.encoder_base import INSTANCE_IDS, Encoder
from bert_tf.modeling.heads import MaskedLMHead, SpanBoundaryHead
from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.token_ids import TakesTokenIds

# Added to the weight sum in the masked-LM loss denominator, as the original does, so a batch
# without predictions gives a loss of 0 rather than NaN.
_MLM_WEIGHT_EPSILON = 1e-5

# Features the span-boundary head reads besides masked_lm_positions.
_SPAN_BOUNDARY_FEATURES = ("span_left_boundaries", "span_right_boundaries")
# Packed rows: the row position of each instance's [CLS] [B, I], and 1 for a real instance.
_PAIR_POSITIONS = "next_sentence_positions"
_PAIR_WEIGHTS = "next_sentence_weights"


def pair_metric_names(sentence_order_prediction):
    """(loss name, accuracy name) of the pair head: NSP, or SOP when sentence_order_prediction."""
    if sentence_order_prediction:
        return "sop_loss", "sentence_order_accuracy"
    return "nsp_loss", "next_sentence_accuracy"


def pretraining_metric_terms(sentence_order_prediction=False, pair_head=True,
                             span_boundary=False, packed=False):
    """The one definition of the reported pre-training metrics.

    Returns:
      [(metric name, summed part, divisor)] over the parts of
      `BertPretrainer.compute_pretraining_losses` (plus `instances` and `rows` for packed
      rows): divisor None means a mean over the summed terms (batches x replicas), a part name
      a ratio of sums (exact across batches and replicas). Used by `pretraining_metrics` (the
      custom loop) and by BertPretrainer's Keras trackers (fit/evaluate).
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
      span-boundary objective, instances_per_row for packed rows.
    """
    terms = pretraining_metric_terms(sentence_order_prediction, pair_head=sums["nsp_count"] > 0,
                                     span_boundary="sbo_loss" in sums, packed="instances" in sums)
    return {name: sums[part] / (count if divisor is None else max(sums[divisor], 1e-12))
            for name, part, divisor in terms}


def from_config_with_encoder(cls, config):
    """`from_config` of the models built on an encoder: `cls(**config)`, the serialized
    `encoder` deserialized first."""
    config = dict(config)
    config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
    return cls(**config)


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


def hits(logits_nc, labels_n):
    """1.0 where the arg-max class is the label. Args: float [..., C], int32 [...]."""
    predicted = ops.cast(ops.argmax(logits_nc, axis=-1), "int32")
    return ops.cast(ops.equal(predicted, labels_n), "float32")


class UnusedPoolerNotTrained:
    """Leaves the encoder's pooler out of the trained variables when the heads do not use it.

    A head on sequence_output alone (MLM without NSP, span and token models) gives the pooler
    no gradient; leaving its variables out spares Keras' "Gradients do not exist" warning and
    keeps weight decay off them. Mixed into keras.Model subclasses with an `encoder`.
    """

    def _uses_pooler(self):
        return True

    def _untrained_variable_ids(self):
        if self._uses_pooler():
            return set()
        return {id(v) for v in self.encoder.get_layer("pooler").weights}

    @property
    def trainable_weights(self):
        untrained = self._untrained_variable_ids()
        return [v for v in super().trainable_weights if id(v) not in untrained]

    @property
    def trainable_variables(self):
        untrained = self._untrained_variable_ids()
        return [v for v in super().trainable_variables if id(v) not in untrained]

    @property
    def non_trainable_weights(self):
        untrained = self._untrained_variable_ids()
        return [v for v in self.weights if not v.trainable or id(v) in untrained]


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


@keras.saving.register_keras_serializable(package="bert_tf")
class BertPretrainer(TakesTokenIds, PretrainingLossTrackers, UnusedPoolerNotTrained, keras.Model):
    """BERT pre-training: a masked-LM head (tied to the word embeddings) and an NSP head.

    `call(features)` takes the pre-training feature dict (extra keys such as `masked_lm_ids`
    are ignored) and returns float32 logits:
      mlm_logits: [B, P, V] at `masked_lm_positions` [B, P].
      nsp_logits: [B, 2] from the pooled [CLS] vector (only with use_next_sentence_label);
        [B, I, 2] for packed rows, one per instance (see below).
      sbo_logits: [B, P, V] from the span boundaries (only with span_boundary_objective, when
        the features hold them: inference such as fill-mask needs only the masked-LM head).

    The losses are the original's: masked-LM = sum(w * CE) / (sum(w) + 1e-5) over the P slots
    with `masked_lm_weights` w; NSP = mean CE over the batch; loss = masked-LM + NSP. They are
    computed by `compute_pretraining_losses`, which `compute_loss` uses, so plain
    `compile(optimizer=...)` and `fit(dataset_of_feature_dicts)` train the model and log
    `loss`, `mlm_loss`, `masked_lm_accuracy` (weighted by w) and, with NSP,
    `nsp_loss`, `next_sentence_accuracy`.

    BERT-family objectives:
      * sentence-order prediction (ALBERT): the same 2-way head on the pooled vector, trained
        on `next_sentence_labels` that mean "the two segments are swapped" (1) instead of "B
        is random"; only the metric names change: `sop_loss`, `sentence_order_accuracy`.
      * span-boundary objective (SpanBERT): a `layers.SpanBoundaryHead` predicts every masked
        token from the states of its span's boundary tokens (`span_left_boundaries`,
        `span_right_boundaries` [B, P] in the features) and its offset in the span; its loss
        (the masked-LM formula on `sbo_logits`) is added: loss = masked-LM + SBO (+ NSP/SOP),
        logged as `sbo_loss` and `span_boundary_accuracy`.
      * masked LM alone (RoBERTa, SpanBERT): use_next_sentence_label=False.

    Packed rows (several instances per row, Krell et al. 2021): with `input_instance_ids` in
    the features the encoder keeps instances apart (see BertEncoder); masked_lm_positions and
    the span boundaries are row positions. With `next_sentence_positions` [B, I] (each
    instance's [CLS], 0 in unused slots) the pair head reads the pooler at each of them:
    nsp_logits [B, I, 2], and the pair loss and accuracy are averaged over the real instances
    given by `next_sentence_weights` [B, I] with `next_sentence_labels` [B, I]. No new
    variables: packed and unpacked models share checkpoints.

    Sub-layers and their TF1 names: `masked_lm` (cls/predictions: transform, transform_layer_norm,
    output_bias; the output matrix is bert/embeddings/word_embeddings), `next_sentence`
    (cls/seq_relationship: kernel [H, 2] = output_weights transposed, bias) and, with SBO,
    `span_boundary`.

    Args:
      encoder: a `BertEncoder` (any BERT-family config).
      use_next_sentence_label: add the 2-way pair head and its loss (False: masked LM only, as
        RoBERTa).
      sentence_order_prediction: the pair head is trained for sentence order (ALBERT's SOP)
        rather than next-sentence prediction; needs use_next_sentence_label.
      span_boundary_objective: add SpanBERT's span-boundary head and loss.
      max_span_pieces: rows of the SBO head's relative-position table.
      **kwargs: `name`, `trainable`. The heads take the encoder's dtype policy.

    Examples:

    >>> from bert_tf.config import BertConfig
    >>> from bert_tf.modeling import BertEncoder
    >>> encoder = BertEncoder(BertConfig.from_preset("bert_tiny", vocab_size=100))
    >>> model = BertPretrainer(encoder)
    >>> model.compile(optimizer=keras.optimizers.AdamW(1e-4))
    >>> # model.fit(bert_tf.data.pretraining_dataset(...), epochs=1)
    """

    text_task = "FillMask"

    def __init__(self, encoder, use_next_sentence_label=True, sentence_order_prediction=False,
                 span_boundary_objective=False, max_span_pieces=32, **kwargs):
        if not isinstance(encoder, Encoder):
            raise TypeError(f"BertPretrainer: encoder must be a BertEncoder or "
                            f"ModernBertEncoder, got {type(encoder).__name__}")
        if sentence_order_prediction and not use_next_sentence_label:
            raise ValueError("BertPretrainer: sentence_order_prediction=True needs "
                             "use_next_sentence_label=True (SOP trains the pair head)")
        kwargs.setdefault("name", "bert_pretrainer")
        super().__init__(**kwargs)
        self.encoder = encoder
        self.use_next_sentence_label = use_next_sentence_label
        self.sentence_order_prediction = sentence_order_prediction
        self.span_boundary_objective = span_boundary_objective
        self.max_span_pieces = max_span_pieces
        config = encoder.config
        policy = encoder.dtype_policy

        self.masked_lm = MaskedLMHead(
            encoder.word_embeddings, hidden_act=config.hidden_act,
            initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
            input_size=config.hidden_size, use_bias=config.use_bias,
            norm_bias=config.norm_bias, dtype=policy, name="masked_lm")
        self.masked_lm.build()
        if span_boundary_objective:
            self.span_boundary = SpanBoundaryHead(
                encoder.word_embeddings, config.hidden_size, max_span_pieces=max_span_pieces,
                hidden_act=config.hidden_act, initializer_range=config.initializer_range,
                layer_norm_eps=config.layer_norm_eps, dtype=policy, name="span_boundary")
            self.span_boundary.build()
        else:
            self.span_boundary = None
        if use_next_sentence_label:
            self.next_sentence = keras.layers.Dense(
                2, kernel_initializer=truncated_normal(config.initializer_range),
                dtype=policy, name="next_sentence")
            self.next_sentence.build((None, config.hidden_size))
        else:
            self.next_sentence = None
        # Every weight exists now, so a .keras file loads without a symbolic build.
        self.built = True

        self._create_trackers(pretraining_metric_terms(
            sentence_order_prediction, pair_head=use_next_sentence_label,
            span_boundary=span_boundary_objective))

    def _uses_pooler(self):
        return self.next_sentence is not None

    def call(self, features, training=None):
        """Runs the encoder and the heads.

        Args:
          features: dict with int32 input_word_ids, input_mask, input_type_ids [B, S] and
            masked_lm_positions [B, P] (with SBO, for training, also span_left_boundaries and
            span_right_boundaries [B, P]); packed rows add input_instance_ids [B, S] and
            next_sentence_positions [B, I]; other keys are ignored.
          training: enables dropout.

        Returns:
          dict: mlm_logits float32 [B, P, V]; nsp_logits float32 [B, 2] when the pair head is
          on ([B, I, 2] with next_sentence_positions); sbo_logits float32 [B, P, V] with SBO
          when the span boundaries are given.
        """
        missing = [k for k in ENCODER_INPUTS + ("masked_lm_positions",) if k not in features]
        if (self.next_sentence is not None and INSTANCE_IDS in features
                and _PAIR_POSITIONS not in features):
            # Without it the pair head would silently read only the row's first instance.
            missing.append(_PAIR_POSITIONS)
        if missing:
            raise KeyError(f"BertPretrainer: features lack {', '.join(missing)}; got "
                           f"{', '.join(sorted(features))}")
        encoder_inputs = {k: features[k] for k in ENCODER_INPUTS + (INSTANCE_IDS,)
                          if k in features}
        encoder_outputs = self.encoder(encoder_inputs, training=training)
        sequence_bsh = encoder_outputs["sequence_output"]
        outputs = {"mlm_logits": self.masked_lm(sequence_bsh, features["masked_lm_positions"])}
        if self.next_sentence is not None:
            if _PAIR_POSITIONS in features:
                pooled = self.encoder.pool_at(sequence_bsh, features[_PAIR_POSITIONS])  # [B, I, H]
            else:
                pooled = encoder_outputs["pooled_output"]  # [B, H]
            outputs["nsp_logits"] = ops.cast(self.next_sentence(pooled), "float32")
        if self.span_boundary is not None and all(k in features
                                                  for k in _SPAN_BOUNDARY_FEATURES):
            outputs["sbo_logits"] = self.span_boundary(
                encoder_outputs["sequence_output"], features["masked_lm_positions"],
                *(features[k] for k in _SPAN_BOUNDARY_FEATURES))
        return outputs

    def compute_pretraining_losses(self, features, outputs):
        """The pre-training losses and the parts of exact accuracies, all float32 scalars.

        Args:
          features: the feature dict; uses masked_lm_ids int [B, P], masked_lm_weights
            float [B, P] and (with the pair head) next_sentence_labels int [B] or [B, 1]; for
            packed rows (nsp_logits [B, I, 2]) next_sentence_labels int [B, I] and
            next_sentence_weights float [B, I].
          outputs: what `call` returned.

        Returns:
          dict with `loss` (= mlm_loss + nsp_loss [+ sbo_loss]), `mlm_loss`, `nsp_loss` (the
          pair head's loss, NSP or SOP, a mean over rows or, packed, over real instances; 0
          without it), and sums that aggregate exactly across batches and replicas:
          `mlm_correct` (weighted count of correct masked predictions), `mlm_weight_sum`,
          `nsp_correct`, `nsp_count` (rows, or packed: real instances). With SBO also `sbo_loss` and
          `sbo_correct` (its weight sum is mlm_weight_sum).
        """
        ids_bp = ops.cast(features["masked_lm_ids"], "int32")
        weights_bp = ops.cast(features["masked_lm_weights"], "float32")
        mlm_weight_sum = ops.sum(weights_bp)
        mlm_loss, mlm_correct = masked_token_loss(outputs["mlm_logits"], ids_bp, weights_bp,
                                                   mlm_weight_sum)

        zero = ops.convert_to_tensor(0.0, "float32")
        nsp_loss = nsp_correct = nsp_count = zero
        if self.next_sentence is not None:
            logits_n2 = ops.reshape(ops.cast(outputs["nsp_logits"], "float32"), [-1, 2])
            labels_n = ops.reshape(ops.cast(features["next_sentence_labels"], "int32"), [-1])
            ce_n = ops.sparse_categorical_crossentropy(labels_n, logits_n2, from_logits=True)
            hits_n = hits(logits_n2, labels_n)
            if len(outputs["nsp_logits"].shape) == 3:  # packed: N = B*I instance slots
                if _PAIR_WEIGHTS not in features:
                    raise KeyError(f"BertPretrainer: packed features (with {_PAIR_POSITIONS}) "
                                   f"lack {_PAIR_WEIGHTS}; got {', '.join(sorted(features))}")
                weights_n = ops.reshape(ops.cast(features[_PAIR_WEIGHTS], "float32"), [-1])
                nsp_count = ops.sum(weights_n)
                nsp_loss = ops.divide_no_nan(ops.sum(weights_n * ce_n), nsp_count)
                nsp_correct = ops.sum(weights_n * hits_n)
            else:
                nsp_loss = ops.mean(ce_n)
                nsp_correct = ops.sum(hits_n)
                nsp_count = ops.cast(ops.size(labels_n), "float32")
        parts = {"loss": mlm_loss + nsp_loss, "mlm_loss": mlm_loss, "nsp_loss": nsp_loss,
                 "mlm_correct": mlm_correct, "mlm_weight_sum": mlm_weight_sum,
                 "nsp_correct": nsp_correct, "nsp_count": nsp_count}
        if self.span_boundary is not None:
            if "sbo_logits" not in outputs:
                missing = [k for k in _SPAN_BOUNDARY_FEATURES if k not in features]
                raise KeyError(f"BertPretrainer: the span-boundary objective needs "
                               f"{', '.join(missing)} in the features (span-masked input)")
            sbo_loss, sbo_correct = masked_token_loss(outputs["sbo_logits"], ids_bp, weights_bp,
                                                       mlm_weight_sum)
            parts.update(loss=parts["loss"] + sbo_loss, sbo_loss=sbo_loss,
                         sbo_correct=sbo_correct)
        return parts

    def get_config(self):
        config = super().get_config()
        config.update(encoder=keras.saving.serialize_keras_object(self.encoder),
                      use_next_sentence_label=self.use_next_sentence_label)
        # The family options only when set, so a BERT pretrainer's config stays as it was.
        if self.sentence_order_prediction:
            config["sentence_order_prediction"] = True
        if self.span_boundary_objective:
            config.update(span_boundary_objective=True, max_span_pieces=self.max_span_pieces)
        return config

    from_config = classmethod(from_config_with_encoder)


class EncoderTaskModel(TakesTokenIds, UnusedPoolerNotTrained, keras.Model):
    """Shared plumbing of the fine-tuning models: a functional graph over the encoder inputs.

    Subclasses build `outputs` from the encoder's outputs in `_head`; the model takes the
    encoder's three int32 inputs (extra dict keys, such as labels, are dropped), round-trips
    through `.keras` files and exposes the encoder as `.encoder`.
    """

    def __init__(self, encoder, dropout_rate=None, **kwargs):
        if not isinstance(encoder, Encoder):
            raise TypeError(f"{type(self).__name__}: encoder must be a BertEncoder or "
                            f"ModernBertEncoder, got {type(encoder).__name__}")
        config = encoder.config
        self._head_dropout = (config.hidden_dropout_prob if dropout_rate is None
                              else float(dropout_rate))
        inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name)
                  for name in ENCODER_INPUTS}
        outputs = self._head(encoder, encoder(inputs), config, encoder.dtype_policy)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder
        self.dropout_rate = dropout_rate

    def _head(self, encoder, encoder_outputs, config, policy):
        raise NotImplementedError

    def call(self, inputs, training=None, mask=None):
        # Labels may ride along in the feature dict; a missing input is reported by Keras'
        # input check (naming it) before this runs.
        if isinstance(inputs, dict):
            inputs = {k: inputs[k] for k in ENCODER_INPUTS}
        return super().call(inputs, training=training, mask=mask)

    def compile_from_config(self, config):
        # Keras skips compiling on load when `compile` is overridden; these overrides only
        # fill in default losses, and the saved config holds the ones actually used.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _dense(self, units, config, policy, name):
        return keras.layers.Dense(units, kernel_initializer=truncated_normal(
            config.initializer_range), dtype=policy, name=name)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "encoder": keras.saving.serialize_keras_object(self.encoder),
                "dropout_rate": self.dropout_rate}

    from_config = classmethod(from_config_with_encoder)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertClassifier(EncoderTaskModel):
    """Sentence / sentence-pair classification (or regression) from the pooled [CLS] vector.

    logits = dense(dropout(pooled_output)): float32 [B, num_classes]. With num_classes=1 the
    output is a regression score [B, 1] (STS-B). The dense layer is `classifier`
    (kernel [H, C]; the original run_classifier.py's `output_weights` [C, H] transposed).

    `compile()` without a loss picks the usual one: sparse categorical cross-entropy on logits
    with accuracy for classes, mean squared error for regression. `fit` takes
    `(features, labels)` with features the encoder's input dict and int labels [B]
    (float [B] for regression).

    Args:
      encoder: a `BertEncoder` (pre-trained or fresh).
      num_classes: C; 1 for regression.
      dropout_rate: dropout before the dense layer (default: the config's hidden_dropout_prob).
      **kwargs: `name`, `trainable`.

    Examples:

    >>> from bert_tf.config import BertConfig
    >>> from bert_tf.modeling import BertEncoder
    >>> model = BertClassifier(BertEncoder(BertConfig.from_preset("bert_tiny")), num_classes=3)
    >>> ids = keras.ops.ones((2, 8), "int32")
    >>> tuple(model({"input_word_ids": ids, "input_mask": ids,
    ...              "input_type_ids": keras.ops.zeros_like(ids)}).shape)
    (2, 3)
    """

    text_task = "TextClassifier"

    def __init__(self, encoder, num_classes, dropout_rate=None, **kwargs):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
            raise ValueError(f"BertClassifier: num_classes={num_classes!r} must be an int >= 1")
        self.num_classes = num_classes
        kwargs.setdefault("name", "bert_classifier")
        super().__init__(encoder, dropout_rate, **kwargs)

    def _head(self, encoder, encoder_outputs, config, policy):
        pooled_bh = keras.layers.Dropout(self._head_dropout, dtype=policy, name="dropout")(
            encoder_outputs["pooled_output"])
        logits_bc = self._dense(self.num_classes, config, policy, "classifier")(pooled_bh)
        return keras.layers.Activation("linear", dtype="float32", name="logits")(logits_bc)

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        if loss is None:
            if self.num_classes == 1:
                loss = keras.losses.MeanSquaredError()
            else:
                loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                if metrics is None:
                    metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        return dict(super().get_config(), num_classes=self.num_classes)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertSpanLabeler(EncoderTaskModel):
    """Span question answering (SQuAD): a start and an end logit for every token.

    One dense layer `span_logits` (kernel [H, 2]; the original run_squad.py's
    `cls/squad/output_weights` [2, H] transposed) on sequence_output. Outputs a dict of
    float32 `start_logits` and `end_logits`, each [B, S]. Positions outside the context are
    not masked here; the SQuAD post-processing only considers context tokens.

    `compile()` without a loss uses sparse categorical cross-entropy on both outputs (the
    original's loss: the mean of the start and end cross-entropies); `fit` takes
    `(features, {"start_logits": start_positions [B], "end_logits": end_positions [B]})`.

    Args:
      encoder: a `BertEncoder`.
      dropout_rate: dropout before the dense layer (default 0: the original adds none).
      **kwargs: `name`, `trainable`.
    """

    text_task = "QuestionAnswerer"

    def __init__(self, encoder, dropout_rate=0.0, **kwargs):
        kwargs.setdefault("name", "bert_span_labeler")
        super().__init__(encoder, dropout_rate, **kwargs)

    def _uses_pooler(self):
        return False

    def _head(self, encoder, encoder_outputs, config, policy):
        sequence_bsh = encoder_outputs["sequence_output"]
        if self._head_dropout:
            sequence_bsh = keras.layers.Dropout(self._head_dropout, dtype=policy,
                                                name="dropout")(sequence_bsh)
        logits_bs2 = self._dense(2, config, policy, "span_logits")(sequence_bsh)
        logits_bs2 = keras.layers.Activation("linear", dtype="float32", name="cast")(logits_bs2)
        start_bs, end_bs = _SplitLastAxis(name="split")(logits_bs2)
        return {"start_logits": start_bs, "end_logits": end_bs}

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        if loss is None:
            ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            loss = {"start_logits": ce, "end_logits": ce}
            kwargs.setdefault("loss_weights", {"start_logits": 0.5, "end_logits": 0.5})
            if metrics is None:
                metrics = {name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
                           for name in ("start_logits", "end_logits")}
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)


@keras.saving.register_keras_serializable(package="bert_tf")
class _SplitLastAxis(keras.layers.Layer):
    """[B, S, 2] -> ([B, S], [B, S])."""

    def call(self, x_bs2):
        return x_bs2[..., 0], x_bs2[..., 1]

    def compute_output_spec(self, x_bs2):
        spec = keras.KerasTensor(x_bs2.shape[:-1], x_bs2.dtype)
        return spec, keras.KerasTensor(x_bs2.shape[:-1], x_bs2.dtype)


@keras.saving.register_keras_serializable(package="bert_tf")
class BertTokenClassifier(EncoderTaskModel):
    """Token tagging (NER, POS): class logits for every token.

    logits = dense(dropout(sequence_output)): float32 [B, S, num_classes], dense layer
    `classifier`. `compile()` without a loss uses sparse categorical cross-entropy on logits;
    labels are int [B, S] and a `sample_weight` [B, S] (1 on the first piece of each word, 0
    elsewhere, as the fine-tuning data gives it) keeps padding and continuation pieces out of
    the loss.

    Args:
      encoder: a `BertEncoder`.
      num_classes: number of tags C.
      dropout_rate: dropout before the dense layer (default: the config's hidden_dropout_prob).
      **kwargs: `name`, `trainable`.
    """

    text_task = "TokenTagger"

    def __init__(self, encoder, num_classes, dropout_rate=None, **kwargs):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"BertTokenClassifier: num_classes={num_classes!r} must be an "
                             "int >= 2")
        self.num_classes = num_classes
        kwargs.setdefault("name", "bert_token_classifier")
        super().__init__(encoder, dropout_rate, **kwargs)

    def _uses_pooler(self):
        return False

    def _head(self, encoder, encoder_outputs, config, policy):
        sequence_bsh = keras.layers.Dropout(self._head_dropout, dtype=policy, name="dropout")(
            encoder_outputs["sequence_output"])
        logits_bsc = self._dense(self.num_classes, config, policy, "classifier")(sequence_bsh)
        return keras.layers.Activation("linear", dtype="float32", name="logits")(logits_bsc)

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        if loss is None:
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            if metrics is None:
                kwargs.setdefault("weighted_metrics", [
                    keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        return dict(super().get_config(), num_classes=self.num_classes)
