"""Precision and compilation choices of the training loop: float16 loss scaling, XLA "auto".

Under `mixed_bfloat16` nothing more is needed: bfloat16 has float32's exponent range, variables
stay float32 and the model keeps LayerNorm, softmax and the losses in float32. Under
`mixed_float16` small gradients underflow float16's range, so the loss is multiplied by a
dynamic scale before the backward pass and the gradients divided by it before the update
(`DynamicLossScaleOptimizer`); a step whose gradients overflow is skipped and the scale halved.
"""

import re

import keras
import tensorflow as tf
from absl import logging

from bert_tf.cpu import CPU_TYPES, cpu_info

# Accepted by the --dtype flag (a literal: bert_tf.cli.flags reads it without importing this
# module); "auto" picks one of DTYPES for the devices (resolve_dtype).
DTYPE_CHOICES = ("float32", "mixed_bfloat16", "mixed_float16", "auto")
DTYPES = DTYPE_CHOICES[:-1]
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


def resolve_jit_compile(jit_compile, strategy, dtype=None, cpuinfo_path="/proc/cpuinfo",
                        varying_shapes=False):
    """Whether to XLA-compile the training step: "auto" is on for TPUs and GPUs, and on CPUs
    where the CPU type's measurements say so for the dtype (CPU_TYPES[...].xla_dtypes).

    On most CPUs XLA made the step slower (2-core AMD EPYC Zen 5, BERT-small: 1.5x the CPU
    time in float32, 2.2x in mixed_bfloat16), while oneDNN's kernels run without it; on an
    Intel Xeon with AVX512_BF16 and no AMX, mixed_bfloat16 ran fastest with XLA. On GPUs XLA
    fuses the element-wise work around the matmuls; on TPUs every step is XLA-compiled anyway.

    Args:
      jit_compile: True, False, "auto", or a flag string (see parse_jit_compile).
      strategy: the tf.distribute.Strategy whose devices decide "auto".
      dtype: the dtype policy of the step; None: Keras' global policy.
      cpuinfo_path: where the CPU is read (tests point it at a fixture).
      varying_shapes: the batches change shape (length buckets): "auto" leaves XLA off on
        CPUs, where it would compile the step once per shape.

    Returns:
      bool.
    """
    jit_compile = parse_jit_compile(jit_compile)
    if jit_compile != "auto":
        return jit_compile
    if _on_accelerator(strategy):
        return True
    if varying_shapes:
        return False
    if dtype is None:
        dtype = keras.mixed_precision.global_policy().name
    return dtype in CPU_TYPES[cpu_info(cpuinfo_path).kind].xla_dtypes


def _on_accelerator(strategy):
    """True when the strategy's devices are TPUs or GPUs (what "auto" settings decide on)."""
    devices = " ".join(strategy.extended.worker_devices).upper()
    return "TPU" in devices or "GPU" in devices


def cpu_has_native_bfloat16(cpuinfo_path="/proc/cpuinfo"):
    """True when the CPU advertises AVX512_BF16 or AMX-BF16 (read from /proc/cpuinfo).

    Unreadable (not Linux) counts as no: float32 is then the safe choice.
    """
    return cpu_info(cpuinfo_path).native_bfloat16


_warned_emulated = []


def resolve_dtype(dtype, strategy, cpuinfo_path="/proc/cpuinfo", varying_shapes=False):
    """The dtype policy for --dtype: "auto" picks the fastest one that trains safely.

    "auto" is mixed_bfloat16 on TPUs and GPUs; on CPUs what CPU_TYPES records as fastest for
    the CPU's type: mixed_bfloat16 where the CPU computes bfloat16 natively and it paid
    (AVX512_BF16 / AMX: 1.5-2x float32 for BERT), float32 where bfloat16 is emulated (2-core
    AVX2 machine: BERT-tiny step 918 vs 614 ms). mixed_float16 is never picked: it needs loss
    scaling and suits only GPUs older than bfloat16 support, which users choose explicitly.

    An explicit mixed_bfloat16 on a CPU without native bfloat16 is kept, and logged once as
    slower than float32 there.

    Args:
      dtype: one of DTYPE_CHOICES.
      strategy: the tf.distribute.Strategy whose devices decide "auto".
      cpuinfo_path: where the CPU is read (tests point it at a fixture).
      varying_shapes: the batches change shape (length buckets): some CPU types then pick
        another dtype (CpuType.varying_shapes_dtype), as XLA would compile every shape.

    Returns:
      One of DTYPES.
    """
    on_cpu = not _on_accelerator(strategy)
    if dtype != "auto":
        info = cpu_info(cpuinfo_path)
        if dtype == "mixed_bfloat16" and on_cpu and not info.native_bfloat16 \
                and not _warned_emulated:
            _warned_emulated.append(True)
            logging.warning("--dtype=mixed_bfloat16 on a CPU without native bfloat16 (%s: no "
                            "AVX512_BF16 or AMX): bfloat16 is emulated and slower than float32 "
                            "here; --dtype=auto picks float32", info.model_name or "unknown")
        return dtype
    if not on_cpu:
        return "mixed_bfloat16"
    cpu_type = CPU_TYPES[cpu_info(cpuinfo_path).kind]
    return cpu_type.varying_shapes_dtype if varying_shapes else cpu_type.dtype


_XLA_UNSUPPORTED = re.compile(
    r"Detected unsupported operations when trying to compile graph .*? on (XLA_\w+_JIT): "
    r"(\w+)(?:.*?\{\{node ([^}]+)\}\})?", re.DOTALL)


def unsupported_xla_op(error):
    """(op type, node name or None, XLA device) of the op an XLA compilation error names,
    or None when `error` is no such error (tf.errors.InvalidArgumentError on the first call
    of a jit-compiled function)."""
    match = _XLA_UNSUPPORTED.search(str(error))
    return (match.group(2), match.group(3), match.group(1)) if match else None


def xla_fallback_message(error):
    """The one line a run logs when --jit_compile=true meets a model XLA cannot compile and it
    continues without XLA (docs/errors.md); None when `error` is not that failure."""
    found = unsupported_xla_op(error)
    if found is None:
        return None
    op, node, device = found
    where = f" (node {node})" if node and node != op else ""
    return (f"--jit_compile=true: XLA cannot compile op {op}{where} on {device}; training "
            "continues without XLA")
