"""One driver per job: pre-training, fine-tuning (classification, tagging, SQuAD), sentence
embeddings, records, vocabularies, feature extraction, checkpoint conversion and export.

A driver takes a typed config (dataclasses whose field names are the command-line flag names; a
training job's in task, trainer and runtime sections: `sections`) and runs the whole job:
checks, run directory, data, model, training, evaluation, outputs. The commands in bert_tf.cli
turn their flags into these configs and call a driver; a notebook or a test builds the same
configs without absl. Drivers use the library below (training, data, modeling, interop,
serving, metrics) and are imported only by bert_tf.cli.

  sections         the training jobs' config sections (RuntimeConfig, TrainerConfig,
                   ModelFilesConfig) and from_flat, which routes a flag name to its section
  flag_checks      FlagValueError and the checks of setting values every job shares
  runtime_setup    backend check, strategy or JAX devices, seed and dtype policy, the loop's
                   batch and steps, length buckets
  model_files      the config and tokenizer files from the flags or --init_checkpoint (whose
                   existence it checks), the model config read from them, their copies in the
                   run directory
  tokenizer_setup  the tokenizer read from its file, --vocab_file checked to exist and against a
                   model's own
  pretraining_config  PretrainingConfig and check_settings() (no TensorFlow)
  pretraining      pretrain()
  finetuning_config  FinetuningConfig, each task's config and check_settings() (no TensorFlow)
  finetuning       the fine-tuning driver run_task() and its phases
  classification   the classification (one label or several) / regression task (GLUE, your own
                   CSV/TSV/JSONL)
  tagging          the token-tagging task (CoNLL files)
  squad            the SQuAD v1.1 / v2.0 task
  embedding_config EmbeddingConfig and check_settings() (no TensorFlow)
  embedding        bert-tf-embed's train() and encode()
  pretraining_data PretrainingDataConfig and make_pretraining_data() (no TensorFlow)
  vocabulary       VocabularyConfig and build_vocabulary() (no TensorFlow)
  extract_features_config  ExtractFeaturesConfig and its checks (no TensorFlow)
  extract_features extract_features()
  convert_checkpoint  ConvertCheckpointConfig and convert_checkpoint()
  export           ExportConfig, export() (SavedModel or LiteRT) and check()

The prepare-demo-data command's config is bert_tf.data.pretraining.demo_corpus.DemoDataConfig.
"""
