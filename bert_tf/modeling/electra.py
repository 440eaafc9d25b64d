"""ELECTRA's replaced-token detection (Clark et al. 2020): a small masked-LM generator proposes
tokens at the masked positions, and the discriminator, the run's encoder, learns which tokens of
the corrupted input were replaced."""

import math

import keras
from keras import ops

from bert_tf.config import DEFAULT_DISCRIMINATOR_WEIGHT, ENCODER_INPUTS
from bert_tf.modeling import kernels
from bert_tf.modeling.bert_encoder import BertEncoder
from bert_tf.modeling.encoder_base import INSTANCE_IDS
from bert_tf.modeling.heads import MaskedLMHead, ReplacedTokenHead
from bert_tf.modeling.pretraining_metrics import PretrainingLossTrackers, masked_token_loss
from bert_tf.modeling.task_model import UnusedPoolerNotTrained, from_config_with_encoder
from bert_tf.modeling.token_ids import TakesTokenIds

# The generator is 1/4 of the discriminator's width unless told (the paper's best size).
GENERATOR_WIDTH_DIVISOR = 4


def generator_config(config, generator_hidden_size=None, source=""):
    """The BertConfig of ELECTRA's generator for a discriminator of `config`.

    The generator has the discriminator's depth, head width (as far as its width allows) and
    embeddings (it shares them: its tables are the discriminator's, E = config.embedding_width,
    projected to its own width when that differs), and is narrower: hidden_size G, attention
    heads and intermediate_size scaled by G / H.

    Args:
      config: the discriminator's BertConfig (architecture "bert").
      generator_hidden_size: G; None for H / 4.
      source: where `config` came from, put after its field in the messages (" in FILE").

    Raises:
      ValueError: G not a positive integer, or larger than the discriminator's H.
    """
    hidden = config.hidden_size
    size = (max(1, hidden // GENERATOR_WIDTH_DIVISOR) if generator_hidden_size is None
            else generator_hidden_size)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"generator_hidden_size={size!r} must be a positive integer")
    if size > hidden:
        raise ValueError(f"generator_hidden_size={size} is larger than hidden_size={hidden}"
                         f"{source}: ELECTRA's generator must be no larger than the "
                         f"discriminator (default hidden_size / {GENERATOR_WIDTH_DIVISOR})")
    head_size = hidden // config.num_attention_heads
    heads = max(1, size // head_size)
    while size % heads:
        heads -= 1
    return config.replace(hidden_size=size, num_attention_heads=heads,
                          intermediate_size=max(1, round(config.intermediate_size * size / hidden)),
                          embedding_size=config.embedding_width)


def electra_metric_terms(packed=False):
    """The one definition of the metrics a replaced-token detection run reports.

    Returns:
      [(metric name, summed part, divisor)] over the parts of
      `ElectraPretrainer.compute_pretraining_losses` (plus `instances` and `rows` for packed
      rows), as `bert_tf.modeling.pretraining_metrics.pretraining_metric_terms`: divisor None
      means a mean over the summed terms, a part name a ratio of sums.
    """
    terms = [("loss", "loss", None),
             ("generator_loss", "mlm_loss", None),
             ("generator_accuracy", "mlm_correct", "mlm_weight_sum"),
             ("discriminator_loss", "disc_loss", None),
             ("discriminator_accuracy", "disc_correct", "token_count"),
             ("discriminator_precision", "disc_true_positives", "disc_predicted_replaced"),
             ("discriminator_recall", "disc_true_positives", "replaced_count"),
             ("replaced_fraction", "replaced_count", "token_count")]
    if packed:
        terms.append(("instances_per_row", "instances", "rows"))
    return terms


def electra_metrics(sums, count):
    """Reported metrics from the summed parts of ElectraPretrainer.compute_pretraining_losses.

    Args:
      sums: part name -> float, each part summed over `count` (micro-batch, replica) terms;
        `instances` and `rows` too for packed rows.
      count: the number of summed terms.

    Returns:
      name -> float, as `electra_metric_terms` defines them: loss (the combined one),
      generator_loss / generator_accuracy (its masked-LM loss and accuracy at the masked
      positions), discriminator_loss / discriminator_accuracy (over every real token),
      discriminator_precision / discriminator_recall (of "replaced"), replaced_fraction (of the
      real tokens that differ from the original).
    """
    return {name: sums[part] / (count if divisor is None else max(sums[divisor], 1e-12))
            for name, part, divisor in electra_metric_terms(packed="instances" in sums)}


def _encoder_inputs(features):
    return {k: ops.convert_to_tensor(features[k]) for k in ENCODER_INPUTS + (INSTANCE_IDS,)
            if k in features}


@keras.saving.register_keras_serializable(package="bert_tf")
class ElectraPretrainer(TakesTokenIds, PretrainingLossTrackers, UnusedPoolerNotTrained,
                        keras.Model):
    """ELECTRA pre-training: replaced-token detection with a small masked-LM generator.

    `call(features, training)` takes the masked-LM pre-training features (those BertPretrainer
    takes: input_word_ids with the masked positions masked, masked_lm_positions, masked_lm_ids,
    masked_lm_weights; extra keys are ignored) and
      1. runs the generator, a narrower BertEncoder that shares the discriminator's embeddings
         (word, position and type tables and their LayerNorm; `generator_config`), and its
         masked-LM head (tied to the shared word table) at masked_lm_positions;
      2. samples one token per masked position from the generator's softmax (a Keras seeded
         generator, `sampler`, whose state training checkpoints keep; no gradient flows
         through the sample);
      3. puts the samples into the original sequence (masked_lm_ids at the masked positions,
         input_word_ids elsewhere) and labels each real token: replaced where the token
         differs from the original (a sample equal to the original is not a replacement);
      4. runs the discriminator, `encoder`, and its `discriminator_head` on that sequence.
    It returns float32 mlm_logits [B, P, V] and discriminator_logits [B, S], int32
    replacement_ids [B, P] and corrupted_word_ids [B, S], and float32 is_replaced [B, S]
    (1 on replaced real tokens, 0 elsewhere and on padding).

    The loss (`compute_pretraining_losses`, which `compute_loss` uses, so `compile` and `fit`
    train it): the generator's masked-LM loss (BERT's formula) + discriminator_weight x the
    discriminator's sigmoid cross-entropy, averaged over the real tokens (input_mask).

    The discriminator is the model's encoder: `encoder` fine-tunes, exports and converts like
    any BertEncoder (its pooler, unused here, is left out of the trained variables, as is the
    generator's). Packed rows (input_instance_ids) are read by both encoders.

    Args:
      encoder: the discriminator, a BertEncoder (architecture "bert").
      generator_hidden_size: the generator's width G <= H; None for H / 4.
      discriminator_weight: lambda, the weight of the discriminator loss (the paper's 50).
      seed: seed of the sampler (None: drawn from Keras' global seed, which
        keras.utils.set_random_seed sets).
      **kwargs: `name`, `trainable`. The heads take the encoder's dtype policy.

    Examples:

    >>> from bert_tf.config import BertConfig
    >>> encoder = BertEncoder(BertConfig.from_preset("bert_tiny", vocab_size=100))
    >>> model = ElectraPretrainer(encoder)
    >>> generator = model.generator
    >>> generator.config.hidden_size, generator.embedding_layer is encoder.embedding_layer
    (32, True)
    """

    def __init__(self, encoder, generator_hidden_size=None,
                 discriminator_weight=DEFAULT_DISCRIMINATOR_WEIGHT, seed=None, **kwargs):
        if not isinstance(encoder, BertEncoder):
            raise TypeError(f"ElectraPretrainer: encoder must be a BertEncoder (architecture "
                            f"'bert'), got {type(encoder).__name__}")
        if (isinstance(discriminator_weight, bool)
                or not isinstance(discriminator_weight, (int, float))
                or not math.isfinite(discriminator_weight) or discriminator_weight <= 0):
            raise ValueError(f"ElectraPretrainer: discriminator_weight={discriminator_weight!r} "
                             "must be a finite number > 0")
        kwargs.setdefault("name", "electra_pretrainer")
        super().__init__(**kwargs)
        config = encoder.config
        policy = encoder.dtype_policy
        self.encoder = encoder
        self.generator = BertEncoder(generator_config(config, generator_hidden_size),
                                     dtype=policy, embedding_layer=encoder.embedding_layer,
                                     name="generator")
        self.generator_hidden_size = generator_hidden_size
        self.discriminator_weight = float(discriminator_weight)
        self.seed = seed
        width = self.generator.config.hidden_size
        self.generator_head = MaskedLMHead(
            encoder.word_embeddings, hidden_act=config.hidden_act,
            initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
            input_size=width, dtype=policy, name="generator_head")
        self.generator_head.build()
        self.discriminator_head = ReplacedTokenHead(
            config.hidden_size, hidden_act=config.hidden_act,
            initializer_range=config.initializer_range, dtype=policy,
            name="discriminator_head")
        self.discriminator_head.build()
        self.sampler = keras.random.SeedGenerator(seed, name="sampler")
        # Every weight exists now, so a .keras file loads without a symbolic build.
        self.built = True
        self._create_trackers(electra_metric_terms())

    def _tracker_attribute(self, name, part):
        return name + "_tracker"

    def _untrained_variable_ids(self):
        # Neither pooler is read: the heads are on sequence_output.
        encoders = (self.encoder, getattr(self, "generator", None))
        return {id(v) for encoder in encoders if encoder is not None
                for v in encoder.get_layer("pooler").weights}

    def call(self, features, training=None):
        """Generator, sampling, replacement and discriminator (see the class doc).

        Args:
          features: dict with int32 input_word_ids, input_mask, input_type_ids [B, S],
            masked_lm_positions, masked_lm_ids [B, P] and masked_lm_weights float [B, P];
            packed rows add input_instance_ids [B, S]; other keys are ignored.
          training: enables dropout.

        Returns:
          dict: mlm_logits float32 [B, P, V], replacement_ids int32 [B, P],
          corrupted_word_ids int32 [B, S], is_replaced float32 [B, S], discriminator_logits
          float32 [B, S].
        """
        missing = [k for k in ENCODER_INPUTS + ("masked_lm_positions", "masked_lm_ids",
                                                "masked_lm_weights") if k not in features]
        if missing:
            raise KeyError(f"ElectraPretrainer: features lack {', '.join(missing)}; got "
                           f"{', '.join(sorted(features))}")
        mlm_logits = self.generate(features, training=training)
        outputs = self.detect_replacements(features, self.sample(mlm_logits), training=training)
        outputs["mlm_logits"] = mlm_logits
        return outputs

    def generate(self, features, training=None):
        """The generator's masked-LM logits: float32 [B, P, V] at masked_lm_positions [B, P]."""
        sequence_bsh = self.generator(_encoder_inputs(features),
                                      training=training)["sequence_output"]
        return self.generator_head(sequence_bsh, features["masked_lm_positions"])

    def sample(self, mlm_logits):
        """One token per position drawn from softmax(mlm_logits), with no gradient through it.

        Args: mlm_logits float [B, P, V]. Returns: int32 [B, P].
        """
        logits_npv = ops.stop_gradient(ops.cast(mlm_logits, "float32"))
        batch, predictions = ops.shape(logits_npv)[0], ops.shape(logits_npv)[1]
        logits_nv = ops.reshape(logits_npv, [-1, ops.shape(logits_npv)[2]])  # N = B*P rows
        drawn_n1 = kernels.categorical(logits_nv, self.sampler)
        return ops.reshape(drawn_n1, [batch, predictions])

    def replace_tokens(self, features, replacement_ids):
        """The discriminator's input and labels from the features and the replacements.

        Args:
          features: as `call`; the real predictions are those with masked_lm_weights > 0.
          replacement_ids: int [B, P], the tokens to put at masked_lm_positions.

        Returns:
          (corrupted_word_ids int32 [B, S]: the original sequence with the replacements at the
          masked positions; is_replaced float32 [B, S]: 1 where a real token differs from the
          original).
        """
        word_ids_bs = ops.cast(features["input_word_ids"], "int32")
        seq_length = word_ids_bs.shape[1] or ops.shape(word_ids_bs)[1]
        real_bp = ops.cast(ops.greater(features["masked_lm_weights"], 0), "int32")
        # slots[b, p, s] = 1 where prediction p of row b is at position s.
        slots_bps = (ops.one_hot(ops.cast(features["masked_lm_positions"], "int32"), seq_length,
                                 dtype="int32") * ops.expand_dims(real_bp, -1))
        masked_bs = ops.minimum(ops.sum(slots_bps, axis=1), 1)

        def at_masked_positions(ids_bp):
            # max, not sum: a position listed twice (never in bert_tf's inputs) stays an id.
            placed_bs = ops.max(slots_bps * ops.expand_dims(ops.cast(ids_bp, "int32"), -1),
                                axis=1)
            return ops.where(ops.equal(masked_bs, 1), placed_bs, word_ids_bs)

        original_bs = at_masked_positions(features["masked_lm_ids"])
        corrupted_bs = at_masked_positions(replacement_ids)
        real_bs = ops.greater(ops.cast(features["input_mask"], "int32"), 0)
        is_replaced_bs = ops.logical_and(ops.not_equal(corrupted_bs, original_bs), real_bs)
        return corrupted_bs, ops.cast(is_replaced_bs, "float32")

    def discriminate(self, inputs, training=None):
        """The discriminator's replaced-token logits.

        Args: inputs: the encoder's input dict (input_word_ids, input_mask, input_type_ids
          [B, S]; optional input_instance_ids). Returns: float32 [B, S] (> 0: "replaced").
        """
        sequence_bsh = self.encoder(_encoder_inputs(inputs), training=training)["sequence_output"]
        return self.discriminator_head(sequence_bsh)

    def detect_replacements(self, features, replacement_ids, training=None):
        """Steps 3 and 4 of `call` for given replacements [B, P] (e.g. a fixed corruption).

        Returns: the dict of `call` without mlm_logits.
        """
        corrupted_bs, is_replaced_bs = self.replace_tokens(features, replacement_ids)
        inputs = dict(_encoder_inputs(features), input_word_ids=corrupted_bs)
        return {"replacement_ids": ops.cast(replacement_ids, "int32"),
                "corrupted_word_ids": corrupted_bs, "is_replaced": is_replaced_bs,
                "discriminator_logits": self.discriminate(inputs, training=training)}

    def compute_pretraining_losses(self, features, outputs):
        """The combined loss and the parts of the reported metrics (`electra_metric_terms`).

        Args:
          features: as `call` (masked_lm_ids, masked_lm_weights and input_mask are read).
          outputs: `call`'s outputs.

        Returns:
          dict of float32 scalars: loss = mlm_loss + discriminator_weight * disc_loss; mlm_loss,
          mlm_correct, mlm_weight_sum (the generator at the masked positions); disc_loss (mean
          over the real tokens), disc_correct, disc_true_positives, disc_predicted_replaced,
          replaced_count and token_count (sums over the real tokens).
        """
        weights_bp = ops.cast(features["masked_lm_weights"], "float32")
        mlm_weight_sum = ops.sum(weights_bp)
        mlm_loss, mlm_correct = masked_token_loss(
            outputs["mlm_logits"], ops.cast(features["masked_lm_ids"], "int32"), weights_bp,
            mlm_weight_sum)

        real_bs = ops.cast(ops.greater(ops.cast(features["input_mask"], "int32"), 0), "float32")
        labels_bs = outputs["is_replaced"]
        logits_bs = ops.cast(outputs["discriminator_logits"], "float32")
        token_count = ops.sum(real_bs)
        ce_bs = ops.binary_crossentropy(labels_bs, logits_bs, from_logits=True)
        disc_loss = ops.sum(real_bs * ce_bs) / ops.maximum(token_count, 1.0)
        predicted_bs = ops.cast(ops.greater(logits_bs, 0.0), "float32") * real_bs
        return {
            "loss": mlm_loss + self.discriminator_weight * disc_loss,
            "mlm_loss": mlm_loss, "mlm_correct": mlm_correct, "mlm_weight_sum": mlm_weight_sum,
            "disc_loss": disc_loss,
            "disc_correct": ops.sum(real_bs * ops.cast(ops.equal(predicted_bs, labels_bs),
                                                       "float32")),
            "disc_true_positives": ops.sum(predicted_bs * labels_bs),
            "disc_predicted_replaced": ops.sum(predicted_bs),
            "replaced_count": ops.sum(labels_bs), "token_count": token_count}

    def get_config(self):
        config = super().get_config()
        config.update(encoder=keras.saving.serialize_keras_object(self.encoder),
                      generator_hidden_size=self.generator_hidden_size,
                      discriminator_weight=self.discriminator_weight, seed=self.seed)
        return config

    from_config = classmethod(from_config_with_encoder)
