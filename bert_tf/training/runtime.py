"""The runtime a job runs on, decided once: the Keras backend, its devices and its precision.

A job builds one Runtime from its config (`create`) and hands it to everything below it: the
models are built under `runtime.scope()`, the run controller (training.controller) trains with
`runtime.step_runner(...)`, evaluation runs through `runtime.evaluate(...)`. Nothing else asks
which backend is in use.

- TensorFlowRuntime (training.tf_runner): a tf.distribute strategy (one device, mirrored GPUs
  or CPUs, multi-worker, TPU).
- JaxRuntime (training.jax_runner): keras.distribution.DataParallel over every device of every
  process (jax.distributed joins the processes).

Importing this module loads neither TensorFlow nor JAX: `create` imports the backend's module.
"""

from bert_tf.keras_setup import SUPPORTED_BACKENDS
# What every backend's runtime offers (defined beside the step runner's contract).
from bert_tf.training.step_runner import Runtime  # noqa: F401

# The backends bert_tf trains on: the ones its models run on.
BACKENDS = SUPPORTED_BACKENDS


def resolve_backend(settings):
    """The backend `settings` (a job's config with a `backend` field) ask for: its `backend`,
    else the one Keras runs on. The one place a job decides it.

    Raises:
      ValueError: a backend bert_tf does not train on, or one Keras does not run on.
    """
    import keras

    backend = settings.backend or keras.backend.backend()
    if backend not in BACKENDS:
        raise ValueError(f"--backend={backend!r} is not one of {', '.join(BACKENDS)}")
    if keras.backend.backend() != backend:
        raise ValueError(
            f"--backend={backend} but Keras runs on {keras.backend.backend()}: set "
            f"KERAS_BACKEND={backend} before Keras is imported (the bert-tf-* commands do)")
    return backend


def create(settings, strategy_factory=None):
    """The Runtime of `settings`: a job's config with the runtime fields (backend, and JAX's
    coordinator_address, num_processes, process_id).

    Args:
      settings: the job's runtime section.
      strategy_factory: TensorFlow: `() -> tf.distribute.Strategy` (the jobs pass
        jobs.runtime_setup's, which turns the flags into a strategy); default one device.

    Raises:
      ValueError: a backend bert_tf does not train on, or one Keras does not run on.
    """
    if resolve_backend(settings) == "jax":
        return on_jax(settings.coordinator_address, settings.num_processes, settings.process_id)
    return on_tensorflow(strategy_factory() if strategy_factory else None)


def on_tensorflow(strategy=None):
    """The TensorFlow runtime of a tf.distribute strategy (default: one device)."""
    from bert_tf.training import tf_runner

    return tf_runner.TensorFlowRuntime(strategy)


def on_jax(coordinator_address=None, num_processes=None, process_id=None):
    """The JAX runtime over every device (joining the other processes when asked)."""
    from bert_tf.training import jax_runner

    return jax_runner.JaxRuntime.start(coordinator_address, num_processes, process_id)
