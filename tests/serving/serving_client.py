"""Runs exported signatures as a model server would: only TensorFlow and tensorflow-text loaded.

  python serving_client.py CALLS.json OUTPUT_PREFIX

CALLS.json holds
  "calls": [{"key", "export_dir", "signature", "inputs": {name: {"dtype", "value"}}}]
           (dtype "string": UTF-8 text, "base64": bytes, else a numpy dtype)
  "rest":  [{"key", "export_dir", "request": <a TF Serving REST predict body>}]
  "bad":   calls as in "calls" that must fail
Writes OUTPUT_PREFIX.npz (array "<key>/<output>" per call and output) and OUTPUT_PREFIX.json
(REST responses by key, the signatures' input and output specs by export directory, the
errors of the bad calls by key (exception type and message), and the bert_tf modules this
process loaded, which must be none).

REST bodies use TF Serving's row format: {"signature_name": ..., "instances": [...]}, each
instance an object of inputs (or a bare value for a one-input signature). The response is
{"predictions": [...]}: one object of outputs per instance (a bare value for one output).
"""

import base64
import json
import sys

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  Registers the tf-text ops before the SavedModels load.


def _tensor(value, dtype):
    if dtype == "string":
        if isinstance(value, str):  # A scalar, as a columnar request may send.
            return tf.constant(value.encode("utf-8"), tf.string)
        return tf.constant([v.encode("utf-8") for v in value], tf.string)
    if dtype == "base64":
        return tf.constant([base64.b64decode(v) for v in value], tf.string)
    return tf.constant(np.array(value, dtype=dtype))


def _numpy(tensor):
    """A tensor as numpy; strings as unicode (str) arrays, which np.savez stores plainly."""
    value = tensor.numpy()
    if value.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[str])(value) if value.size \
            else value.astype(str)
    return value


def _json_value(value):
    """One instance's output as JSON: lists of numbers, strings as UTF-8 text."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if value.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value).tolist()
    return value.tolist()


def rest_predict(model, body):
    """TF Serving's row-format predict on a loaded SavedModel: JSON body -> JSON response."""
    signature = model.signatures[body.get("signature_name", "serving_default")]
    specs = signature.structured_input_signature[1]
    instances = body["instances"]
    if len(specs) == 1 and not isinstance(instances[0], dict):
        instances = [{next(iter(specs)): x} for x in instances]
    unknown = {k for inst in instances for k in inst} - set(specs)
    if unknown:
        raise ValueError(f"instances name inputs the signature lacks: {sorted(unknown)}")
    inputs = {}
    for name, spec in specs.items():
        values = [inst[name] for inst in instances]
        if spec.dtype == tf.string:
            inputs[name] = tf.constant([v.encode("utf-8") for v in values], tf.string)
        else:
            inputs[name] = tf.constant(np.array(values), spec.dtype)
    outputs = {k: v.numpy() for k, v in signature(**inputs).items()}
    batch = len(instances)
    for name, value in outputs.items():
        if value.shape[:1] != (batch,):
            raise ValueError(f"output {name} has shape {value.shape}; the row format needs "
                             f"the batch ({batch}) first")
    rows = [{k: _json_value(v[i]) for k, v in outputs.items()} for i in range(batch)]
    if len(outputs) == 1:
        rows = [next(iter(r.values())) for r in rows]
    return {"predictions": rows}


def _spec_json(spec):
    return {"dtype": spec.dtype.name, "shape": [d for d in spec.shape.as_list()]}


def main(calls_path, output_prefix):
    with open(calls_path, encoding="utf-8") as f:
        spec = json.load(f)
    models, arrays, report = {}, {}, {"rest": {}, "signatures": {}, "errors": {}}
    for call in spec["calls"] + spec["rest"] + spec.get("bad", []):
        path = call["export_dir"]
        if path not in models:
            models[path] = tf.saved_model.load(path)
            report["signatures"][path] = {
                name: {"inputs": {k: _spec_json(s) for k, s in
                                  fn.structured_input_signature[1].items()},
                       "outputs": {k: _spec_json(s) for k, s in fn.structured_outputs.items()}}
                for name, fn in models[path].signatures.items()}
    for call in spec["calls"]:
        fn = models[call["export_dir"]].signatures[call["signature"]]
        inputs = {k: _tensor(v["value"], v["dtype"]) for k, v in call["inputs"].items()}
        for name, value in fn(**inputs).items():
            arrays[f"{call['key']}/{name}"] = _numpy(value)
    for call in spec["rest"]:
        report["rest"][call["key"]] = rest_predict(models[call["export_dir"]], call["request"])
    for call in spec.get("bad", []):
        fn = models[call["export_dir"]].signatures[call["signature"]]
        inputs = {k: _tensor(v["value"], v["dtype"]) for k, v in call["inputs"].items()}
        try:
            fn(**inputs)
            report["errors"][call["key"]] = None
        except Exception as e:  # noqa: BLE001  Any failure is reported, the test judges it.
            report["errors"][call["key"]] = {"type": type(e).__name__, "message": str(e)}
    report["bert_tf_modules"] = sorted(m for m in sys.modules if m.startswith("bert_tf"))
    np.savez(output_prefix + ".npz", **arrays)
    with open(output_prefix + ".json", "w", encoding="utf-8") as f:
        json.dump(report, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
