"""The Beam pipeline (DirectRunner, in process) writes the same set of records as the local path."""

import collections
import glob
import logging
import os
import re

import pytest
import tensorflow as tf

pytest.importorskip("apache_beam")

from bert_tf.data.pretraining import beam_pipeline  # noqa: E402
from bert_tf.data.pretraining import create_pretraining_data as cpd  # noqa: E402
from bert_tf.data.pretraining import demo_corpus  # noqa: E402
from bert_tf.text import basic_tokenize  # noqa: E402

import zygote  # noqa: E402

DIRECT_ARGS = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("beam_corpus")
    documents = demo_corpus.pydoc_documents()[:50]
    (root / "a.txt").write_text(demo_corpus.format_documents(documents[:30]), encoding="utf-8")
    (root / "b.txt").write_text(demo_corpus.format_documents(documents[30:]), encoding="utf-8")
    counts = collections.Counter(
        w for doc in documents for s in doc for w in basic_tokenize(s, do_lower_case=True))
    chars = sorted({c for w in counts for c in w})
    words = [w for w, _ in counts.most_common(800)]
    tokens = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
              + [c for c in chars if c not in set(words)] + ["##" + c for c in chars])
    (root / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return {"pattern": f"{root / 'a.txt'},{root / 'b.txt'}", "vocab": str(root / "vocab.txt")}


OPTIONS = cpd.PretrainingDataOptions(max_seq_length=64, max_predictions_per_seq=10,
                                     dupe_factor=2, random_seed=3, documents_per_chunk=8,
                                     do_whole_word_mask=True)


def records(paths, compression=""):
    return [r.numpy() for r in tf.data.TFRecordDataset(paths, compression_type=compression)]


def summary_lines(text):
    return [line[line.index("Wrote "):] for line in text.splitlines() if "Wrote " in line]


def test_beam_writes_the_same_set_of_records_as_the_local_path(corpus, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="absl")
    local = cpd.create_pretraining_data(corpus["pattern"], str(tmp_path / "local.tfrecord"),
                                        corpus["vocab"], options=OPTIONS)
    local_summary = summary_lines(caplog.text)
    caplog.clear()
    stats = beam_pipeline.run_beam_pipeline(
        corpus["pattern"], str(tmp_path / "beam"), corpus["vocab"], options=OPTIONS,
        num_shards=2, pipeline_args=DIRECT_ARGS)
    shards = sorted(glob.glob(str(tmp_path / "beam-*")))
    assert [os.path.basename(p) for p in shards] == ["beam-00000-of-00002",
                                                     "beam-00001-of-00002"]
    local_records = records([str(tmp_path / "local.tfrecord")])
    beam_records = records(shards)
    assert len(beam_records) == len(local_records) == local.instances > 300
    assert collections.Counter(beam_records) == collections.Counter(local_records)
    # The runner's metrics carry every counter of the local run (tokens included), so the
    # summary is the same line.
    assert stats == local
    assert local.tokens > 20 * local.instances and local.num_bytes > 0
    assert len(local_summary) == 1 and summary_lines(caplog.text) == local_summary
    assert local_summary[0].startswith(f"Wrote {local.instances} instances from 50 documents")
    assert f"{local.tokens / local.instances:.1f} tokens" in local_summary[0]


def test_beam_gzip_shards(corpus, tmp_path):
    options = cpd.PretrainingDataOptions(max_seq_length=64, max_predictions_per_seq=10,
                                         dupe_factor=1, random_seed=3, documents_per_chunk=8)
    beam_pipeline.run_beam_pipeline(corpus["pattern"], str(tmp_path / "train"), corpus["vocab"],
                                    options=options, num_shards=1, compression="GZIP",
                                    pipeline_args=DIRECT_ARGS)
    assert os.listdir(tmp_path) == ["train-00000-of-00001.gz"]
    cpd.create_pretraining_data(corpus["pattern"], str(tmp_path / "local.tfrecord"),
                                corpus["vocab"], options=options)
    assert (sorted(records([str(tmp_path / "train-00000-of-00001.gz")], "GZIP"))
            == sorted(records([str(tmp_path / "local.tfrecord")])))


def test_beam_checks_inputs_before_running(corpus, tmp_path):
    prefix = str(tmp_path / "missing_dir" / "train")
    with pytest.raises(ValueError, match="^" + re.escape(
            f"Output directory {tmp_path / 'missing_dir'} does not exist (for output file "
            f"{prefix}-00000-of-00001); create it first.") + "$"):
        beam_pipeline.run_beam_pipeline(corpus["pattern"], prefix, corpus["vocab"],
                                        pipeline_args=DIRECT_ARGS)
    pattern = str(tmp_path / "none-*.txt")
    with pytest.raises(ValueError, match="^" + re.escape(
            f'No files match input pattern "{pattern}".') + "$"):
        beam_pipeline.run_beam_pipeline(pattern, str(tmp_path / "train"), corpus["vocab"],
                                        pipeline_args=DIRECT_ARGS)
    with pytest.raises(ValueError, match=re.escape("--masked_lm_prob=2.0 must be in (0, 1).")):
        beam_pipeline.run_beam_pipeline(
            corpus["pattern"], str(tmp_path / "train"), corpus["vocab"],
            options=cpd.PretrainingDataOptions(masked_lm_prob=2.0), pipeline_args=DIRECT_ARGS)
    assert os.listdir(tmp_path) == []


def test_beam_without_any_token_leaves_no_shards(corpus, tmp_path):
    (tmp_path / "controls.txt").write_text("\x00\x01\n\n\x02\n", encoding="utf-8")
    with pytest.raises(ValueError, match="^No documents with any token in the input files"):
        beam_pipeline.run_beam_pipeline(str(tmp_path / "controls.txt"), str(tmp_path / "out"),
                                        corpus["vocab"], num_shards=1,
                                        pipeline_args=DIRECT_ARGS)
    assert os.listdir(tmp_path) == ["controls.txt"]


@pytest.mark.slow
def test_cli_use_beam(corpus, repo_root, tmp_path):
    import subprocess

    options = cpd.PretrainingDataOptions(max_seq_length=64, max_predictions_per_seq=10,
                                         dupe_factor=1, random_seed=3, documents_per_chunk=8)
    cpd.create_pretraining_data(corpus["pattern"], str(tmp_path / "local.tfrecord"),
                                corpus["vocab"], options=options)
    env = dict(os.environ, PYTHONPATH=repo_root)
    command = [zygote.shared_python(env), os.path.join(repo_root, "tools",
                                                       "create_pretraining_data.py"),
               f"--input_file={corpus['pattern']}", f"--output_file={tmp_path / 'train'}",
               f"--vocab_file={corpus['vocab']}", "--max_seq_length=64",
               "--max_predictions_per_seq=10", "--dupe_factor=1", "--random_seed=3",
               "--documents_per_chunk=8", "--runner=DirectRunner", "--beam_num_shards=3",
               *[f"--beam_pipeline_option={a}" for a in DIRECT_ARGS]]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    shards = sorted(glob.glob(str(tmp_path / "train-*")))
    assert len(shards) == 3
    assert sorted(records(shards)) == sorted(records([str(tmp_path / "local.tfrecord")]))


@pytest.mark.parametrize("num_documents", [0, 1, 2, 3, 7, 8, 9, 10, 11, 17, 18, 19])
def test_chunk_index_gives_the_local_paths_chunks(tmp_path, num_documents):
    # Documents spread over three files (one may be empty of documents), chunks of 4.
    sizes = [num_documents // 3, num_documents - 2 * (num_documents // 3), num_documents // 3]
    paths, number = [], 0
    for i, size in enumerate(sizes):
        path = tmp_path / f"{i}.txt"
        path.write_text("".join(f"sentence {number + j} .\n\n" for j in range(size)) or "\n")
        number += size
        paths.append(str(path))
    local = [[int(lines[0].split()[1]) for lines in chunk.documents]
             for chunk in cpd.iter_document_chunks(paths, 4) if chunk.documents]
    by_index = collections.defaultdict(list)
    for g in range(num_documents):
        by_index[beam_pipeline.chunk_index(g, num_documents, 4)].append(g)
    assert [by_index[c] for c in sorted(by_index)] == local
    assert sum(map(len, local)) == num_documents


@pytest.mark.slow
def test_beam_with_two_direct_workers_reads_files_apart_and_matches_local(corpus, tmp_path):
    # Three files, chunks spanning them; two worker processes of the DirectRunner.
    options = cpd.PretrainingDataOptions(max_seq_length=64, max_predictions_per_seq=10,
                                         dupe_factor=1, random_seed=5, documents_per_chunk=7)
    documents = demo_corpus.pydoc_documents()[:45]
    paths = []
    for i in range(3):
        path = tmp_path / f"part-{i}.txt"
        path.write_text(demo_corpus.format_documents(documents[15 * i:15 * (i + 1)]),
                        encoding="utf-8")
        paths.append(str(path))
    local = cpd.create_pretraining_data(",".join(paths), str(tmp_path / "local.tfrecord"),
                                        corpus["vocab"], options=options)
    stats = beam_pipeline.run_beam_pipeline(
        ",".join(paths), str(tmp_path / "beam"), corpus["vocab"], options=options,
        num_shards=3, pipeline_args=["--direct_num_workers=2",
                                     "--direct_running_mode=multi_processing"])
    shards = sorted(glob.glob(str(tmp_path / "beam-*")))
    assert [os.path.basename(p) for p in shards] == [
        f"beam-0000{i}-of-00003" for i in range(3)]
    beam_records = records(shards)
    assert collections.Counter(beam_records) == collections.Counter(
        records([str(tmp_path / "local.tfrecord")]))
    assert len(beam_records) == local.instances > 100
    assert stats == local

def test_beam_writes_the_same_packed_rows_as_the_local_path(corpus, tmp_path):
    options = cpd.PretrainingDataOptions(max_seq_length=128, max_predictions_per_seq=24,
                                         dupe_factor=1, random_seed=3, documents_per_chunk=8,
                                         pack_sequences=True, max_instances_per_row=4)
    local = cpd.create_pretraining_data(corpus["pattern"], str(tmp_path / "local.tfrecord"),
                                        corpus["vocab"], options=options)
    stats = beam_pipeline.run_beam_pipeline(corpus["pattern"], str(tmp_path / "beam"),
                                            corpus["vocab"], options=options, num_shards=1,
                                            pipeline_args=DIRECT_ARGS)
    local_rows = records([str(tmp_path / "local.tfrecord")])
    assert stats == local and local.rows == len(local_rows) < local.instances
    assert collections.Counter(records(sorted(glob.glob(str(tmp_path / "beam-*"))))) == \
        collections.Counter(local_rows)
    first = tf.train.Example.FromString(local_rows[0]).features.feature
    assert "instance_ids" in first and len(first["next_sentence_positions"].int64_list.value) == 4
