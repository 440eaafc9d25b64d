"""bert_tf.model_directory: every format bert_tf reads is recognised by its names, and a path is
inside a model directory through the folders a model directory holds."""

import pytest

from bert_tf import model_directory as md
from bert_tf.cli import outputs

FORMATS = [
    (md.RUN, ["checkpoint", "ckpt-3.index", "vocab.txt"], ("checkpoint", "ckpt-3.index")),
    (md.RUN, ["bert_tf_run.json", "bert_config.json"], ("bert_tf_run.json",)),
    (md.SENTENCE_TRANSFORMERS, ["modules.json", "config.json", "model.safetensors"],
     ("modules.json",)),
    (md.KERAS_HUB, ["config.json", "metadata.json", "model.weights.h5"],
     ("config.json", "metadata.json")),
    (md.HUGGINGFACE, ["config.json", "model.safetensors", "vocab.txt"],
     ("config.json", "model.safetensors")),
    (md.HUGGINGFACE, ["config.json", "pytorch_model.bin"], ("config.json", "pytorch_model.bin")),
    (md.SAVED_MODEL, ["saved_model.pb", "variables"], ("saved_model.pb",)),
    (md.LITERT, ["model.tflite", "bert_tf_litert.json"], ("model.tflite",)),
    (md.BERT_TF_MODEL, ["encoder.keras", "bert_config.json", "vocab.txt"], ("encoder.keras",)),
    (md.TF1_CHECKPOINT, ["bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001",
                         "bert_config.json", "vocab.txt"], ("bert_model.ckpt.index",)),
    (md.TF1_CHECKPOINT, ["model.ckpt-best.index", "albert_config.json"],
     ("model.ckpt-best.index",)),
]


@pytest.mark.parametrize("kind,names,telling", FORMATS)
def test_every_format_is_recognised_by_its_names(tmp_path, kind, names, telling):
    for name in names:
        (tmp_path / name).write_text("")
    found = md.recognise(tmp_path)
    assert (found.kind, found.names) == (kind, telling)
    assert str(found) == f"{kind} ({', '.join(telling)})"
    # Refused as an output unless it is the command's own kind.
    with pytest.raises(outputs.OutputError, match=f"^--output_dir={tmp_path} holds {kind} "):
        outputs.check_not_a_model_dir("--output_dir", str(tmp_path))
    outputs.check_not_a_model_dir("--output_dir", str(tmp_path), own=(kind,))


@pytest.mark.parametrize("kind,names,telling", FORMATS)
def test_each_format_alone_is_one_model(tmp_path, kind, names, telling):
    """A run's own models and checkpoints, a sentence-transformers model's Hugging Face files:
    one model each."""
    for name in names + (["pretrainer.keras", "encoder.keras"] if kind == md.RUN else []):
        (tmp_path / name).write_text("")
    assert [(m.kind, m.names) for m in md.models_in(tmp_path)] == [(kind, telling)]
    md.check_one_model(tmp_path, "--init_checkpoint")


@pytest.mark.parametrize("names,kinds,pick", [
    (["ckpt-2.index", "checkpoint", "pretrainer.keras", "config.json", "model.safetensors"],
     [md.RUN, md.HUGGINGFACE], "pretrainer.keras or {d}/model.safetensors"),
    (["encoder.keras", "bert_model.ckpt.index"], [md.BERT_TF_MODEL, md.TF1_CHECKPOINT],
     "encoder.keras or {d}/bert_model.ckpt"),
    (["ckpt-2.index", "bert_model.ckpt.index"], [md.RUN, md.TF1_CHECKPOINT],
     "ckpt-2 or {d}/bert_model.ckpt"),
    (["modules.json", "config.json", "model.safetensors", "saved_model.pb"],
     [md.SENTENCE_TRANSFORMERS, md.SAVED_MODEL], None),
])
def test_models_of_two_formats_in_one_directory_are_refused_naming_both(tmp_path, names, kinds,
                                                                         pick):
    for name in names:
        (tmp_path / name).write_text("")
    found = md.models_in(tmp_path)
    assert [m.kind for m in found] == kinds
    assert md.recognise(tmp_path) == found[0]
    with pytest.raises(md.ModelFileError) as error:
        md.check_one_model(tmp_path, "--model_dir")
    which = f"name the one to read ({tmp_path}/{pick.format(d=tmp_path)}), or " if pick else ""
    assert str(error.value) == (
        f"--model_dir={tmp_path} holds two models, {found[0]} and {found[1]}, and would be read "
        f"as one of them without a word: {which}move one to a directory of its own")


def test_directories_without_a_model_are_not_model_directories(tmp_path):
    assert md.recognise(tmp_path) is None
    for name in ("vocab.txt", "bert_config.json", "config.json", "notes.md", "corpus.txt"):
        (tmp_path / name).write_text("")
    assert md.recognise(tmp_path) is None  # a config and a vocabulary are no weights
    assert md.recognise(tmp_path / "vocab.txt") is None  # a file
    assert md.recognise(tmp_path / "missing") is None


def test_a_path_is_inside_a_model_directory_through_its_folders(tmp_path):
    run = tmp_path / "run"
    (run / "best").mkdir(parents=True)
    (run / "sentence_transformers" / "1_Pooling").mkdir(parents=True)
    (run / "checkpoint").write_text("")
    for path in (run / "vocab.txt", run / "new" / "x.json", run / "best" / "x.json",
                 run / "sentence_transformers" / "1_Pooling" / "config.json"):
        assert md.enclosing(path).path == str(run), path
    other = tmp_path / "projects" / "notes"
    other.mkdir(parents=True)
    assert md.enclosing(other / "vectors.npy") is None
    (run / "analysis").mkdir()  # the user's own folder: not part of the model
    assert md.enclosing(run / "analysis" / "x.json") is None
    with pytest.raises(outputs.OutputError, match=(
            f"^--output_file={run}/best/x.json is inside {run}, which holds a training run "
            r"\(checkpoint\); a command never places an output inside a model directory: "
            "choose another location$")):
        outputs.check_output_files({"--output_file": str(run / "best" / "x.json")}, {})


def test_a_symbolic_link_into_a_model_directory_is_inside_it(tmp_path):
    """--output_file=link.txt, the link naming run/vocab.txt: the output would have replaced
    the link (or, written through it, the run's vocabulary); it is refused as inside the run."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint").write_text("")
    (run / "vocab.txt").write_text("[PAD]\n")
    (tmp_path / "link.txt").symlink_to(run / "vocab.txt")
    (tmp_path / "dirlink").symlink_to(run)
    for path in (tmp_path / "link.txt", tmp_path / "dirlink" / "new.jsonl"):
        with pytest.raises(outputs.OutputError, match=(
                f"^--output_file={path} is inside .*(run|dirlink), which holds a training run "
                r"\(checkpoint\)")):
            outputs.check_output_files({"--output_file": str(path)}, {})
    assert (tmp_path / "link.txt").is_symlink() and (run / "vocab.txt").read_text() == "[PAD]\n"
