"""SavedModel export with serving signatures for TF Serving, and the checks that go with it.

- `export(model, export_dir, ...)`: id, raw-text and tf.Example signatures for every model type
  (bert_tf.serving.exporter, bert_tf.serving.task_signatures).
- `write_task_info` / `read_task_info`: the task_info.json that fine-tuning runs leave next to
  model.keras (bert_tf.serving.task_info).
- `load_model_dir`: a run's output directory (or a .keras file) -> the model and the settings
  the export needs (bert_tf.serving.model_dir).
- `check_ops`: the ops of an export against what the TF Serving model server links
  (bert_tf.serving.op_check).
- `export_litert`: a LiteRT model.tflite with raw-text and id signatures, float or quantized
  and compared with float32 (bert_tf.serving.litert_export, which runs bert_tf.serving.litert
  and bert_tf.serving.quantization); `op_census` lists its ops;
  `LiteRTModel` answers texts with it on CPU (bert_tf.serving.litert_model).

Everything except task_info imports TensorFlow when first used.
"""

from bert_tf import lazy_names

from bert_tf.serving.task_info import (TASK_INFO_FILE, TASKS, TaskInfo, TaskInfoError,
                                       read_task_info, write_task_info)

_LAZY = {
    "export": "bert_tf.serving.exporter",
    "SIGNATURE_KEYS": "bert_tf.serving.exporter",
    "load_model_dir": "bert_tf.serving.model_dir",
    "ExportSource": "bert_tf.serving.model_dir",
    "task_name_of": "bert_tf.serving.task_signatures",
    "check_ops": "bert_tf.serving.op_check",
    "list_ops": "bert_tf.serving.op_check",
    "server_op_allowlist": "bert_tf.serving.op_check",
    "export_litert": "bert_tf.serving.litert_export",
    "op_census": "bert_tf.serving.litert",
    "LiteRTModel": "bert_tf.serving.litert_model",
}


__getattr__ = lazy_names.module_getattr(__name__, _LAZY)


__all__ = ["TASK_INFO_FILE", "TASKS", "TaskInfo", "TaskInfoError",
           "read_task_info", "write_task_info", *_LAZY]
