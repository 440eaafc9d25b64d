"""tf.data settings every bert_tf input shares: a leaf both `data` (evaluation and prediction
inputs) and `training` (the step runners) import, since neither imports the other."""


def without_autotuning(dataset):
    """`dataset` (tf.data) with tf.data's autotuning off. AUTOTUNE stages then run as many
    calls as there are cores; prefetch buffers still size themselves.

    Why, measured:
      * exit: tearing an iterator down waits for the autotuning threads, which sleep up to a
        minute between their runs; a finished pre-training run took 42-59 s more to exit in a
        third to half of 100-150-s runs (docs/pretraining.md), 2-4 s without.
      * short passes: an evaluation reads little, and autotuning's background work competes
        with the model for the cores: predicting 1,000 short phrases took 2.67 s with it and
        1.89 s without (all-MiniLM-L6-v2, 2-core Xeon; 1.75 s on pre-made batches).
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
