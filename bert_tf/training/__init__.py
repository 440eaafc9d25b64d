"""Training: optimizers and schedules, the runtime, the run controller and its step runners
(TensorFlow and JAX), checkpoints, time budgets.

The names below load on first use: the optimizers and schedules (training.optimization), the
runtime and the controller import where only JAX and Keras are installed; the TensorFlow runner,
strategies and its checkpoints need TensorFlow.
"""

from bert_tf import lazy_names

_LAZY = {
    "CheckpointError": "checkpointing", "warm_start": "checkpointing",
    "get_strategy": "distribute",
    "NonFiniteLossError": "stops", "TrainingPreempted": "stops", "TrainLoopConfig": "loop_config",
    "train": "controller", "Runtime": "runtime", "on_tensorflow": "runtime",
    "on_jax": "runtime",
    "BudgetSchedule": "optimization", "parse_duration": "budget",
    "AdamWeightDecay": "optimization", "Lamb": "optimization", "StableAdamW": "optimization",
    "WarmupLinearDecay": "optimization", "WarmupStableDecay": "optimization",
    "create_optimizer": "optimization",
    "DynamicLossScaleOptimizer": "precision",
}


__getattr__ = lazy_names.module_getattr(
    __name__, {name: f"bert_tf.training.{module}" for name, module in _LAZY.items()})


__all__ = sorted(_LAZY)
