"""Bad input outside serving: each case fails before any work, naming the file, line or flag."""

import bz2
import gzip
import os
import random

import numpy as np
import pytest

from bert_tf.jobs import flag_checks
from bert_tf.data.tasks import classifier_data, squad
from bert_tf.data.pretraining import tfrecord_io
from bert_tf.data.pretraining import corpus_reading
from bert_tf.data.pretraining import create_pretraining_data as cpd
from bert_tf.data.tasks.task_errors import DataError
from bert_tf.text import vocab_builder

WORDS = ("the cat sat on a mat while some dogs ran far away from home and then they all "
         "came back late at night to eat").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
OPTIONS = cpd.PretrainingDataOptions(max_seq_length=32, max_predictions_per_seq=5, dupe_factor=2,
                                     documents_per_chunk=4)


def _corpus(num_documents, seed=0):
    rng = random.Random(seed)
    documents = ["\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
                           for _ in range(rng.randint(2, 5)))
                 for _ in range(num_documents)]
    return ("\n\n".join(documents) + "\n").encode("utf-8")


@pytest.fixture
def vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in VOCAB))
    return str(path)


def _create(tmp_path, vocab_file, input_file, name):
    output = str(tmp_path / name)
    cpd.create_pretraining_data(str(input_file), output, vocab_file, options=OPTIONS)
    with open(output, "rb") as f:
        return f.read()


def _outputs(directory):
    return sorted(p for p in os.listdir(directory) if p.endswith(".tfrecord") or
                  p.startswith(".tmp_"))


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress], ids=["gzip", "bzip2"])
def test_compressed_corpus_is_read_by_its_magic_bytes(tmp_path, vocab_file, compress):
    text = _corpus(12)
    (tmp_path / "plain.txt").write_bytes(text)
    # Named .txt: the content, not the name, says it is compressed.
    (tmp_path / "packed.txt").write_bytes(compress(text))
    plain = _create(tmp_path, vocab_file, tmp_path / "plain.txt", "plain.tfrecord")
    packed = _create(tmp_path, vocab_file, tmp_path / "packed.txt", "packed.tfrecord")
    assert len(plain) > 1000
    assert packed == plain


def test_text_that_starts_like_a_magic_number_is_text(tmp_path):
    from bert_tf.text import corpus_files

    (tmp_path / "bzh.txt").write_bytes(b"BZh9 is where the line starts\n")
    assert corpus_files.check_corpus_file(str(tmp_path / "bzh.txt")) == ""


def test_binary_corpus_is_refused_before_any_output(tmp_path, vocab_file):
    # A float32 array dump (1.0 = 00 00 80 3f): half NUL bytes, a quarter undecodable.
    (tmp_path / "weights.bin").write_bytes(b"\x00\x00\x80\x3f" * 2000)
    (tmp_path / "ok.txt").write_bytes(_corpus(4))
    with pytest.raises(ValueError) as error:
        cpd.create_pretraining_data(f"{tmp_path}/ok.txt,{tmp_path}/weights.bin",
                                    str(tmp_path / "out.tfrecord"), vocab_file, options=OPTIONS)
    assert str(error.value) == (
        f"{tmp_path}/weights.bin is binary, not text: 4000 of its first 8000 bytes are NUL or "
        "other control bytes; expected UTF-8 text, one sentence per line (gzip and bzip2 files "
        "are read as such).")
    assert _outputs(tmp_path) == []


def test_mostly_non_utf8_corpus_is_refused(tmp_path, vocab_file):
    # Latin-1 bytes with no ASCII around them: every byte is undecodable.
    (tmp_path / "latin1.txt").write_bytes("éàü".encode("latin-1") * 1000)
    with pytest.raises(ValueError) as error:
        _create(tmp_path, vocab_file, tmp_path / "latin1.txt", "out.tfrecord")
    assert str(error.value) == (
        f"{tmp_path}/latin1.txt is not UTF-8 text: 3000 of its first 3000 bytes cannot be "
        "decoded; expected UTF-8 text, one sentence per line (convert it, e.g. iconv -f latin1 "
        "-t utf-8).")


