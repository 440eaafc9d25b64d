"""The job that makes pre-training TFRecords from text: locally over worker processes, or as an
Apache Beam pipeline.

`make_pretraining_data(PretrainingDataConfig(input_file=..., output_file=..., vocab_file=...))`
is what `bert-tf-create-pretraining-data` (bert_tf.cli.create_pretraining_data) runs; the
records are those of bert_tf.data.pretraining.create_pretraining_data (the algorithm, the
BERT-family options and packing are described there). Imports no TensorFlow: local paths stay
TF-free.
"""

import dataclasses

from absl import logging

from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data.pretraining.masking_recipe import MaskingSettings, resolve_max_predictions


@dataclasses.dataclass
class PretrainingDataConfig(MaskingSettings):
    """What a record-making run is told; field names and defaults are the flags'.

    See `bert-tf-create-pretraining-data --help` (bert_tf.cli.flags); the masking fields are
    MaskingSettings'. None means "not given":
    do_lower_case None takes a tokenizer.json's own casing (a vocab.txt: True);
    max_predictions_per_seq None is 20, or with pack_sequences the per-row default
    (masking_recipe.resolve_max_predictions).
    """

    input_file: str | None = None
    output_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    random_seed: int = 12345
    dupe_factor: int = 10
    short_seq_prob: float = 0.1
    num_workers: int = 1
    gzip: bool = False
    feature_names: str = "v1"
    documents_per_chunk: int = 1000
    shuffle_buffer_size: int = 100_000
    span_geometric_p: float = 0.2
    max_span_length: int = 10
    use_beam: bool = False
    runner: str | None = None
    beam_num_shards: int = 1
    beam_pipeline_option: list = dataclasses.field(default_factory=list)

    @property
    def beam(self):
        """Run as a Beam pipeline (--use_beam, or a --runner named)."""
        return self.use_beam or bool(self.runner)

    def validate(self):
        """The settings that need no input against each other; raises ValueError naming the
        flag (the instance settings are checked by cpd.PretrainingDataOptions.validate)."""
        if self.max_instances_per_row and not self.pack_sequences:
            raise ValueError("--max_instances_per_row needs --pack_sequences.")
        if self.beam and "," in self.output_file:
            raise ValueError(
                f"--output_file={self.output_file}: with Beam give one shard prefix "
                "(shards are named <prefix>-SSSSS-of-NNNNN); set --beam_num_shards instead.")

    def instance_options(self):
        """The cpd.PretrainingDataOptions of the config, P resolved for packed rows."""
        max_predictions = resolve_max_predictions(self)
        if self.pack_sequences and self.max_predictions_per_seq is None:
            logging.info("--pack_sequences: %d masked positions per row "
                         "(--max_predictions_per_seq).", max_predictions)
        return cpd.PretrainingDataOptions(
            max_seq_length=self.max_seq_length,
            max_predictions_per_seq=max_predictions,
            masked_lm_prob=self.masked_lm_prob,
            short_seq_prob=self.short_seq_prob,
            dupe_factor=self.dupe_factor,
            do_whole_word_mask=self.do_whole_word_mask,
            random_seed=self.random_seed,
            feature_names=self.feature_names,
            documents_per_chunk=self.documents_per_chunk,
            sentence_order_prediction=self.sentence_order_prediction,
            do_span_mask=self.do_span_mask,
            ngram_mask=self.ngram_mask,
            span_geometric_p=self.span_geometric_p,
            max_span_length=self.max_span_length,
            pack_sequences=self.pack_sequences,
            max_instances_per_row=self.max_instances_per_row)


def make_pretraining_data(config):
    """Writes the records the config asks for; returns the run's cpd.CreationStats.

    Raises:
      ValueError: a bad setting (naming the flag), a glob matching nothing, a missing output
        directory, no document in any input, or a bad vocabulary file. Nothing is written
        then.
      OSError: a file that cannot be read or written.
    """
    config.validate()
    options = config.instance_options()
    compression = "GZIP" if config.gzip else ""
    if config.beam:
        from bert_tf.data.pretraining import beam_pipeline  # only this path needs apache-beam

        return beam_pipeline.run_beam_pipeline(
            config.input_file, config.output_file, config.vocab_file,
            do_lower_case=config.do_lower_case, options=options,
            num_shards=config.beam_num_shards, compression=compression,
            runner=config.runner or "DirectRunner", pipeline_args=config.beam_pipeline_option)
    return cpd.create_pretraining_data(
        config.input_file, config.output_file, config.vocab_file,
        do_lower_case=config.do_lower_case, options=options, num_workers=config.num_workers,
        compression=compression, shuffle_buffer_size=config.shuffle_buffer_size)
