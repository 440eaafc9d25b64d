"""BertSpanLabeler: span question answering (SQuAD), a start and an end logit per token."""

import keras

from bert_tf.modeling.dropout import FusedDropout
from bert_tf.modeling.task_model import EncoderTaskModel


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
            sequence_bsh = FusedDropout(self._head_dropout, dtype=policy,
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