def test_damaged_gzip_corpus_is_named(tmp_path, vocab_file):
    packed = gzip.compress(_corpus(40))
    (tmp_path / "head.txt.gz").write_bytes(packed[:30])
    with pytest.raises(ValueError) as error:
        _create(tmp_path, vocab_file, tmp_path / "head.txt.gz", "out.tfrecord")
    assert str(error.value) == (
        f"{tmp_path}/head.txt.gz: cannot read it as gzip (Compressed file ended before the "
        "end-of-stream marker was reached); the file is truncated or corrupt.")
    # Cut past the first 64 KiB of text: found while reading, still named, nothing written.
    big = gzip.compress(_corpus(3000))
    (tmp_path / "tail.txt.gz").write_bytes(big[:len(big) * 3 // 4])
    with pytest.raises(ValueError, match=rf"^{tmp_path}/tail.txt.gz: cannot read past line "
                                         r"\d+ \(Compressed file ended before the end-of-stream "
                                         r"marker was reached\); the file is truncated or "
                                         r"corrupt\.$"):
        _create(tmp_path, vocab_file, tmp_path / "tail.txt.gz", "out.tfrecord")
    assert _outputs(tmp_path) == []


def test_text_pipeline_reads_gzip_by_content_and_refuses_binary(tmp_path, vocab_file):
    from bert_tf.data import text_pretraining_dataset

    text = _corpus(8)
    (tmp_path / "packed.txt").write_bytes(gzip.compress(text))
    from bert_tf.data.pretraining.masking_recipe import MaskingRecipe

    kwargs = dict(vocab_file=vocab_file, do_lower_case=True, batch_size=4, is_training=False,
                  seed=3, recipe=MaskingRecipe(max_seq_length=32, max_predictions_per_seq=5))
    batch = next(iter(text_pretraining_dataset(str(tmp_path / "packed.txt"), **kwargs)))
    # Read as text, the gzip bytes would be one [UNK] per line; decompressed, all are words.
    ids = batch["input_word_ids"].numpy()
    assert np.count_nonzero(ids > 4) > 40
    assert np.count_nonzero(ids == VOCAB.index("[UNK]")) == 0
    (tmp_path / "corpus.bz2").write_bytes(bz2.compress(text))
    with pytest.raises(ValueError) as error:
        text_pretraining_dataset(str(tmp_path / "corpus.bz2"), **kwargs)
    assert str(error.value) == (f"{tmp_path}/corpus.bz2 is bzip2-compressed, which the text "
                                "pipeline cannot read; decompress it or recompress it with gzip.")
    (tmp_path / "data.bin").write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(ValueError, match=rf"^{tmp_path}/data.bin is binary, not text: 300 of "
                                         r"its first 300 bytes are NUL or other control"):
        text_pretraining_dataset(str(tmp_path / "data.bin"), **kwargs)


def test_build_vocab_refuses_binary_input(tmp_path):
    (tmp_path / "ok.txt").write_bytes(_corpus(4))
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    with pytest.raises(ValueError) as error:
        vocab_builder.build_vocab(f"{tmp_path}/*", 100, True)
    assert str(error.value) == (
        f"{tmp_path}/image.png is binary, not text: 204 of its first 216 bytes are NUL or other "
        "control bytes; expected UTF-8 text, one sentence per line (gzip and bzip2 files are "
        "read as such).")


class _FullDisk:
    """A file that takes `room` bytes and then fails with ENOSPC, as a full disk does."""

    def __init__(self, path, room):
        self._file = open(path, "wb")
        self._room = room

    def write(self, data):
        if len(data) > self._room:
            raise OSError(28, "No space left on device")
        self._room -= len(data)
        return self._file.write(data)

    def close(self):
        self._file.close()


def test_disk_full_while_writing_records_leaves_no_output(tmp_path, vocab_file, monkeypatch):
    (tmp_path / "corpus.txt").write_bytes(_corpus(12))
    monkeypatch.setattr(tfrecord_io, "_open_for_writing", lambda path: _FullDisk(path, 3000))
    with pytest.raises(OSError) as error:
        cpd.create_pretraining_data(str(tmp_path / "corpus.txt"),
                                    f"{tmp_path}/a.tfrecord,{tmp_path}/b.tfrecord", vocab_file,
                                    options=OPTIONS)
    assert error.value.errno == 28
    assert str(error.value).startswith(f"[Errno 28] cannot write output file {tmp_path}/")
    assert str(error.value).endswith(": No space left on device; no output was kept")
    assert _outputs(tmp_path) == []


def test_disk_full_at_close_leaves_no_output(tmp_path, monkeypatch):
    class FullAtClose(_FullDisk):
        # Buffered records reach the disk only when the file is closed.
        def close(self):
            self._file.close()
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(tfrecord_io, "_open_for_writing", lambda path: FullAtClose(path, 10**6))
    with pytest.raises(OSError, match=rf"^\[Errno 28\] cannot write output file "
                                      rf"{tmp_path}/a\.tfrecord \(via "):
        with tfrecord_io.ShardedRecordWriter([str(tmp_path / "a.tfrecord")]) as writer:
            writer.write(b"record")
    assert _outputs(tmp_path) == []


def _write_table(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return str(path)


def test_empty_label_is_an_error_at_read_time(tmp_path):
    path = _write_table(tmp_path / "train.csv", "text,label\ngood film,pos\nbad film,\n")
    with pytest.raises(DataError) as error:
        classifier_data.read_table_examples(path, text_a_column="text", label_column="label")
    assert str(error.value) == (f"{path}:3 (column 'label'): empty label; every training and "
                                "evaluation row needs one")
    # A test file may leave labels blank: they are unlabelled rows, not a label "".
    examples = classifier_data.read_table_examples(
        path, text_a_column="text", label_column="label", require_labels=False, keep_empty=True)
    assert [e.label for e in examples] == ["pos", None]


def test_latin1_csv_names_the_line(tmp_path):
    path = _write_table(tmp_path / "train.csv", "text,label\ngood,pos\nun café noir,neg\n",
                        encoding="latin-1")
    with pytest.raises(DataError) as error:
        classifier_data.read_table_examples(path, text_a_column="text", label_column="label")
    assert str(error.value) == (f"{path}:3: not UTF-8 (byte 0xe9 at byte 7 of the line); save "
                                "the file as UTF-8 (from Latin-1: iconv -f latin1 -t utf-8)")


def test_unbalanced_quote_names_the_line_where_it_opened(tmp_path):
    path = _write_table(tmp_path / "train.csv", 'text,label\n"multi\nline",pos\ngood,pos\n'
                        '"unclosed,neg\nfine,pos\nlast,neg\n')
    with pytest.raises(DataError) as error:
        classifier_data.read_table_examples(path, text_a_column="text", label_column="label")
    assert str(error.value) == (
        f"{path}:5: a quoted field opened on this line runs to line 7 (an unbalanced '\"'?), "
        "making a row of 1 fields; the header has 2 (text, label)")


def test_train_csv_and_tsv_together_are_ambiguous(tmp_path):
    _write_table(tmp_path / "train.csv", "text,label\na,1\n")
    _write_table(tmp_path / "train.tsv", "text\tlabel\na\t1\n")
    _write_table(tmp_path / "dev.csv", "text,label\na,1\n")
    extensions = (".tsv", ".csv", ".jsonl", ".json")
    with pytest.raises(DataError) as error:
        classifier_data.split_file(str(tmp_path), "train", extensions)
    assert str(error.value) == (f"--data_dir={tmp_path} holds train.tsv and train.csv: ambiguous "
                                "train data; remove all but one or give --train_file")
    assert classifier_data.split_file(str(tmp_path), "dev", extensions) == f"{tmp_path}/dev.csv"


def test_duplicate_squad_question_ids_are_an_error(tmp_path):
    def paragraph(context, *ids):
        return {"context": context, "qas": [
            {"id": qid, "question": "who?", "answers": [{"text": "a", "answer_start": 0}]}
            for qid in ids]}

    data = [{"paragraphs": [paragraph("a b c", "q1", "q2")]},
            {"paragraphs": [paragraph("a d", "q3"), paragraph("a e", "q2")]}]
    with pytest.raises(squad.SquadFormatError) as error:
        squad.check_squad_data(data, "dev.json", False)
    assert str(error.value) == (
        "dev.json: data[1].paragraphs[1].qas[0].id: question id 'q2' is also the id of "
        "data[0].paragraphs[0].qas[1]; question ids must be unique (predictions are keyed by id)")


def test_truncated_tfrecord_is_named_before_training(tmp_path, vocab_file):
    from bert_tf.data import pretraining_dataset

    (tmp_path / "corpus.txt").write_bytes(_corpus(12))
    _create(tmp_path, vocab_file, tmp_path / "corpus.txt", "a.tfrecord")
    records = _create(tmp_path, vocab_file, tmp_path / "corpus.txt", "b.tfrecord")
    count = tfrecord_io.check_record_framing(str(tmp_path / "b.tfrecord"))
    last = _last_record_offset(records)
    # A copy cut short 10 bytes before the end, inside the last record.
    os.truncate(tmp_path / "b.tfrecord", len(records) - 10)
    with pytest.raises(ValueError) as error:
        pretraining_dataset(f"{tmp_path}/*.tfrecord", batch_size=2, max_seq_length=32,
                            max_predictions_per_seq=5)
    assert str(error.value) == (
        f"{tmp_path}/b.tfrecord: truncated TFRecord file: record {count - 1} at byte {last} "
        f"needs {len(records) - last} bytes, but the file ends after {len(records) - last - 10} "
        "(an interrupted write or copy?); re-create it.")
    text = _write_table(tmp_path / "c.tfrecord", "not records at all\n")
    with pytest.raises(ValueError) as error:
        tfrecord_io.check_record_framing(text)
    assert str(error.value) == (f"{text}: not a TFRecord file, or corrupt at byte 0 (record 0): "
                                "the record length's checksum does not match.")


def _last_record_offset(records):
    offset = 0
    while True:
        end = offset + 16 + int.from_bytes(records[offset:offset + 8], "little")
        if end >= len(records):
            return offset
        offset = end


def test_export_dir_that_is_a_file_fails_before_training(tmp_path):
    (tmp_path / "model").write_text("x")
    with pytest.raises(flag_checks.FlagValueError) as error:
        flag_checks.check_export_dir(str(tmp_path / "model"))
    assert str(error.value) == (f"--export_dir={tmp_path}/model is a file; expected a new or "
                                "empty version directory, e.g. EXPORT/1")
    with pytest.raises(flag_checks.FlagValueError) as error:
        flag_checks.check_export_dir(str(tmp_path / "model/1"))
    assert str(error.value) == (f"--export_dir={tmp_path}/model/1 cannot be created: "
                                f"{tmp_path}/model is a file")


def test_latin1_glue_tsv_names_the_line(tmp_path):
    from bert_tf.data.tasks import glue

    _write_table(tmp_path / "train.tsv", "sentence\tlabel\ngood\t1\nun film médiocre\t0\n",
                 encoding="latin-1")
    with pytest.raises(DataError) as error:
        glue.read_glue_tsv(glue.glue_task("sst-2"), str(tmp_path), "train")
    assert str(error.value) == (f"{tmp_path}/train.tsv:3: not UTF-8 (byte 0xe9 at byte 10 of "
                                "the line); save the file as UTF-8 (from Latin-1: iconv -f "
                                "latin1 -t utf-8)")


def test_latin1_conll_file_names_the_line(tmp_path):
    from bert_tf.data.tasks import tagging_data

    path = _write_table(tmp_path / "train.txt", "Paris B-LOC\nest O\n\nZürich B-LOC\n",
                        encoding="latin-1")
    with pytest.raises(DataError) as error:
        tagging_data.read_conll(path)
    assert str(error.value) == (f"{path}:4: not UTF-8 (byte 0xfc at byte 2 of the line); save "
                                "the file as UTF-8 (from Latin-1: iconv -f latin1 -t utf-8)")


def test_export_to_a_file_is_refused_even_with_overwrite(tmp_path):
    from bert_tf import serving
    from bert_tf.config import BertConfig
    from bert_tf.modeling import BertEncoder

    encoder = BertEncoder(BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64,
                                     max_position_embeddings=64))
    (tmp_path / "model").write_text("keep me")
    with pytest.raises(FileExistsError) as error:
        serving.export(encoder, str(tmp_path / "model"), signatures=("ids",), overwrite=True)
    assert str(error.value) == (f"export: {tmp_path}/model is a file; expected a new or empty "
                                "version directory, e.g. EXPORT/1.")
    assert (tmp_path / "model").read_text() == "keep me"


def test_progress_of_compressed_input_counts_the_stored_bytes(tmp_path):
    packed = gzip.compress(_corpus(30))
    (tmp_path / "corpus.txt.gz").write_bytes(packed)
    read = list(corpus_reading.iter_file_documents(str(tmp_path / "corpus.txt.gz")))
    assert len([lines for lines, _ in read if lines]) == 30
    # The ETA divides these by the file sizes: they must add up to the compressed size.
    assert sum(n for _, n in read) == len(packed)


def test_cr_only_and_unbroken_corpora_are_refused_before_any_output(tmp_path, vocab_file):
    """POOR: a CR-only or single-line corpus was read as one line: one instance, and only a
    "truncated" warning."""
    (tmp_path / "mac.txt").write_bytes(_corpus(6).replace(b"\n", b"\r"))
    (tmp_path / "one_line.txt").write_bytes(_corpus(600).replace(b"\n", b" "))
    cases = [
        ("mac.txt", "ends its lines with CR only (\\r); expected one sentence per line ending "
                    "in \\n (convert it, e.g. tr '\\r' '\\n')."),
        ("one_line.txt", "has no line break in its first 64 KiB; expected one sentence per "
                         "line."),
    ]
    # A whole small file on one line, hundreds of words long.
    (tmp_path / "short_one_line.txt").write_bytes(_corpus(60).replace(b"\n", b" "))
    size = len((tmp_path / "short_one_line.txt").read_bytes())
    assert 4096 < size < 65536
    cases.append(("short_one_line.txt", f"is one line of {size} bytes with no line break; "
                                        "expected one sentence per line."))
    assert len((tmp_path / "one_line.txt").read_bytes()) > 65536
    for name, problem in cases:
        with pytest.raises(ValueError) as error:
            cpd.create_pretraining_data(str(tmp_path / name), str(tmp_path / "out.tfrecord"),
                                        vocab_file, options=OPTIONS)
        assert str(error.value) == f"{tmp_path}/{name} {problem}"
        assert _outputs(tmp_path) == []
    # CRLF line breaks are fine.
    (tmp_path / "crlf.txt").write_bytes(_corpus(6).replace(b"\n", b"\r\n"))
    _create(tmp_path, vocab_file, tmp_path / "crlf.txt", "crlf.tfrecord")


def test_export_dir_that_is_a_link_to_nothing_fails_before_training(tmp_path):
    (tmp_path / "gone").symlink_to(tmp_path / "missing")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for name, target in (("gone", tmp_path / "missing"), ("loop", tmp_path / "loop")):
        with pytest.raises(flag_checks.FlagValueError) as error:
            flag_checks.check_export_dir(str(tmp_path / name))
        assert str(error.value) == (
            f"--export_dir={tmp_path / name} is a symbolic link to nothing (a missing target or "
            f"a loop: {target}); expected a new or empty version directory")
    assert sorted(os.listdir(tmp_path)) == ["gone", "loop"]
