"""Task models that take raw text: a Keras model with its tokenizer and label names.

  TextClassifier    BertClassifier       classification, sentence pairs, regression
  QuestionAnswerer  BertSpanLabeler      span question answering (SQuAD)
  TokenTagger       BertTokenClassifier  token tagging (NER)
  FillMask          BertPretrainer       the masked-LM head's guesses for masks in a text
  TextEmbedder      BertSentenceEmbedder sentence vectors

`bert_tf.load_task(run_dir)` loads the directory a fine-tuning (or pre-training, embedding)
run wrote as its task; each class's `from_pretrained(path, ...)` puts a new head on any
encoder bert_tf.load_model reads (a pre-training run, TF1, Hugging Face, sentence-transformers,
keras-hub); `TextClassifier(model, tokenizer, labels)` wraps a model in memory. `predict`
takes raw strings and answers with label names and scores (spans, tagged words, tokens,
vectors); `fit` trains on texts and labels; `save` writes a directory every reader of a run
reads. Tokenization is Python (bert_tf.text), so predict runs on JAX without TensorFlow;
batches are length-sorted and cut to length buckets, as the commands run them.
"""

from bert_tf.tasks.base import TaskError, TextTask
from bert_tf.tasks.fill_mask import FillMask
from bert_tf.tasks.loading import load_task
from bert_tf.tasks.question_answerer import QuestionAnswerer
from bert_tf.tasks.text_classifier import TextClassifier
from bert_tf.tasks.text_embedder import TextEmbedder
from bert_tf.tasks.token_tagger import TokenTagger, split_words

__all__ = ["FillMask", "QuestionAnswerer", "TaskError", "TextClassifier", "TextEmbedder",
           "TextTask", "TokenTagger", "load_task", "split_words"]
