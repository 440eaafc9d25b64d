"""LiteRT export (bert_tf.serving.litert): parity with the SavedModel and the Python tokenizer,
the op census, quantization, the command and its bad input.

One float32 conversion of a tiny classifier serves the module (`float_export`); the dynamic int8
one is made by the command-line test.
"""

import json
import os
import subprocess
import threading
import types
import unicodedata

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import serving
from bert_tf.modeling import BertClassifier, BertEncoder, BertSpanLabeler
from bert_tf.serving import litert, litert_export, quantization, write_task_info
from bert_tf.serving.litert_model import LiteRTModel
from bert_tf.text import tokenization
from bert_tf.text.layers import BertTokenizerLayer
from bert_tf.text.sentencepiece import SentencePieceTokenizer, prepare_text
from bert_tf.text.sentencepiece_layer import SentencePieceTokenizerLayer
from bert_tf.text.sentencepiece_trainer import USER_DEFINED_PIECES

import serving_cases as cases
import zygote
from sentencepiece_fixtures import make_sentencepiece_model
from command_batch import run_commands

# One worker runs the module: its module fixtures run once, not once per worker.
pytestmark = pytest.mark.xdist_group("litert")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
           PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
# A sentiment-like toy task the tiny classifier learns in a few steps: the class is which of
# these words the text holds.
CLASS_WORDS = {"negative": "dog", "neutral": "city", "positive": "cat"}


def _toy_rows(count, seed):
    rng = np.random.default_rng(seed)
    filler = "the sat on mat . , big small river flows through paris what where".split()
    rows = []
    for _ in range(count):
        label = rng.choice(cases.CLASS_LABELS)
        words = list(rng.choice(filler, size=rng.integers(2, 12)))
        words.insert(int(rng.integers(0, len(words) + 1)), CLASS_WORDS[label])
        rows.append((" ".join(words), str(label)))
    return rows


@pytest.fixture(scope="module")
def float_export(tmp_path_factory):
    """A briefly trained tiny classifier (sentence pairs), its run directory, a SavedModel
    export and the float32 LiteRT export of it."""
    keras.utils.set_random_seed(3)
    tok = cases.python_tokenizer()
    rows = _toy_rows(96, seed=0)
    features = cases.pack_batch(tok, [tok.encode(t) for t, _ in rows])
    labels = np.array([cases.CLASS_LABELS.index(label) for _, label in rows])
    model = BertClassifier(BertEncoder(cases.tiny_config()), num_classes=3)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(features, labels, batch_size=16, epochs=6, verbose=0)

    root = tmp_path_factory.mktemp("litert")
    run = root / "run"
    run.mkdir()
    model.save(run / "model.keras")
    (run / "vocab.txt").write_text("".join(t + "\n" for t in cases.VOCAB), encoding="utf-8")
    write_task_info(str(run), "classification", do_lower_case=True,
                    max_seq_length=cases.SEQ_LENGTH, labels=cases.CLASS_LABELS, text_pair=True)
    saved_model = serving.export(model, str(root / "saved" / "1"), vocab_file=cases.VOCAB,
                                 max_seq_length=cases.SEQ_LENGTH, labels=cases.CLASS_LABELS,
                                 text_pair=True, signatures=("ids", "text"))
    result = litert_export.export_litert(model, str(root / "float"), vocab_file=cases.VOCAB,
                                         max_seq_length=cases.SEQ_LENGTH,
                                         labels=cases.CLASS_LABELS, text_pair=True)
    return types.SimpleNamespace(model=model, run=str(run), root=root, path=result.path,
                                 census=result.census,
                                 saved_model=tf.saved_model.load(saved_model))


def test_signatures_and_info(float_export):
    model = LiteRTModel(os.path.dirname(float_export.path))
    assert model.signatures == {
        "serving_default": {"inputs": ["input_mask", "input_type_ids", "input_word_ids"],
                            "outputs": ["logits"]},
        "serve_text": {"inputs": ["text", "text_pair"],
                       "outputs": ["label_names", "predicted_label", "probabilities"]}}
    assert model.info["labels"] == cases.CLASS_LABELS
    assert model.info["length_buckets"][-1] == cases.SEQ_LENGTH


