"""BERT's optimizers and learning-rate schedules: warmup + linear decay, AdamW and LAMB; and
ModernBERT's: warmup-stable-decay and StableAdamW.

The update rules are those of the original google-research/bert `AdamWeightDecayOptimizer`
(Adam without bias correction, weight decay added to the update before the learning rate is
applied) and of the Model Garden LAMB (bias-corrected Adam update, decay, layer-wise trust
ratio). Both skip weight decay for biases and LayerNorm parameters and clip the all-reduced
gradients to a global norm before the update, as the original does.

Keras 3 names a variable by its short name (`kernel`, `bias`, `gamma`, `beta`, `embeddings`) and
its path by layer (`encoder/transformer_0/attention_layer_norm/gamma`). The original excluded
variables whose TF1 name matched "LayerNorm", "layer_norm" or "bias"; here a variable is
excluded when its short name is `bias`, `gamma` or `beta` or its path matches one of those
patterns, which selects the same set on a Keras BERT.
"""

import re

import keras
from absl import logging
from keras import ops

# On TensorFlow the update runs after tf.distribute's all-reduce and AdamW in TensorFlow's fused
# kernel; on JAX the gradients are global already (keras.distribution) and keras.ops updates.
if keras.backend.backend() == "tensorflow":
    from bert_tf.training import tf_optimizer_kernels as _tf
else:
    _tf = None

# Short Keras names that never decay: every bias and both LayerNorm parameters.
_NO_DECAY_NAMES = ("bias", "gamma", "beta")
# Path patterns of the original's exclude_from_weight_decay list.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")

OPTIMIZER_TYPES = ("adamw", "lamb", "stable_adamw")
LR_SCHEDULES = ("linear", "wsd")


def warmup_linear_decay(position, peak, warmup, end):
    """BERT's schedule at `position` (float32 scalar): a linear warmup to `peak` over `warmup`,
    and a linear decay measured from 0 that reaches 0 at `end` (steps, or fractions of a time
    budget with end 1)."""
    peak = ops.cast(peak, "float32")
    decayed = peak * ops.maximum(0.0, 1.0 - position / float(end))
    if warmup == 0:
        return decayed
    return ops.where(position < float(warmup), peak * position / float(warmup), decayed)


