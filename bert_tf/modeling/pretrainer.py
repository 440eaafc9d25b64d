"""BertPretrainer: BERT pre-training (masked LM + next-sentence prediction) and the
BERT-family objectives (sentence-order prediction, SpanBERT's span-boundary objective, masked
LM alone)."""

import keras
from keras import ops

from bert_tf.config import ENCODER_INPUTS
from bert_tf.modeling.encoder_base import INSTANCE_IDS, Encoder
from bert_tf.modeling.heads import MaskedLMHead, SpanBoundaryHead
from bert_tf.modeling.initializers import truncated_normal
from bert_tf.modeling.pretraining_metrics import (
    PretrainingLossTrackers,
    bag_of_words_loss,
    hits,
    masked_token_loss,
    original_word_ids,
    pretraining_metric_terms,
)
from bert_tf.modeling.task_model import UnusedPoolerNotTrained, from_config_with_encoder
from bert_tf.modeling.token_ids import TakesTokenIds

# Features the span-boundary head reads besides masked_lm_positions.
_SPAN_BOUNDARY_FEATURES = ("span_left_boundaries", "span_right_boundaries")
# Packed rows: the row position of each instance's [CLS] [B, I], and 1 for a real instance.
_PAIR_POSITIONS = "next_sentence_positions"
_PAIR_WEIGHTS = "next_sentence_weights"


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
      bow_logits: [B, 1, V] from the [CLS] vector (only with bag_of_words_weight > 0, when the
        features hold masked_lm_ids, as training and evaluation batches do).

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
      * [CLS] bag of words (bag_of_words_weight > 0): the masked-LM head, read at position 0,
        predicts the row's words (their frequencies: `bag_of_words_loss`, over every real
        token after [CLS], masked ones by their original id); loss += weight x bow_loss,
        logged as `bow_loss`. A masked LM alone trains nothing into the last layer's [CLS]
        vector (no loss reads it), which sentence-level uses of the encoder start from; this
        makes it summarise its row. No new variables.

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
      bag_of_words_weight: the weight of the [CLS] bag-of-words loss (0: off); not with
        packed rows (input_instance_ids), whose [CLS] vectors each see one instance.
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
                 span_boundary_objective=False, max_span_pieces=32, bag_of_words_weight=0.0,
                 **kwargs):
        if not isinstance(encoder, Encoder):
            raise TypeError(f"BertPretrainer: encoder must be a BertEncoder or "
                            f"ModernBertEncoder, got {type(encoder).__name__}")
        if sentence_order_prediction and not use_next_sentence_label:
            raise ValueError("BertPretrainer: sentence_order_prediction=True needs "
                             "use_next_sentence_label=True (SOP trains the pair head)")
        if not bag_of_words_weight >= 0:
            raise ValueError(f"BertPretrainer: bag_of_words_weight must be >= 0, got "
                             f"{bag_of_words_weight}")
        kwargs.setdefault("name", "bert_pretrainer")
        super().__init__(**kwargs)
        self.encoder = encoder
        self.use_next_sentence_label = use_next_sentence_label
        self.sentence_order_prediction = sentence_order_prediction
        self.span_boundary_objective = span_boundary_objective
        self.max_span_pieces = max_span_pieces
        self.bag_of_words_weight = float(bag_of_words_weight)
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
            span_boundary=span_boundary_objective, bag_of_words=self.bag_of_words_weight > 0))

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
          when the span boundaries are given; bow_logits float32 [B, 1, V] with the
          bag-of-words objective, when masked_lm_ids are given.
        """
        missing = [k for k in ENCODER_INPUTS + ("masked_lm_positions",) if k not in features]
        if (self.next_sentence is not None and INSTANCE_IDS in features
                and _PAIR_POSITIONS not in features):
            # Without it the pair head would silently read only the row's first instance.
            missing.append(_PAIR_POSITIONS)
        if self.bag_of_words_weight and INSTANCE_IDS in features:
            raise ValueError(f"BertPretrainer: the [CLS] bag-of-words objective reads one row "
                             f"per [CLS]; packed rows ({INSTANCE_IDS}) hold several instances")
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
        if self.bag_of_words_weight and "masked_lm_ids" in features:
            # Only where a loss is computed: fill-mask needs the masked-LM head alone.
            cls_positions_b1 = ops.zeros_like(features["masked_lm_positions"][:, :1])
            outputs["bow_logits"] = self.masked_lm(sequence_bsh, cls_positions_b1)
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
          `sbo_correct` (its weight sum is mlm_weight_sum). With the bag-of-words objective
          also `bow_loss` (added to `loss` times bag_of_words_weight).
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
        if self.bag_of_words_weight:
            word_ids_bs = original_word_ids(features["input_word_ids"],
                                            features["masked_lm_positions"], ids_bp, weights_bp)
            # Every real token but [CLS] itself (position 0).
            mask_bs = ops.cast(features["input_mask"], "float32")
            mask_bs = mask_bs * ops.cast(ops.arange(ops.shape(mask_bs)[1]) > 0, "float32")
            bow_loss = bag_of_words_loss(outputs["bow_logits"][:, 0], word_ids_bs, mask_bs)
            parts.update(loss=parts["loss"] + self.bag_of_words_weight * bow_loss,
                         bow_loss=bow_loss)
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
        if self.bag_of_words_weight:
            config["bag_of_words_weight"] = self.bag_of_words_weight
        return config

    from_config = classmethod(from_config_with_encoder)