def test_op_census_has_only_builtins_and_tf_text(float_export):
    census = litert.op_census(float_export.path)
    assert census.flex == frozenset()
    assert census.custom == {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets"}
    # Two blocks of 6 dense layers each, the pooler and the classifier, in both signatures.
    assert census.counts["FULLY_CONNECTED"] == 2 * (2 * 6 + 2)
    # Attention traced without the per-request small-input branch (portable_attention): one
    # batched softmax per block in each signature (and serve_text's probabilities), no IF
    # subgraphs.
    assert "IF" not in census.counts and census.counts["SOFTMAX"] == 2 * 2 + 1
    assert "FULLY_CONNECTED" in census.format() and "tensorflow-text" in census.format()


def test_ids_signature_matches_saved_model(float_export):
    rng = np.random.default_rng(1)
    model = LiteRTModel(float_export.path)
    for batch, length in ((1, 5), (3, 17), (2, cases.SEQ_LENGTH), (2, 48)):
        ids = rng.integers(5, len(cases.VOCAB), size=(batch, length)).astype(np.int32)
        mask = (np.arange(length)[None, :] < rng.integers(2, length + 1, size=(batch, 1)))
        features = {"input_word_ids": ids, "input_mask": mask.astype(np.int32),
                    "input_type_ids": (np.arange(length)[None, :] >= length // 2)
                    .repeat(batch, 0).astype(np.int32)}
        got = model.predict_ids(**features)["logits"]
        want = float_export.saved_model.signatures["serving_default"](
            **{k: tf.constant(v) for k, v in features.items()})["logits"].numpy()
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_text_signature_matches_saved_model(float_export):
    model = LiteRTModel(float_export.path)
    calls = [(cases.TEXTS, cases.PAIRS), (cases.SHORT_INPUTS["classifier"]["text"],
                                          cases.SHORT_INPUTS["classifier"]["text_pair"]),
             (["Paris is the capital of France."], None)]
    for texts, pairs in calls:
        got = model.predict(texts, pairs)
        want = float_export.saved_model.signatures["serve_text"](
            text=tf.constant(texts), text_pair=tf.constant(pairs or [""] * len(texts)))
        np.testing.assert_allclose(got["probabilities"], want["probabilities"].numpy(),
                                   atol=1e-5, rtol=0)
        assert got["predicted_label"].tolist() == want["predicted_label"].numpy().tolist()
        assert got["label_names"].tolist() == [[n.encode() for n in cases.CLASS_LABELS]] * len(
            texts)


# ----------------------------------------------------------------------------- tokenizer

MULTILINGUAL = [
    "北京大学的学生在图书馆里学习中文和数学。", "東京タワーは333メートルの高さです。",
    "서울의 봄은 아름답습니다.", "Ünïcödé café naïve résumé façade Ångström Øresund",
    "Der Straßenbahnfahrer grüßte die Fußgänger höflich.", "¿Dónde está la biblioteca? ¡Allí!",
    "Привет, как дела? Всё хорошо.", "Η γλώσσα είναι ελληνική και όμορφη.",
    "I love this movie 😀👍🏽 so much ❤️ #best", "Emoji only: 🙂🙃😉🇩🇪🇫🇷",
    "pneumonoultramicroscopicsilicovolcanoconiosis and supercalifragilisticexpialidocious",
    "Antidisestablishmentarianism is a long word; so is Donaudampfschifffahrtsgesellschaft.",
    "https://example.com/a/very/long/path?query=string&another=value#fragment",
    "C'est l'été à Montréal — il fait 30 °C.", "नमस्ते दुनिया", "مرحبا بالعالم",
    "Tiếng Việt có dấu: Hà Nội, Sài Gòn.", "Ça coûte 12,50 € ou £10 — “quotes” and ‘single’.",
    "tab\tseparated\nand new lines  with  double spaces", "ÀÉÎÕÜ àéîõü ÇÑ çñ",
]


def _real_texts():
    """About 3000 real texts: the lines of Python's reference manual (stdlib pydoc_data, with
    code, punctuation, quotes and a few non-ASCII characters) and multilingual sentences."""
    from pydoc_data.topics import topics

    lines = [line.strip() for topic in sorted(topics) for line in topics[topic].splitlines()]
    lines = [line for line in lines if len(line) > 20]
    return lines[:2950] + MULTILINGUAL * 3


def _vocab_for(texts, do_lower_case):
    """A vocabulary over the texts' characters (as words and "##" pieces) and frequent words,
    leaving some characters out so that [UNK] occurs."""
    words = [w for t in texts for w in tokenization.basic_tokenize(t, do_lower_case)]
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    chars = sorted({c for w in counts for c in w})
    tokens = list(tokenization.SPECIAL_TOKENS)
    tokens += [c for i, c in enumerate(chars) if i % 17]  # Some characters are [UNK].
    tokens += ["##" + c for c in chars]
    tokens += sorted(w for w, n in counts.items() if n >= 3 and len(w) > 1)
    tokens += sorted({"##" + w[1:4] for w in counts if len(w) > 4})
    return list(dict.fromkeys(tokens))


def _documented_difference(text, do_lower_case):
    """Whether `text` holds a character where TF Text's normaliser is documented to differ
    from the Python tokenizer (bert_tf.serving.litert's docstring)."""
    for char in text:
        if unicodedata.category(char) == "Cf":
            return True
        if do_lower_case and (unicodedata.normalize("NFKD", char)
                              != unicodedata.normalize("NFD", char)
                              or char.casefold() != char.lower() or char == "Σ"):
            return True
    return False


def _converted(tokenizer):
    """A LiteRT tokenizer (tf.string [B] -> flat ids, starts, lengths) converted alone: its
    signature runner (text -> ids, lengths) and `OpCensus`."""
    def tokenize(inputs):
        flat, _, lengths = tokenizer(inputs["text"])
        return {"ids": flat, "lengths": lengths}

    content, census = litert.convert_functions({"serving_default": tf.function(
        tokenize, input_signature=[{"text": tf.TensorSpec([None], tf.string, name="text")}])})
    return litert.interpreter(content).get_signature_runner(), census


@pytest.mark.parametrize("do_lower_case", [True, False], ids=["uncased", "cased"])
def test_in_model_tokenizer_matches_python_on_real_texts(do_lower_case):
    texts = _real_texts()
    vocab = _vocab_for(texts, do_lower_case)
    python = tokenization.WordpieceTokenizer(vocab, do_lower_case=do_lower_case)
    runner, census = _converted(litert.LiteRTTokenizer(
        BertTokenizerLayer(vocab, do_lower_case=do_lower_case)))
    assert census.flex == frozenset()
    out = runner(text=np.array([t.encode() for t in texts], dtype=object))
    rows = np.split(out["ids"], np.cumsum(out["lengths"])[:-1])
    checked = [i for i, t in enumerate(texts) if not _documented_difference(t, do_lower_case)]
    assert len(checked) >= 0.97 * len(texts)  # The exceptions are rare in real text.
    mismatches = [texts[i] for i in checked if rows[i].tolist() != python.encode(texts[i])]
    assert mismatches == []
    assert sum(out["lengths"]) > 40_000
    assert any(tokenization.is_cjk_char(ord(c)) for t in texts for c in t)
    unk = python.vocab["[UNK]"]
    assert 0 < sum(r.tolist().count(unk) for r in rows) < 0.1 * sum(out["lengths"])


@pytest.mark.parametrize("do_lower_case,symbols", [
    (True, ()), (False, ()), (True, USER_DEFINED_PIECES)],
    ids=["uncased", "cased", "albert_user_defined"])
def test_in_model_sentencepiece_tokenizer_matches_python(do_lower_case, symbols):
    """ALBERT's tokenization in LiteRT (bert_tf.text.sentencepiece_prepared and builtin ops):
    the Python SentencePieceTokenizer's ids on real texts, special pieces written in the text,
    digits before commas and empty texts; also with ALBERT's user-defined pieces, which
    bert-tf-build-vocab's models have."""
    model_proto = make_sentencepiece_model(user_defined_symbols=symbols)
    python = SentencePieceTokenizer(model_proto, do_lower_case)
    runner, census = _converted(litert.LiteRTSentencePieceTokenizer(
        SentencePieceTokenizerLayer(model_proto, do_lower_case=do_lower_case)))
    assert census.custom == {"TFText>FastSentencepieceTokenize"} and not census.flex
    texts = _real_texts() + [
        "The cat [MASK] on the[SEP]mat", "[MASK][MASK] [CLS]x[SEP] <pad>", " [MASK] ", "",
        "In 1990, 2,000,000 (1,000) and 3,[MASK]", "``Quoted'' ﬁne ＦＵＬＬ", "[mask] x",
        "<unk> x<unk>y <unk><unk>", "x\U0010f000y \U0010fffd", "<PAD> x [MÁSK] ＜pad＞"]
    out = runner(text=np.array([t.encode() for t in texts], dtype=object))
    rows = np.split(out["ids"][:sum(out["lengths"])], np.cumsum(out["lengths"])[:-1])
    assert [t for t, row in zip(texts, rows) if row.tolist() != python.encode(t)] == []
    # The digit-comma cut happened: SentencePiece alone segments about 30 of them otherwise.
    segmented = python.processor.encode([prepare_text(t, do_lower_case) for t in texts])
    assert sum(row.tolist() != ids for row, ids in zip(rows, segmented)) > 25
    empty = runner(text=np.array([b"", b" "], dtype=object))
    assert empty["lengths"].tolist() == [0, 0]


# ----------------------------------------------------------------------------- bad input

def test_heads_litert_cannot_express_name_the_alternative():
    model = BertSpanLabeler(BertEncoder(cases.tiny_config()))
    with pytest.raises(litert.LiteRTUnsupportedError,
                       match=r"serve_text of a squad model \(BertSpanLabeler\) cannot be "
                             r"expressed in LiteRT .* export --signatures=ids for LiteRT"):
        litert.plan_litert(model, vocab_file=cases.VOCAB, signatures=("ids", "text"))
    with pytest.raises(litert.LiteRTUnsupportedError, match="serve_examples"):
        litert.plan_litert(model, vocab_file=cases.VOCAB, signatures=("ids", "examples"))
    plan = litert.plan_litert(model, signatures=("ids",))
    assert plan.signatures == ("serving_default",)


def test_flex_ops_are_refused_and_nothing_is_written(tmp_path):
    def as_text(inputs):
        return {"text": tf.strings.as_string(inputs["input_word_ids"])}

    function = tf.function(as_text, input_signature=[
        {"input_word_ids": tf.TensorSpec([None, None], tf.int32, name="input_word_ids")}])
    with pytest.raises(litert.FlexOpsError,
                       match=r"the model needs ops that LiteRT's builtins and TensorFlow Text's "
                             r"kernels lack: AsString \(they would fall back to the select-TF "
                             r"'Flex' runtime\); no model was written."):
        litert.convert_functions({"serving_default": function})


def test_quantization_modes_and_calibration_files(tmp_path):
    with pytest.raises(ValueError, match=r"--quantize=int4: unknown quantization mode; choose "
                                         r"one of none, float16, dynamic_int8, full_int8, int8."):
        quantization.check_mode("int4")
    assert quantization.resolve_mode("int8") == quantization.INT8_CHOICE
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n")
    with pytest.raises(quantization.CalibrationError,
                       match=rf"--calibration_file={empty}: no usable rows"):
        quantization.read_rows(str(empty))
    wrong = tmp_path / "wrong.tsv"
    wrong.write_text("id\tlabel\n1\t0\n")
    with pytest.raises(quantization.CalibrationError,
                       match=r"line 2 has none of the text columns sentence, text"):
        quantization.read_rows(str(wrong))
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("sentence\tlabel\nthe cat sat\tpositive\n\tneutral\nbig dog\tnegative\n")
    assert quantization.read_rows(str(tsv)) == [("the cat sat", None, "positive"),
                                                ("big dog", None, "negative")]
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text('{"text": "a", "text_pair": "b"}\n\n{"text": "c"}\n')
    assert quantization.calibration_rows(str(jsonl)) == [("a", "b"), ("c", None)]


def _export_command(*flags):
    return subprocess.run([zygote.shared_python(), "-m", "bert_tf.cli.export_saved_model", *flags],
                          capture_output=True, text=True, env=ENV, cwd=REPO)


def test_command_bad_input_fails_before_writing(float_export, tmp_path):
    target = tmp_path / "out"
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    # Both refusals in one process (one TensorFlow start-up); each run starts from the
    # command's defaults.
    unknown, no_rows = run_commands([
        ("bert_tf.cli.export_saved_model", [f"--model_dir={float_export.run}",
                                            f"--export_dir={target}", "--format=litert",
                                            "--quantize=int3"]),
        ("bert_tf.cli.export_saved_model", [f"--model_dir={float_export.run}",
                                            f"--export_dir={target}", "--format=litert",
                                            "--quantize=full_int8",
                                            f"--calibration_file={empty}"])], env=ENV)
    assert unknown.returncode != 0
    assert ("--quantize=int3: unknown quantization mode; choose one of none, float16, "
            "dynamic_int8, full_int8, int8.") in unknown.stderr
    assert no_rows.returncode != 0
    assert f"--calibration_file={empty}: no usable rows" in no_rows.stderr
    assert not target.exists()


# ----------------------------------------------------------------------------- int8

def test_command_exports_int8_with_accuracy_report(float_export, tmp_path):
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\n" + "".join(f"{t}\t{label}\n"
                                                 for t, label in _toy_rows(60, seed=5)))
    target = tmp_path / "int8"
    result = _export_command(f"--model_dir={float_export.run}", f"--export_dir={target}",
                             "--format=litert", "--quantize=int8", f"--eval_file={dev}",
                             "--signatures=ids,text")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"{target}/model.tflite ({quantization.INT8_CHOICE}" in result.stdout
    info = json.loads((target / litert.INFO_FILE).read_text())
    accuracy = info["accuracy_vs_float32"]
    assert accuracy["rows"] == 60
    # A quantized model that answers as the float one does on the toy task.
    assert accuracy["agreement"] >= 0.9
    assert accuracy["metric"]["float32 accuracy"] > 0.6  # Above chance (1/3): trained.
    assert abs(accuracy["metric"][f"{quantization.INT8_CHOICE} accuracy"]
               - accuracy["metric"]["float32 accuracy"]) <= 0.1
    assert "label agreement with float32" in result.stdout
    model = LiteRTModel(target)
    assert model.info["quantize"] == "int8"
    answer = model.predict(["the cat sat on the mat ."], ["where is the cat ?"])
    assert answer["probabilities"].shape == (1, 3)
    census = litert.op_census(target / litert.MODEL_FILE)
    assert census.flex == frozenset()
    assert accuracy["sizes"][quantization.INT8_CHOICE] < accuracy["sizes"]["float32"]


