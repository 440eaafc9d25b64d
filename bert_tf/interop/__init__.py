"""Checkpoint interop: original TF1 BERT checkpoints, Hugging Face and keras-hub, in and out.

    model = load_tf1_checkpoint("uncased_L-12_H-768_A-12/bert_model.ckpt", config)
    model, config, vocab_file = load_huggingface("bert-base-uncased/")
    encoder = from_keras_hub(backbone)
    save_tf1_checkpoint(model, "out/bert_model.ckpt")
    save_huggingface(model, "out_hf/", vocab_file=vocab_file)
    st = load_sentence_transformers("all-MiniLM-L6-v2/")  # st.model: a BertSentenceEmbedder
    report = warm_start(init_checkpoint, classifier, do_lower_case=True)
    model = load_bert_tf("pretraining_output/")  # a bert_tf run dir, .keras or checkpoint
    model = load_checkpoint("uncased_L-12_H-768_A-12/")  # a TF1 or bert_tf checkpoint

Every format is mapped through the original TF1 variable names (bert_tf.interop.weights), so
the outputs of a converted model equal the original's.
"""

from bert_tf.lazy_names import module_getattr

# Resolved on first use: the Hugging Face format needs no TensorFlow (a JAX-only machine writes
# and reads it), the TF1 checkpoint and keras-hub formats do. No module is named like a name
# here: importing it would bind the module over the name.
_NAMES = {
    "load_huggingface": "huggingface", "load_huggingface_task": "huggingface",
    "read_huggingface": "huggingface",
    "save_huggingface": "huggingface", "from_keras_hub": "kerashub",
    "load_keras_hub": "kerashub", "load_sentence_transformers": "sentence_transformers",
    "save_sentence_transformers": "sentence_transformers", "load_tf1_checkpoint": "tf1",
    "read_tf1_checkpoint": "tf1", "save_tf1_checkpoint": "tf1", "casing_of": "warm_starting",
    "check_weights_readable": "warm_starting", "checkpoint_casing": "warm_starting",
    "checkpoint_config": "warm_starting", "load_bert_tf": "warm_starting",
    "load_checkpoint": "warm_starting", "warm_start": "warm_starting", "InteropError": "weights",
    "WarmStartReport": "weights", "model_variables": "weights",
}
__getattr__ = module_getattr(__name__, {name: f"{__name__}.{module}"
                                        for name, module in _NAMES.items()})

__all__ = ["InteropError", "WarmStartReport", "casing_of", "check_weights_readable",
           "checkpoint_casing",
           "checkpoint_config", "from_keras_hub",
           "load_bert_tf", "load_checkpoint", "load_huggingface", "load_huggingface_task",
           "load_keras_hub",
           "load_sentence_transformers",
           "load_tf1_checkpoint", "model_variables", "read_huggingface", "read_tf1_checkpoint",
           "save_huggingface", "save_sentence_transformers", "save_tf1_checkpoint",
           "warm_start"]