def warmup_stable_decay(position, peak, warmup, end, decay):
    """Warmup-stable-decay at `position` (float32 scalar): a linear warmup to `peak` over
    `warmup`, the peak, then 1 - sqrt decay over the last `decay` before `end`, 0 after."""
    peak = ops.cast(peak, "float32")
    decay_start = float(end - decay)
    progress = ops.clip((position - decay_start) / float(decay), 0.0, 1.0)
    rate = peak * (1.0 - ops.sqrt(progress))
    if warmup == 0:
        return rate
    return ops.where(position < float(warmup), peak * position / float(warmup), rate)


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to `peak_learning_rate`, then linear decay to 0, as the original BERT.

    lr(step) = peak * step / num_warmup_steps            while step < num_warmup_steps
    lr(step) = peak * max(0, 1 - step / num_train_steps)  afterwards

    The decay measures from step 0 (not from the end of warmup), exactly as the original's
    `polynomial_decay(power=1)` followed by the warmup override; so the rate right after warmup
    is slightly below the peak.

    Args:
      peak_learning_rate: the learning rate reached at the end of warmup.
      num_train_steps: step at which the rate reaches 0.
      num_warmup_steps: length of the linear warmup; 0 disables it.

    Examples:

    >>> schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
    >>> [round(float(schedule(s)), 7) for s in (0, 5, 10, 50, 100)]
    [0.0, 5e-05, 9e-05, 5e-05, 0.0]
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0):
        super().__init__()
        if num_train_steps < 1:
            raise ValueError(f"num_train_steps={num_train_steps} must be >= 1")
        if num_warmup_steps < 0 or num_warmup_steps > num_train_steps:
            raise ValueError(f"num_warmup_steps={num_warmup_steps} must be in "
                             f"[0, num_train_steps={num_train_steps}]")
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)

    def __call__(self, step):
        return warmup_linear_decay(ops.cast(step, "float32"), self.peak_learning_rate,
                                   self.num_warmup_steps, self.num_train_steps)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate,
                "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps}


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupStableDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Warmup, a stable phase at the peak, then a 1 - sqrt decay to 0 (warmup-stable-decay, the
    trapezoidal schedule ModernBERT was trained with).

    lr(step) = peak * step / num_warmup_steps           while step < num_warmup_steps
    lr(step) = peak                                     until the last num_decay_steps
    lr(step) = peak * (1 - sqrt((step - d) / num_decay_steps)), d = num_train_steps -
               num_decay_steps, down to 0 at num_train_steps (and after)

    The stable phase does not depend on the run's length, so a run can be extended (or a
    checkpoint of the stable phase decayed separately) without a different past.

    Args:
      peak_learning_rate: the rate of the stable phase.
      num_train_steps: step at which the rate reaches 0.
      num_warmup_steps: length of the linear warmup; 0 disables it.
      num_decay_steps: length of the final decay (>= 1, at most the steps after warmup).

    Examples:

    >>> schedule = WarmupStableDecay(1e-3, num_train_steps=100, num_warmup_steps=10,
    ...                              num_decay_steps=20)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 80, 85, 100)]
    [0.0, 0.0005, 0.001, 0.001, 0.0005, 0.0]
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0,
                 num_decay_steps=1):
        super().__init__()
        if num_train_steps < 1:
            raise ValueError(f"num_train_steps={num_train_steps} must be >= 1")
        if num_warmup_steps < 0 or num_warmup_steps > num_train_steps:
            raise ValueError(f"num_warmup_steps={num_warmup_steps} must be in "
                             f"[0, num_train_steps={num_train_steps}]")
        if not 1 <= num_decay_steps <= num_train_steps - num_warmup_steps:
            raise ValueError(f"num_decay_steps={num_decay_steps} must be in [1, num_train_steps "
                             f"- num_warmup_steps = {num_train_steps - num_warmup_steps}]")
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.num_decay_steps = int(num_decay_steps)

    def __call__(self, step):
        return warmup_stable_decay(ops.cast(step, "float32"), self.peak_learning_rate,
                                   self.num_warmup_steps, self.num_train_steps,
                                   self.num_decay_steps)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate,
                "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps,
                "num_decay_steps": self.num_decay_steps}


