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

from bert_tf.interop.huggingface import load_huggingface, read_huggingface, save_huggingface
from bert_tf.interop.kerashub import from_keras_hub, load_keras_hub
from bert_tf.interop.sentence_transformers import (load_sentence_transformers,
                                                   save_sentence_transformers)
from bert_tf.interop.tf1 import load_tf1_checkpoint, read_tf1_checkpoint, save_tf1_checkpoint
from bert_tf.interop.warm_start import (casing_of, check_weights_readable, checkpoint_casing,
                                       checkpoint_config, load_bert_tf, load_checkpoint,
                                       warm_start)
from bert_tf.interop.weights import InteropError, WarmStartReport, model_variables

__all__ = ["InteropError", "WarmStartReport", "casing_of", "check_weights_readable",
           "checkpoint_casing",
           "checkpoint_config", "from_keras_hub",
           "load_bert_tf", "load_checkpoint", "load_huggingface", "load_keras_hub",
           "load_sentence_transformers",
           "load_tf1_checkpoint", "model_variables", "read_huggingface", "read_tf1_checkpoint",
           "save_huggingface", "save_sentence_transformers", "save_tf1_checkpoint",
           "warm_start"]