def test_full_int8_answers_as_float32(float_export, tmp_path):
    """Activations in int8 too, calibrated on padded rows: attention masks padding with
    `PORTABLE_MASKED_LOGIT` in LiteRT graphs, so the logits keep their int8 range (with
    BERT's -10000 there, the fine-tuned MiniLM classifier answered at chance)."""
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("".join(f"{t}\n" for t, _ in _toy_rows(100, seed=7)))
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\n" + "".join(f"{t}\t{label}\n"
                                                 for t, label in _toy_rows(60, seed=5)))
    result = litert_export.export_litert(
        float_export.model, str(tmp_path / "full"), quantize="full_int8",
        calibration_file=str(calibration), eval_file=str(dev), vocab_file=cases.VOCAB,
        max_seq_length=cases.SEQ_LENGTH, labels=cases.CLASS_LABELS, signatures=("ids", "text"))
    report = result.report
    assert report.rows == 60 and report.agreement >= 0.95, report.format()
    assert report.metric["full_int8 accuracy"] >= report.metric["float32 accuracy"] - 0.05
    assert result.census.flex == frozenset()


def test_one_model_answers_threads_one_call_at_a_time(float_export):
    """Web servers call from several threads; a LiteRT interpreter entered by two at once
    crashes the process (segfault), so LiteRTModel serialises its calls."""
    model = LiteRTModel(float_export.path)
    texts = cases.TEXTS + cases.SHORT_INPUTS["classifier"]["text"]
    want = {t: model.predict([t])["probabilities"] for t in texts}
    ids = np.full((1, 9), 5, np.int32)
    want_ids = model.predict_ids(ids, np.ones_like(ids), np.zeros_like(ids))["logits"]
    wrong = []

    def work(k):
        for i in range(12):
            text = texts[(i + k) % len(texts)]
            try:
                if not np.allclose(model.predict([text])["probabilities"], want[text],
                                   atol=1e-6):
                    wrong.append(text)
                if not np.allclose(model.predict_ids(ids, np.ones_like(ids),
                                                     np.zeros_like(ids))["logits"],
                                   want_ids, atol=1e-6):
                    wrong.append("ids")
            except RuntimeError as e:  # what an interpreter entered twice raises, when it
                wrong.append(str(e))   # does not crash

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_a_multi_label_int8_export_compares_label_sets(tmp_path):
    """A multi-label classifier's LiteRT text signature gives sigmoid probabilities and the
    labels above 0.5 (bool), as the SavedModel does; an int8 export compares the predicted
    label sets with float32's and scores both on the eval file's label sets (micro F1, exact
    match), its names joined by the run's separator or given as a JSON list; a name the model
    lacks is refused before anything is written."""
    from bert_tf.metrics import multi_label_metrics

    keras.utils.set_random_seed(5)
    model = BertClassifier(BertEncoder(cases.tiny_config()), num_classes=3, multi_label=True)
    rows = _toy_rows(20, seed=7)
    rng = np.random.default_rng(3)
    sets = [[name for name in cases.CLASS_LABELS if rng.random() < 0.4] for _ in rows]
    dev = tmp_path / "dev.tsv"
    dev.write_text("sentence\tlabel\n" + "".join(
        f"{t}\t{'|'.join(names)}\n" for (t, _), names in zip(rows, sets)))
    options = dict(vocab_file=cases.VOCAB, max_seq_length=cases.SEQ_LENGTH,
                   labels=cases.CLASS_LABELS, quantize="dynamic_int8")
    result = litert_export.export_litert(model, str(tmp_path / "int8"), eval_file=str(dev),
                                         label_separator="|", **options)
    report = result.report
    assert report.rows == 20 and 0.5 <= report.agreement <= 1.0
    texts = [t for t, _ in rows]
    gold = np.array([[name in names for name in cases.CLASS_LABELS] for names in sets])
    int8 = multi_label_metrics(gold, LiteRTModel(result.path).predict(texts)["predicted"])
    assert set(report.metric) == {"float32 micro_f1", "float32 exact_match",
                                  "dynamic_int8 micro_f1", "dynamic_int8 exact_match"}
    assert report.metric["dynamic_int8 micro_f1"] == pytest.approx(int8["micro_f1"], abs=1e-12)
    assert report.metric["dynamic_int8 exact_match"] == pytest.approx(int8["exact_match"],
                                                                      abs=1e-12)
    assert "dynamic_int8 micro_f1" in result.format()
    # The same sets as JSON lists need no separator; their key is --label_column.
    jsonl = tmp_path / "dev.jsonl"
    jsonl.write_text("".join(json.dumps({"sentence": t, "topics": names}) + "\n"
                             for (t, _), names in zip(rows, sets)))
    listed = litert_export.export_litert(model, str(tmp_path / "int8_jsonl"),
                                         eval_file=str(jsonl), label_column="topics",
                                         **options)
    assert listed.report.metric == report.metric
    # Without it no row has a label: refused (the report would compare answers only).
    with pytest.raises(quantization.CalibrationError) as error:
        litert_export.export_litert(model, str(tmp_path / "unlabelled"), eval_file=str(jsonl),
                                    **options)
    assert str(error.value) == (
        f"--eval_file={jsonl}: no row has a 'label' label; name the label column with "
        "--label_column (texts without labels go in --calibration_file, which the report "
        "compares on)")
    assert not (tmp_path / "unlabelled").exists()
    # Read with the default "," the cells name "negative|positive": refused, nothing written.
    with pytest.raises(quantization.CalibrationError, match=(
            r"--eval_file=.*dev.tsv: row \d+ names label '[a-z]+\|[a-z|]+', not one of the "
            r"model's negative, neutral, positive \(names joined by ',': the run's "
            r"--label_separator as its task_info.json records it, else ','; a .jsonl row may "
            r"list the names instead\)")):
        litert_export.export_litert(model, str(tmp_path / "refused"), eval_file=str(dev),
                                    **options)
    assert not (tmp_path / "refused").exists()
    served = serving.export(model, str(tmp_path / "saved" / "1"), vocab_file=cases.VOCAB,
                            max_seq_length=cases.SEQ_LENGTH, labels=cases.CLASS_LABELS,
                            signatures=("text",))
    everything = tf.saved_model.load(served).signatures["serve_text"](text=tf.constant(texts))
    # float32's scores are the SavedModel's (float32 too) but for a logit at 0's rounding.
    float32 = multi_label_metrics(gold, everything["predicted"].numpy())
    assert report.metric["float32 micro_f1"] == pytest.approx(float32["micro_f1"], abs=0.05)
    assert report.metric["float32 exact_match"] == pytest.approx(float32["exact_match"],
                                                                 abs=0.05)
    texts = texts[:4]
    expected = {k: v[:4] for k, v in everything.items()}
    light = LiteRTModel(result.path).predict(texts)
    np.testing.assert_allclose(light["probabilities"], expected["probabilities"].numpy(),
                               atol=0.05)
    assert light["predicted"].dtype == bool and light["predicted"].shape == (4, 3)
    assert [n.decode() for n in light["label_names"][0]] == list(cases.CLASS_LABELS)