@keras.saving.register_keras_serializable(package="bert_tf")
class BudgetSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A schedule on the share of a time budget spent: the shape of `lr_schedule` ("linear" or
    "wsd") with its warmup and decay as fractions of the training time, reaching 0 exactly when
    the time is up (training.budget).

    Compiled steps cannot read a clock, so the run controller anchors the progress before
    every call: `anchor` (float32 [3]) holds the global step of the call's first step, the
    progress there and the progress one step adds at the measured speed, and

        fraction(step) = clip(anchor[1] + (step - anchor[0]) * anchor[2], 0, 1)
        lr(step) = shape(fraction(step))

    Args:
      peak_learning_rate: the rate at the end of warmup.
      lr_schedule: "linear" (BERT's: warmup, then linear decay from the start) or "wsd"
        (warmup, stable, 1 - sqrt decay over the last decay_proportion).
      warmup_proportion: the share of the training time spent warming up.
      decay_proportion: wsd: the share of the training time of the final decay.

    Examples:

    >>> schedule = BudgetSchedule(1e-3, warmup_proportion=0.1)
    >>> schedule.set_anchor(step=0, fraction=0.0, fraction_per_step=0.01)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 55, 100)]
    [0.0, 0.0005, 0.0009, 0.00045, 0.0]
    """

    def __init__(self, peak_learning_rate, lr_schedule="linear", warmup_proportion=0.1,
                 decay_proportion=0.1):
        super().__init__()
        if lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule={lr_schedule!r}; expected one of "
                             f"{', '.join(LR_SCHEDULES)}")
        if not 0.0 <= warmup_proportion < 1.0:
            raise ValueError(f"--warmup_proportion={warmup_proportion} must be in [0, 1)")
        if lr_schedule == "wsd" and not 0.0 < decay_proportion <= 1.0 - warmup_proportion:
            raise ValueError(f"--decay_proportion={decay_proportion} must be in (0, 1 - "
                             f"--warmup_proportion = {1.0 - warmup_proportion:g}]")
        self.peak_learning_rate = float(peak_learning_rate)
        self.lr_schedule = lr_schedule
        self.warmup_proportion = float(warmup_proportion)
        self.decay_proportion = float(decay_proportion)
        self.anchor = keras.Variable([0.0, 0.0, 0.0], dtype="float32", trainable=False,
                                     name="budget_anchor")

    def set_anchor(self, step, fraction, fraction_per_step):
        """Where the next compiled call starts: its first global step and the progress there,
        and the progress each step adds."""
        self.anchor.assign([float(step), float(fraction), float(fraction_per_step)])

    def fraction(self, step):
        anchor = ops.convert_to_tensor(self.anchor)
        moved = (ops.cast(step, "float32") - anchor[0]) * anchor[2]
        return ops.clip(anchor[1] + moved, 0.0, 1.0)

    def __call__(self, step):
        fraction = self.fraction(step)
        if self.lr_schedule == "linear":
            return warmup_linear_decay(fraction, self.peak_learning_rate,
                                       self.warmup_proportion, 1.0)
        return warmup_stable_decay(fraction, self.peak_learning_rate, self.warmup_proportion,
                                   1.0, self.decay_proportion)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "lr_schedule": self.lr_schedule,
                "warmup_proportion": self.warmup_proportion,
                "decay_proportion": self.decay_proportion}


def budget_schedule(optimizer):
    """The BudgetSchedule `optimizer` follows (through a loss-scale wrapper), or None."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    rate = getattr(inner, "_learning_rate", None)
    return rate if isinstance(rate, BudgetSchedule) else None


def learning_rate_at(optimizer, step, read):
    """The learning rate `optimizer` uses at optimizer step `step`: its schedule evaluated
    there, or its constant rate read by `read` (the backend's way of reading a variable's
    value as a float)."""
    rate = optimizer._learning_rate
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        return float(rate(step))
    return read(getattr(rate, "value", rate))


def clip_by_global_norm(grads, clip_norm):
    """grads * clip_norm / max(global norm, clip_norm), as tf.clip_by_global_norm; None
    gradients stay None."""
    present = [g for g in grads if g is not None]
    norm = ops.sqrt(sum(ops.sum(ops.square(ops.cast(g, "float32"))) for g in present))
    scale = clip_norm / ops.maximum(norm, clip_norm)
    return [None if g is None else g * ops.cast(scale, g.dtype) for g in grads]


