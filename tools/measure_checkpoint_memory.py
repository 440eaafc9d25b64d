r"""Peak host memory of one JAX training checkpoint save, against the size of what it saves.

Builds a BertPretrainer (default BERT-base) and its AdamWeightDecay on Keras' JAX backend (CPU:
the arrays live in host memory, so any copy a save makes shows in the process's resident
memory), then saves one checkpoint with bert_tf's Orbax checkpointer and, for comparison, the
way bert_tf saved JAX checkpoints before it (every variable copied to NumPy, then one .npz
buffered whole in memory). A thread samples VmRSS every millisecond during each save; the
result is the rise over the resident memory before the save, beside the model + optimizer
state's size.

  KERAS_BACKEND=jax python tools/measure_checkpoint_memory.py --preset=bert_base
"""

import io
import json
import os
import sys
import tempfile
import threading
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rss_bytes():
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _peak_rise(work):
    """(peak resident bytes during work() minus before it, seconds)."""
    before = _rss_bytes()
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            time.sleep(0.001)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    start = time.time()
    work()
    seconds = time.time() - start
    done.set()
    thread.join()
    return max(peak[0], _rss_bytes()) - before, seconds


def main():
    import numpy as np

    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertPretrainer, build_encoder
    from bert_tf.training import jax_checkpoints
    from bert_tf.training.optimization import create_optimizer

    preset = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--preset=")),
                  "bert_base")
    model = BertPretrainer(build_encoder(BertConfig.from_preset(preset)))
    optimizer = create_optimizer(1e-4, 1000, 100)
    optimizer.build(model.trainable_variables)
    state_bytes = sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize
                      for v in list(model.variables) + list(optimizer.variables))
    directory = tempfile.mkdtemp(prefix="bert_tf_checkpoint_memory_")
    checkpointer = jax_checkpoints.Checkpointer(directory)
    checkpointer.save(model, optimizer, 1, {})  # warm-up: Orbax's first-use set-up
    orbax_rise, orbax_seconds = _peak_rise(lambda: checkpointer.save(model, optimizer, 2, {}))

    def npz_save():
        buffer = io.BytesIO()
        np.savez(buffer, **{f"v{i}": np.asarray(v.value) for i, v in
                            enumerate(list(model.variables) + list(optimizer.variables))})
        with open(os.path.join(directory, "ckpt-3.npz"), "wb") as f:
            f.write(buffer.getvalue())

    npz_rise, npz_seconds = _peak_rise(npz_save)
    print(json.dumps({
        "preset": preset, "state_mb": round(state_bytes / 2**20, 1),
        "orbax_peak_rss_rise_mb": round(orbax_rise / 2**20, 1),
        "orbax_save_seconds": round(orbax_seconds, 2),
        "npz_peak_rss_rise_mb": round(npz_rise / 2**20, 1),
        "npz_save_seconds": round(npz_seconds, 2),
    }))


if __name__ == "__main__":
    main()
