"""create_pretraining_data as an Apache Beam pipeline, for corpora too large for one machine.

The work is distributed by file and by document chunk. The chunks are the local path's
(create_pretraining_data.iter_document_chunks: documents_per_chunk consecutive
documents of the corpus, files in order, so chunks span file boundaries and random next segments
come from other documents even with one document per file): a first pass counts the documents
of each file (one element per file, in parallel), which fixes the chunk of every document
(`chunk_index`); each file is then read on its own worker, its documents are grouped by chunk,
and each chunk goes through the same InstanceMaker as the local path, on any worker.

Seeds depend only on (random_seed, the file and document index of a chunk's first document,
dupe index), and chunks are the local path's, so for the same
inputs and settings this pipeline writes exactly the same set of records as
create_pretraining_data.create_pretraining_data; only the order and the sharding
differ (the runner decides both; readers shuffle anyway).

Reading every file twice (count, then read) costs little next to tokenizing and masking. A
single huge file is still read by one worker: split such a corpus into many files (Wikipedia
dumps come as many files anyway).

Runners: DirectRunner for tests and small corpora (--direct_num_workers=N
--direct_running_mode=multi_processing uses N local processes); DataflowRunner (--project,
--region, --temp_location=gs://..., --num_workers / --max_num_workers, and
--requirements_file or --setup_file so workers install bert_tf) and FlinkRunner
(--flink_master=host:port, --parallelism=N, --environment_type=DOCKER or PROCESS) through
pipeline_args; see docs/data-preparation.md.

Output shards are named <output_prefix>-SSSSS-of-NNNNN, plus ".gz" when compressed; a record's
shard is a hash of its bytes, and each shard is written by one worker under a temporary name and
renamed into place when complete.

Requires the [beam] extra (apache-beam). Only this module imports it, so the rest of bert_tf
works without it.
"""

import zlib

from absl import logging

try:
    import apache_beam as beam
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError("bert_tf.data.pretraining.beam_pipeline needs Apache Beam: pip install "
                      "'bert_tf[beam]' (apache-beam).") from e

from bert_tf.data.pretraining import corpus_reading, instances
from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data.pretraining import tfrecord_io
from bert_tf.data.patterns import expand_input_patterns

_METRICS_NAMESPACE = "create_pretraining_data"