class _DecayingOptimizer(keras.optimizers.Optimizer):
    """Shared parts of AdamW and LAMB: decay exclusions, moments, global-norm clipping.

    Keras clips gradients per replica before they are all-reduced; the original (and the
    Model Garden) clip the summed gradient. This class all-reduces first and clips after, so a
    run on N replicas takes the same step as a run on one device with the N-times batch.
    """

    def __init__(self, learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, clip_norm,
                 exclude_from_weight_decay, name, **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.clip_norm = None if clip_norm is None else float(clip_norm)
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay or ())
        self._no_decay_re = (re.compile("|".join(self.exclude_from_weight_decay_patterns))
                             if self.exclude_from_weight_decay_patterns else None)

    def decays(self, variable):
        """True when weight decay (and, for LAMB, the trust ratio) applies to a keras.Variable."""
        if self.weight_decay_rate == 0.0:
            return False
        if variable.name in _NO_DECAY_NAMES:
            return False
        return not (self._no_decay_re and self._no_decay_re.search(variable.path))

    def _decays_in_update(self, variable):
        return self._decay_flags[self._var_key(variable)]

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = self.add_optimizer_variables(
            var_list, ["momentum", "velocity"])
        # Decided once here, on the Keras variables: inside a distributed update the variable
        # is a bare tf.Variable without the Keras path.
        self._decay_flags = {self._var_key(v): self.decays(v) for v in var_list}

    def _moments(self, gradient, variable):
        """Updates and returns the first and second moment slots of `variable`."""
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
        return m, v

    def _bias_corrected_moments(self, gradient, variable):
        """Updates the moments; returns Adam's (m_hat, v_hat) at step t = iterations + 1."""
        t = ops.cast(self.iterations + 1, variable.dtype)
        m, v = self._moments(gradient, variable)
        return m / (1.0 - ops.power(self.beta_1, t)), v / (1.0 - ops.power(self.beta_2, t))

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if _tf is not None:
            _tf.update_after_all_reduce(self, grads, trainable_variables, learning_rate,
                                        self.clip_norm)
            return
        if self.clip_norm:
            grads = clip_by_global_norm(grads, self.clip_norm)
        super()._backend_update_step(grads, trainable_variables, learning_rate)

    def _dense(self, gradient, dtype):
        return ops.cast(_tf.dense(gradient) if _tf is not None else gradient, dtype)

    def get_config(self):
        config = super().get_config()
        config.update({
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "clip_norm": self.clip_norm,
            "exclude_from_weight_decay": list(self.exclude_from_weight_decay_patterns),
        })
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(_DecayingOptimizer):
    """Adam with decoupled weight decay exactly as the original BERT: by default without bias
    correction.

    Per variable w with gradient g (after global-norm clipping of all gradients), at step t
    (1-based):
        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        w = w * (1 - lr * weight_decay_rate)                 (only if w decays)
        w = w - lr * m / (sqrt(v) + epsilon)                 (bias_correction=False)
        w = w - lr * c_t * m / (sqrt(v) + epsilon),          (bias_correction=True)
            c_t = sqrt(1 - beta_2^t) / (1 - beta_1^t)

    bias_correction=True is Keras' and TensorFlow's Adam step ("epsilon hat": epsilon added to
    sqrt(v), not to sqrt(v_hat) as PyTorch does). Without it the first steps are larger:
    c_t is 1/3.2 at t=1, 1/6.5 at t=10 and 1/3.4 at t=93, so a short fine-tuning run takes
    3-6x the bias-corrected step at the same learning rate (see docs/fine-tuning.md).

    Args:
      learning_rate: float or a LearningRateSchedule (e.g. WarmupLinearDecay).
      weight_decay_rate: decay coefficient of decaying variables.
      beta_1, beta_2, epsilon: Adam constants (original: 0.9, 0.999, 1e-6).
      clip_norm: clip the all-reduced gradients to this global norm; None disables.
      exclude_from_weight_decay: regex patterns matched against variable paths; biases and
        LayerNorm gamma/beta are excluded by their short names regardless.
      bias_correction: scale the step by c_t (Adam's bias correction), as Keras, PyTorch and
        Hugging Face do; False (the original's rule) by default.
      name: optimizer name.

    Examples:

    >>> opt = AdamWeightDecay(WarmupLinearDecay(1e-4, 1000, 100))
    >>> opt.decays(keras.Variable(1.0, name="bias"))
    False
    """

    def __init__(self, learning_rate=1e-4, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, clip_norm=1.0,
                 exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 bias_correction=False, name="adam_weight_decay", **kwargs):
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, clip_norm,
                         exclude_from_weight_decay, name, **kwargs)
        self.bias_correction = bool(bias_correction)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = self._dense(gradient, dtype)
        if self._decays_in_update(variable):
            # w - lr * (adam + d * w) = w * (1 - lr * d) - lr * adam: the decay first, then the
            # Adam step, whose term does not depend on w.
            self.assign(variable, variable * (1.0 - lr * ops.cast(self.weight_decay_rate, dtype)))
        index = self._get_variable_index(variable)
        # beta^t, or 0 (no correction: c_t = 1) as the original.
        if self.bias_correction:
            t = ops.cast(self.iterations + 1, dtype)
            beta_1_power, beta_2_power = ops.power(self.beta_1, t), ops.power(self.beta_2, t)
        else:
            beta_1_power = beta_2_power = ops.zeros((), dtype)
        if _tf is not None:
            _tf.apply_adam(variable, self._momentums[index], self._velocities[index], gradient,
                           lr, self.beta_1, self.beta_2, self.epsilon, beta_1_power,
                           beta_2_power)
            return
        m, v = self._moments(gradient, variable)
        step = lr * ops.sqrt(1.0 - beta_2_power) / (1.0 - beta_1_power)
        self.assign_sub(variable, step * m / (ops.sqrt(v) + self.epsilon))

    def get_config(self):
        return dict(super().get_config(), bias_correction=self.bias_correction)


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(_DecayingOptimizer):
    """LAMB (You et al., 2019) as in the Model Garden, with BERT's decay exclusions.

    Per variable w with gradient g (after global-norm clipping), at step t (1-based):
        m, v as in Adam; m_hat = m / (1 - beta_1^t); v_hat = v / (1 - beta_2^t)
        update = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * w   (if w decays)
        ratio = ||w|| / ||update|| if both norms > 0 else 1   (only if w decays, else 1)
        w = w - lr * ratio * update

    Args:
      learning_rate: float or a LearningRateSchedule.
      weight_decay_rate: decay coefficient for decaying variables.
      beta_1, beta_2, epsilon: Adam constants.
      clip_norm: global-norm clip of the all-reduced gradients; None disables.
      exclude_from_weight_decay: regex patterns on variable paths; excluded variables get
        neither decay nor the layer-wise trust ratio.
      name: optimizer name.
    """

    def __init__(self, learning_rate=1e-3, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, clip_norm=1.0,
                 exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 name="lamb", **kwargs):
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, clip_norm,
                         exclude_from_weight_decay, name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = self._dense(gradient, variable.dtype)
        m_hat, v_hat = self._bias_corrected_moments(gradient, variable)
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        if self._decays_in_update(variable):
            update = update + self.weight_decay_rate * variable
            w_norm = ops.norm(ops.reshape(variable, [-1]))
            u_norm = ops.norm(ops.reshape(update, [-1]))
            ratio = ops.where(ops.logical_and(w_norm > 0, u_norm > 0), w_norm / u_norm, 1.0)
            update = ratio * update
        self.assign_sub(variable, lr * update)


