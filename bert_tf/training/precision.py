"""Precision and compilation choices of the training loop: float16 loss scaling, XLA "auto".

Under `mixed_bfloat16` nothing more is needed: bfloat16 has float32's exponent range, variables
stay float32 and the model keeps LayerNorm, softmax and the losses in float32. Under
`mixed_float16` small gradients underflow float16's range, so the loss is multiplied by a
dynamic scale before the backward pass and the gradients divided by it before the update
(`DynamicLossScaleOptimizer`); a step whose gradients overflow is skipped and the scale halved.
"""

import keras
import tensorflow as tf

# Accepted by the --dtype flag (a literal: bert_tf.cli.flags reads it without importing this
# module); "auto" picks one of DTYPES for the devices (resolve_dtype).
DTYPE_CHOICES = ("float32", "mixed_bfloat16", "mixed_float16", "auto")
DTYPES = DTYPE_CHOICES[:-1]
# CPU features with native bfloat16 matmuls (oneDNN); without them bfloat16 is emulated.
_CPU_BF16_FEATURES = ("avx512_bf16", "amx_bf16")


class DynamicLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras' dynamic loss scaling, made to keep step with a distributed step-counting loop.

    Three changes to keras.optimizers.LossScaleOptimizer:
    - the finite check is all-reduced over the replicas, so every replica skips a step or none
      does (Keras checks only the first replica's local gradients; another replica's Inf would
      then reach the all-reduced update and make every weight NaN);
    - a skipped step still increments `iterations`: the step consumed its batch, so the global
      step, the learning-rate schedule, checkpoint numbers and the input position stay equal to
      the number of batches trained on (what resume relies on);
    - building it again (train() builds on every call) keeps its scale and counter.

    Args:
      inner_optimizer: the optimizer that applies the unscaled gradients.
      initial_scale: the first loss scale (halved at every overflow, doubled after
        `dynamic_growth_steps` finite steps in a row).
      dynamic_growth_steps: finite steps between doublings.
    """

    def build(self, var_list):
        # Keras' build always makes a new scale and counter, losing the restored ones.
        if self.built:
            return
        super().build(var_list)

    def check_finite(self, grads):
        finite = super().check_finite(grads)
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            overflowing = context.all_reduce(tf.distribute.ReduceOp.SUM,
                                             tf.cast(tf.logical_not(finite), tf.float32))
            finite = tf.equal(overflowing, 0.0)
        return finite

    def _stateful_handle_non_finite_grads(self):
        super()._stateful_handle_non_finite_grads()
        self.iterations.assign_add(1)


def computes_in_float16(model):
    """True when any layer of `model` computes in float16 (a mixed_float16 dtype policy)."""
    def layers(layer):
        yield layer
        for inner in getattr(layer, "layers", ()):  # nested models (an encoder in a task model)
            yield from layers(inner)

    return any(getattr(layer, "compute_dtype", None) == "float16" for layer in layers(model))


def with_loss_scale(optimizer, model):
    """`optimizer` wrapped in a DynamicLossScaleOptimizer when `model` computes in float16.

    Call under the strategy's scope. An optimizer that already is a DynamicLossScaleOptimizer is
    returned as it is.

    Raises:
      ValueError: `optimizer` is a plain keras LossScaleOptimizer (its skipped steps would not
        count, and its finite check is per replica).
    """
    if isinstance(optimizer, DynamicLossScaleOptimizer) or not computes_in_float16(model):
        return optimizer
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        raise ValueError("train(): pass the inner optimizer or a bert_tf.training.precision."
                         "DynamicLossScaleOptimizer, not a keras LossScaleOptimizer (its skipped "
                         "float16 steps would not count as steps)")
    return DynamicLossScaleOptimizer(optimizer)


def parse_jit_compile(value):
    """True, False or "auto" from a flag string ("true"/"false"/"auto", any case) or a bool."""
    if isinstance(value, bool) or value == "auto":
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    if text == "auto":
        return "auto"
    raise ValueError(f"--jit_compile={value!r}; expected one of true, false, auto")


def resolve_jit_compile(jit_compile, strategy):
    """Whether to XLA-compile the training step: "auto" is on for TPUs and GPUs, off on CPUs.

    On CPUs XLA made bert_tf's pre-training step slower in every measured case (2-core
    AVX512_BF16 machine, benchmarks/results: BERT-small float32 1.27x and mixed_bfloat16 2x
    slower than without XLA), while oneDNN's bfloat16 kernels run without it. On GPUs XLA fuses
    the element-wise work around the matmuls; on TPUs every step is XLA-compiled anyway.

    Args:
      jit_compile: True, False, "auto", or a flag string (see parse_jit_compile).
      strategy: the tf.distribute.Strategy whose devices decide "auto".

    Returns:
      bool.
    """
    jit_compile = parse_jit_compile(jit_compile)
    if jit_compile != "auto":
        return jit_compile
    return _on_accelerator(strategy)


def _on_accelerator(strategy):
    """True when the strategy's devices are TPUs or GPUs (what "auto" settings decide on)."""
    devices = " ".join(strategy.extended.worker_devices).upper()
    return "TPU" in devices or "GPU" in devices


def cpu_has_native_bfloat16(cpuinfo_path="/proc/cpuinfo"):
    """True when the CPU advertises AVX512_BF16 or AMX-BF16 (read from /proc/cpuinfo).

    Unreadable (not Linux) counts as no: float32 is then the safe choice.
    """
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    present = set(line.split(":", 1)[1].split())
                    return any(flag in present for flag in _CPU_BF16_FEATURES)
    except OSError:
        pass
    return False


def resolve_dtype(dtype, strategy, cpuinfo_path="/proc/cpuinfo"):
    """The dtype policy for --dtype: "auto" picks the fastest one that trains safely.

    "auto" is mixed_bfloat16 on TPUs and GPUs, and on CPUs with native bfloat16 matmuls
    (AVX512_BF16 / AMX: measured 1.5-2x float32 for BERT there); float32 on other CPUs, where
    bfloat16 is emulated and was measured slower than float32 (2-core AVX2 machine: BERT-tiny
    step 918 vs 614 ms). mixed_float16 is never picked: it needs loss scaling and suits only
    GPUs older than bfloat16 support, which users choose explicitly.

    Args:
      dtype: one of DTYPE_CHOICES.
      strategy: the tf.distribute.Strategy whose devices decide "auto".
      cpuinfo_path: where the CPU flags are read (tests point it at a fixture).

    Returns:
      One of DTYPES.
    """
    if dtype != "auto":
        return dtype
    if _on_accelerator(strategy):
        return "mixed_bfloat16"
    return "mixed_bfloat16" if cpu_has_native_bfloat16(cpuinfo_path) else "float32"
