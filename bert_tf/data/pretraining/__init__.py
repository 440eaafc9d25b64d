"""Pre-training data: masked-LM / next-sentence instances from text, as TFRecords or in tf.data.

Records (no TensorFlow): create_pretraining_data.py runs the job (workers, progress, shuffling,
writing); corpus_reading.py reads documents in chunks; instances.py makes the instances of a
chunk (the original's algorithm, vectorised); row_packing.py packs several instances into one
row; tfrecord_io.py and instance_serializer.py serialize them; beam_pipeline.py runs the same on
Apache Beam. masking_recipe.MaskingRecipe holds the settings records and raw text share.

In tf.data: record_dataset.py reads the records (bert_tf.data.pretraining_dataset);
text_dataset.py masks raw text on the fly (bert_tf.data.text_pretraining_dataset) with
masking.py and row_packing_tf.py. demo_corpus.py is the offline demo corpus.
"""