def chunk_index(global_index, num_documents, documents_per_chunk):
    """The chunk that cpd.iter_document_chunks puts the corpus's global_index-th document in.

    Chunks hold documents_per_chunk consecutive documents, except the last, which takes the
    final 2 .. documents_per_chunk + 1 (never one alone): so there are
    max(0, (num_documents - 2) // documents_per_chunk) full chunks before it. Knowing this,
    every file can be read on its own worker and its documents sent straight to their chunk.

    Args:
      global_index: the document's index in the whole corpus (files in input order).
      num_documents: documents in the whole corpus.
      documents_per_chunk: as PretrainingDataOptions (>= 2).
    """
    full_chunks = max(0, (num_documents - 2) // documents_per_chunk)
    return min(global_index // documents_per_chunk, full_chunks)


def _count_documents(indexed_file):
    file_index, path = indexed_file
    documents = corpus_reading.iter_file_documents(path)
    return file_index, sum(1 for lines, _ in documents if lines is not None)


def _document_offsets(counts):
    """[(file_index, documents)] -> ({file_index: global index of its first document}, total)."""
    offsets, total = {}, 0
    for file_index, count in sorted(counts):
        offsets[file_index] = total
        total += count
    return offsets, total


class _ReadDocumentsFn(beam.DoFn):
    """(file_index, path) -> (chunk, (file_index, document_index, lines)) per document.

    One file per element, so files are read in parallel; the byte count goes to the num_bytes
    counter here (a file may hold no document at all)."""

    def __init__(self, documents_per_chunk):
        self._documents_per_chunk = documents_per_chunk
        self._num_bytes = beam.metrics.Metrics.counter(_METRICS_NAMESPACE, "num_bytes")

    def process(self, indexed_file, offsets_and_total):
        file_index, path = indexed_file
        offsets, total = offsets_and_total
        first = offsets[file_index]
        document_index = 0
        for lines, num_bytes in corpus_reading.iter_file_documents(path):
            self._num_bytes.inc(num_bytes)
            if lines is None:
                continue
            chunk = chunk_index(first + document_index, total, self._documents_per_chunk)
            yield chunk, (file_index, document_index, lines)
            document_index += 1


def _assemble_chunk(chunk_and_documents):
    """(chunk, documents in any order) -> the DocumentChunk iter_document_chunks would make."""
    _, documents = chunk_and_documents
    documents = sorted(documents, key=lambda d: (d[0], d[1]))
    return corpus_reading.DocumentChunk(keys=[(f, d) for f, d, _ in documents],
                             documents=[lines for _, _, lines in documents])


class _CreateRecordsFn(beam.DoFn):
    """DocumentChunk -> serialized tf.train.Example records; counts documents and instances."""

    def __init__(self, vocab_file, do_lower_case, options):
        self._vocab_file = vocab_file
        self._do_lower_case = do_lower_case
        self._options = options
        self._maker = None
        self._counters = {
            name: beam.metrics.Metrics.counter(_METRICS_NAMESPACE, name)
            for name in cpd.CreationStats.counter_names()}

    def setup(self):
        # The vocabulary is loaded once per worker, not once per element.
        self._maker = instances.InstanceMaker(
            cpd.pretraining_tokenizer(self._vocab_file, self._do_lower_case), self._options)

    def process(self, chunk):
        records, stats = self._maker.process_chunk(chunk)
        for name, counter in self._counters.items():
            if name != "num_bytes":  # counted by the reader
                counter.inc(getattr(stats, name))
        yield from records


class _WriteShardFn(beam.DoFn):
    """(shard index, records) -> one TFRecord shard written atomically; yields its path."""

    def __init__(self, output_prefix, num_shards, compression):
        self._output_prefix = output_prefix
        self._num_shards = num_shards
        self._compression = compression

    def process(self, shard_and_records):
        shard, shard_records = shard_and_records
        path = shard_path(self._output_prefix, shard, self._num_shards, self._compression)
        with tfrecord_io.ShardedRecordWriter([path], self._compression) as writer:
            for record in shard_records:
                writer.write(record)
        yield path


def shard_path(output_prefix, shard, num_shards, compression=""):
    """<output_prefix>-SSSSS-of-NNNNN, plus ".gz" for GZIP."""
    suffix = ".gz" if compression == "GZIP" else ""
    return f"{output_prefix}-{shard:05d}-of-{num_shards:05d}{suffix}"


def _shard_of(record, num_shards):
    # crc32 of the bytes: the same shard for the same record in every worker and every run.
    return zlib.crc32(record) % num_shards


def build_pipeline(pipeline, input_files, output_prefix, vocab_file, *, do_lower_case=None,
                   options=None, num_shards=1, compression=""):
    """Adds read -> make records -> write to `pipeline`.

    Records are written with the local path's TFRecord writer (tfrecord_io), one
    shard per group, so both paths frame and compress records the same way.

    Args:
      pipeline: a beam.Pipeline.
      input_files: list of input text files, in the order that defines file indexes (the local
        path uses the same order: expand_input_patterns, minus empty files).
      output_prefix: shards are <output_prefix>-SSSSS-of-NNNNN[.gz].
      vocab_file: WordPiece vocabulary or tokenizer.json (cpd.pretraining_tokenizer).
      do_lower_case: as cpd.pretraining_tokenizer.
      options: cpd.PretrainingDataOptions; None = defaults.
      num_shards: number of output shards (>= 1); a record's shard is a hash of its bytes.
      compression: "" or "GZIP".

    Returns:
      The PCollection of written shard paths (shards that received no record are absent).
    """
    options = options or cpd.PretrainingDataOptions()
    files = pipeline | "ListFiles" >> beam.Create(list(enumerate(input_files)))
    # A first pass counts each file's documents (in parallel, by file), which fixes every
    # document's chunk: the chunks are then exactly the local path's, without one sequential
    # reader.
    offsets = (files
               | "CountDocuments" >> beam.Map(_count_documents)
               | "AllCounts" >> beam.combiners.ToList()
               | "Offsets" >> beam.Map(_document_offsets))
    return (
        files
        # Each file is its own element, so the runner can read files on different workers.
        | "SpreadFiles" >> beam.Reshuffle()
        | "ReadDocuments" >> beam.ParDo(_ReadDocumentsFn(options.documents_per_chunk),
                                        beam.pvalue.AsSingleton(offsets))
        # Documents meet their chunk on whichever worker the runner picks for it.
        | "GroupByChunk" >> beam.GroupByKey()
        | "AssembleChunks" >> beam.Map(_assemble_chunk)
        | "CreateRecords" >> beam.ParDo(_CreateRecordsFn(vocab_file, do_lower_case, options))
        | "KeyByShard" >> beam.Map(lambda record: (_shard_of(record, num_shards), record))
        | "GroupByShard" >> beam.GroupByKey()
        | "WriteShards" >> beam.ParDo(_WriteShardFn(output_prefix, num_shards, compression)))


def _counter(result, name):
    query = result.metrics().query(MetricsFilter().with_namespace(_METRICS_NAMESPACE)
                                   .with_name(name))
    return sum(c.committed or 0 for c in query["counters"])


def run_beam_pipeline(input_patterns, output_prefix, vocab_file, *, do_lower_case=None,
                      options=None, num_shards=1, compression="", runner="DirectRunner",
                      pipeline_args=()):
    """Validates the settings, runs the pipeline to completion and logs its counters.

    Args:
      input_patterns: comma-separated globs (str) or a list of them.
      output_prefix: output shard prefix (its directory must exist when it is a local path).
      vocab_file, do_lower_case, options, num_shards, compression: as `build_pipeline`.
      runner: a Beam runner name (DirectRunner, DataflowRunner, FlinkRunner, ...).
      pipeline_args: extra Beam pipeline options, e.g. ["--project=p", "--region=r"] or
        ["--direct_num_workers=1", "--direct_running_mode=in_memory"].

    Returns:
      cpd.CreationStats with every counter of the local path (documents, instances, tokens,
      predictions, long lines, bytes, ...) from the runner's metrics (zeros for runners that do
      not report committed metrics); long_lines_per_file stays empty (only the total is
      logged).

    Raises:
      ValueError: as create_pretraining_data (bad flag, empty glob, missing output directory,
        all inputs empty, no document at all); the tokenizer's error for a bad vocab file.
    """
    options = options or cpd.PretrainingDataOptions()
    options.validate()
    if num_shards < 1:
        raise ValueError(f"--beam_num_shards={num_shards} must be at least 1.")
    shards = [shard_path(output_prefix, i, num_shards, compression) for i in range(num_shards)]
    tfrecord_io.check_output_files(shards, compression)
    input_files = cpd.nonempty_input_files(expand_input_patterns(input_patterns))
    # Loading the vocabulary here reports a bad vocab file before the pipeline starts.
    instances.InstanceMaker(cpd.pretraining_tokenizer(vocab_file, do_lower_case), options)
    cpd.warn_if_predictions_capped(options)
    # What this host's writers of these shards, killed before, left (never a live one's).
    tfrecord_io.remove_stale_temp_files(shards)
    logging.info("Running create_pretraining_data on %s over %d files.", runner, len(input_files))

    pipeline_options = PipelineOptions(["--runner=" + runner, *pipeline_args])
    pipeline = beam.Pipeline(options=pipeline_options)
    build_pipeline(pipeline, input_files, output_prefix, vocab_file,
                   do_lower_case=do_lower_case, options=options, num_shards=num_shards,
                   compression=compression)
    result = pipeline.run()
    result.wait_until_finish()

    stats = cpd.CreationStats(**{
        name: _counter(result, name) for name in cpd.CreationStats.counter_names()})
    # Only this driver-side check needs TensorFlow (its file systems and reader); the workers,
    # which unpickle the DoFns of this module, do not load it.
    import tensorflow as tf

    # A shard no record hashed to is written empty, so every <prefix>-SSSSS-of-NNNNN exists.
    for path in shards:
        if not tf.io.gfile.exists(path):
            with tfrecord_io.ShardedRecordWriter([path], compression):
                pass
    if stats.instances == 0:
        # Either no document had any token, or the runner reports no committed metrics: look.
        if not any(True for _ in tf.data.TFRecordDataset(shards, compression).take(1)):
            for path in shards:
                tf.io.gfile.remove(path)
            raise ValueError(f"No documents with any token in the input files "
                             f"({', '.join(input_files)}); nothing written.")
    cpd.log_summary(stats, options)
    return stats