@keras.saving.register_keras_serializable(package="bert_tf")
class StableAdamW(_DecayingOptimizer):
    """StableAdamW (Wortsman et al., 2023), the optimizer ModernBERT was trained with: AdamW
    whose step shrinks, per tensor, when the gradient is large for its second moment (AdaFactor's
    update clipping), which keeps loss spikes from a few outsized gradients in check.

    Per variable w with gradient g (after global-norm clipping), at step t (1-based):
        m, v as in Adam; m_hat = m / (1 - beta_1^t); v_hat = v / (1 - beta_2^t)
        rms = sqrt(mean(g^2 / max(v_hat, epsilon^2)))
        lr_t = lr / max(1, rms)
        w = w * (1 - lr_t * weight_decay_rate)   (decoupled decay, only if w decays)
        w = w - lr_t * m_hat / (sqrt(v_hat) + epsilon)

    The decay is lr_t * weight_decay_rate. ModernBERT's trainer (optimi's decoupled form) decays
    by weight_decay * lr / peak_lr instead: its weight_decay 1e-5 at peak 8e-4 is
    weight_decay_rate 1e-5 / 8e-4 = 0.0125 here.

    Args: as Lamb.
    """

    def __init__(self, learning_rate=1e-3, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.98,
                 epsilon=1e-6, clip_norm=1.0,
                 exclude_from_weight_decay=DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY,
                 name="stable_adamw", **kwargs):
        super().__init__(learning_rate, weight_decay_rate, beta_1, beta_2, epsilon, clip_norm,
                         exclude_from_weight_decay, name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = self._dense(gradient, dtype)
        m_hat, v_hat = self._bias_corrected_moments(gradient, variable)
        rms = ops.sqrt(ops.mean(ops.square(gradient)
                                / ops.maximum(v_hat, self.epsilon * self.epsilon)))
        lr = lr / ops.maximum(1.0, rms)
        if self._decays_in_update(variable):
            self.assign(variable, variable * (1.0 - lr * self.weight_decay_rate))
        self.assign_sub(variable, lr * m_hat / (ops.sqrt(v_hat) + self.epsilon))


def create_optimizer(learning_rate, num_train_steps, num_warmup_steps, optimizer_type="adamw",
                     weight_decay_rate=0.01, beta_1=0.9, beta_2=None, epsilon=1e-6,
                     clip_norm=1.0, lr_schedule="linear", decay_proportion=0.1,
                     budget_warmup_proportion=None, bias_correction=False):
    """BERT's optimizer (WarmupLinearDecay + AdamWeightDecay or Lamb) or ModernBERT's
    (WarmupStableDecay + StableAdamW), in any combination.

    Args:
      learning_rate: peak learning rate (reached after warmup).
      num_train_steps: total steps; the rate reaches 0 there.
      num_warmup_steps: steps of linear warmup from 0.
      optimizer_type: "adamw" (the original's), "lamb" or "stable_adamw".
      weight_decay_rate, beta_1, epsilon, clip_norm: see AdamWeightDecay.
      beta_2: None: 0.999 (BERT's), 0.98 for stable_adamw (ModernBERT's).
      lr_schedule: "linear" (BERT's decay from step 0) or "wsd" (warmup-stable-decay).
      decay_proportion: wsd: the fraction of num_train_steps the final decay takes.
      budget_warmup_proportion: None for a schedule on steps; for a run to a time budget, the
        share of the training time spent warming up: the schedule is then a BudgetSchedule of
        the same shape and num_train_steps / num_warmup_steps are not used.
      bias_correction: adamw: Adam's bias correction (see AdamWeightDecay); lamb and
        stable_adamw always correct.

    Returns:
      A keras.optimizers.Optimizer whose learning_rate is the schedule.
    """
    if budget_warmup_proportion is not None:
        schedule = BudgetSchedule(learning_rate, lr_schedule, budget_warmup_proportion,
                                  decay_proportion)
    elif lr_schedule == "linear":
        schedule = WarmupLinearDecay(learning_rate, num_train_steps, num_warmup_steps)
    elif lr_schedule == "wsd":
        if not 0.0 < decay_proportion <= 1.0:
            raise ValueError(f"decay_proportion={decay_proportion} must be in (0, 1].")
        decay_steps = max(1, round(num_train_steps * decay_proportion))
        if decay_steps > num_train_steps - num_warmup_steps:
            logging.warning("decay_proportion=%s asks for %d decay steps; the %d steps after "
                            "warmup are all decay (no stable phase).", decay_proportion,
                            decay_steps, num_train_steps - num_warmup_steps)
            decay_steps = max(1, num_train_steps - num_warmup_steps)
        schedule = WarmupStableDecay(learning_rate, num_train_steps, num_warmup_steps,
                                     decay_steps)
    else:
        raise ValueError(f"lr_schedule={lr_schedule!r}; expected one of "
                         f"{', '.join(LR_SCHEDULES)}")
    if beta_2 is None:
        beta_2 = 0.98 if optimizer_type == "stable_adamw" else 0.999
    kwargs = dict(weight_decay_rate=weight_decay_rate, beta_1=beta_1, beta_2=beta_2,
                  epsilon=epsilon, clip_norm=clip_norm)
    if optimizer_type == "adamw":
        return AdamWeightDecay(schedule, bias_correction=bias_correction, **kwargs)
    if optimizer_type == "lamb":
        return Lamb(schedule, **kwargs)
    if optimizer_type == "stable_adamw":
        return StableAdamW(schedule, **kwargs)
    raise ValueError(f"optimizer_type={optimizer_type!r}; expected one of "
                     f"{', '.join(OPTIMIZER_TYPES)}")
