"""Runs every shell and Python example of README.md and docs/*.md, so the docs cannot rot.

Each fenced block is tagged (bash, python, json or text). Every bash and python block needs a
recipe in RECIPES, keyed by its page and its anchor (the first line that is not blank or a
comment), so a new example fails the test until someone says how to run it. A page's blocks run
in order as one bash script in one directory (a page's commands chain: vocab -> records ->
pre-training), with only the recipe's declared changes:
- placeholders ($BERT_BASE_DIR, $GLUE_DIR, vocab.txt, corpus/ ...) name tiny fixture files;
- /tmp/ paths move into the test's directory (also inside the official_configs flagfiles);
- tiny shapes by APPENDED flags (absl: the later flag wins), see TINY_FLAGS;
- `subs`: literal replacements, each of which must still match the block;
- what cannot run here (docker, Dataflow, gs://, a second host) runs the closest local
  equivalent, said in the recipe's `why`.
Python blocks run as scripts (`before` defines what the snippet leaves to the reader, `after`
checks the snippet's claims).
"""

import glob
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THIS = "tests/docs/test_doc_examples.py"
PAGES = ["README.md"] + sorted(os.path.relpath(p, REPO)
                               for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
LANGS = ("bash", "python", "json", "text")


@dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str

    @property
    def anchor(self):
        for line in self.text.split("\n"):
            if line.strip() and not line.strip().startswith("#"):
                return line.strip()
        return ""

    def where(self):
        return f"{self.page}:{self.line}"


def extract_blocks(page):
    lines = open(os.path.join(REPO, page), encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^\s*```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        blocks.append(Block(page, i + 1, m.group(1), "\n".join(lines[i + 1:j])))
        i = j + 1
    return blocks


@dataclass
class Recipe:
    """How one block runs. subs: (old, new) literal replacements (each must match); append:
    {command: flags} added to that command's invocations after TINY_FLAGS; before/after:
    Python run around a python block; replace_with: a script run INSTEAD of the block (why says
    why); why: what is substituted and why."""
    subs: list = field(default_factory=list)
    append: dict = field(default_factory=dict)
    before: str = ""
    after: str = ""
    replace_with: str = ""
    why: str = ""


@dataclass
class Page:
    """setup: bash run before the page's blocks; links: fixture names linked into the page's
    directory; check: bash run after them; recipes: {anchor: Recipe}."""
    recipes: dict
    setup: str = ""
    links: tuple = ()
    check: str = ""


# Commands and the flags that make their runs tiny, appended to every invocation.
COMMANDS = {
    "pretrain": ("bert_tf.run_pretraining", "bert-tf-pretrain", "bert_tf_pretrain"),
    "classify": ("bert_tf.run_classifier", "bert-tf-classify"),
    "tag": ("bert_tf.run_tagging", "bert-tf-tag"),
    "squad": ("bert_tf.run_squad", "bert-tf-squad"),
    "create_data": ("bert_tf.cli.create_pretraining_data", "bert-tf-create-pretraining-data"),
    "build_vocab": ("bert_tf.cli.build_vocab", "bert-tf-build-vocab"),
    "demo_data": ("bert_tf.cli.prepare_demo_data", "bert-tf-prepare-demo-data"),
    "extract": ("bert_tf.cli.extract_features", "bert-tf-extract-features"),
    "export": ("bert_tf.cli.export_saved_model", "bert-tf-export"),
    "convert": ("bert_tf.cli.convert_checkpoint", "bert-tf-convert-checkpoint"),
}
_FINETUNE = "--max_seq_length=32 --train_batch_size=2 --eval_batch_size=2 --predict_batch_size=2"
TINY_FLAGS = {
    "pretrain": "--num_train_steps=2 --num_warmup_steps=1 --train_batch_size=2 "
                "--eval_batch_size=2 --max_eval_steps=1 --steps_per_loop=1 "
                "--save_checkpoints_steps=2",
    "classify": _FINETUNE + " --num_train_epochs=1",
    "tag": _FINETUNE + " --num_train_epochs=1",
    "squad": "--max_seq_length=64 --doc_stride=16 --max_query_length=16 --train_batch_size=2 "
             "--predict_batch_size=2 --num_train_epochs=1",
    "create_data": "--num_workers=1 --dupe_factor=1",
    "build_vocab": "--vocab_size=600",
    "demo_data": "--dupe_factor=1 --num_workers=1 --vocab_size=1000",
    "extract": "--max_seq_length=32",
    "export": "",
    "convert": "",
}


def command_of(segment):
    """The COMMANDS key a shell command runs, else None."""
    words = shlex.split(segment, comments=True)
    if words[:2] == ["python", "-m"] and len(words) > 2:
        name = words[2]
    elif words:
        name = words[0]
    else:
        return None
    for key, names in COMMANDS.items():
        if name in names:
            return key
    return None


def _strip_comment(line):
    """(code, comment) of one shell line; a # inside quotes is not a comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i:]
    return line, ""


def shrink_shell(text, append):
    """The block as logical lines, with TINY_FLAGS and the recipe's flags appended to every
    bert_tf command (also inside `a && b` chains)."""
    out, pending = [], ""
    for line in text.split("\n"):
        code, _ = _strip_comment(line)
        if code.endswith("\\"):
            pending += code[:-1] + " "
            continue
        logical, pending = pending + code, ""
        segments = []
        for segment in logical.split(" && "):
            key = command_of(segment)
            extra = " ".join(f for f in (TINY_FLAGS.get(key, ""), append.get(key, "")) if f)
            segments.append(segment.rstrip() + (" " + extra if key and extra else ""))
        out.append(" && ".join(segments))
    return "\n".join(out)


def apply_subs(block, subs):
    text = block.text
    for old, new in subs:
        assert old in text, (f"{block.where()}: the recipe's substitution {old!r} no longer "
                             f"matches the example; update the recipe in {THIS}")
        text = text.replace(old, new)
    return text


def recipe_of(block):
    page = RECIPES.get(block.page)
    recipe = page.recipes.get(block.anchor) if page else None
    if recipe is None:
        pytest.fail(f"{block.where()}: example not run by {THIS}; add a recipe "
                    f"(anchor {block.anchor!r})")
    return recipe


def page_script(page, blocks, work):
    """The bash script that runs a page's bash and python blocks in order."""
    spec = RECIPES[page]
    parts = ["set -euo pipefail", f"cd {shlex.quote(str(work))}"]
    for name in spec.links:
        parts.append(f"ln -s \"$FIXTURES/{name}\" {name}")
    if spec.setup:
        parts.append(spec.setup)
    for block in blocks:
        if block.lang not in ("bash", "python"):
            continue
        recipe = recipe_of(block)
        parts.append(f"echo '>>> {block.where()}'")
        text = apply_subs(block, recipe.subs).replace("/tmp/", f"{work}/tmp/")
        if recipe.replace_with:
            body = recipe.replace_with
        elif block.lang == "bash":
            body = shrink_shell(text, recipe.append)
        else:
            body = None
        if block.lang == "python" and not recipe.replace_with:
            script = work / f"_example_{block.line}.py"
            script.write_text("\n".join((recipe.before, text, recipe.after)) + "\n")
            body = f"python {script.name}"
        parts.append(body)
    if spec.check:
        parts.append(spec.check)
    return "\n".join(parts) + "\n"


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_tagged(page):
    untagged = [b.where() for b in extract_blocks(page) if b.lang not in LANGS]
    assert not untagged, (f"fenced blocks without a language (one of {', '.join(LANGS)}): "
                          f"{', '.join(untagged)}")


@pytest.mark.parametrize("page", PAGES)
def test_every_example_has_a_recipe(page):
    for block in extract_blocks(page):
        if block.lang in ("bash", "python"):
            recipe_of(block)


def test_no_recipe_is_left_over():
    """A recipe whose example was rewritten (its anchor changed) is dead weight: say so."""
    for page, spec in RECIPES.items():
        anchors = {b.anchor for b in extract_blocks(page)}
        stale = set(spec.recipes) - anchors
        assert not stale, f"{page}: recipes for examples that no longer exist: {sorted(stale)}"


# ---------------------------------------------------------------------------------------------
# Fixtures: tiny stand-ins for what the examples name, made once per test process.

VOCAB_WORDS = "hello world cat mat sat on the a question passage".split()
CORPUS = [
    ["The cat sat on the mat.", "It was a warm day in Paris.", "The dog barked at the moon."],
    ["Marie Curie was born in Warsaw in 1867.", "She moved to Paris to study.",
     "She won two prizes."],
    ["Prices rose in the spring.", "The team won the game.", "It rained all week."],
    ["He said yes.", "He answered yes.", "There was rain.", "The sky is blue."],
]
SQUAD_CONTEXT = "Marie Curie was born in Warsaw in 1867. She moved to Paris to study."


def _squad(version_2):
    qas = [{"id": "q1", "question": "Where was Marie Curie born?",
            "answers": [{"text": "Warsaw", "answer_start": SQUAD_CONTEXT.index("Warsaw")}]},
           {"id": "q2", "question": "Where did she move?",
            "answers": [{"text": "Paris", "answer_start": SQUAD_CONTEXT.index("Paris")}]}]
    if version_2:
        for qa in qas:
            qa["is_impossible"] = False
        qas.append({"id": "q3", "question": "Where did the dog bark?", "answers": [],
                    "plausible_answers": [], "is_impossible": True})
    return {"version": "v2.0" if version_2 else "1.1",
            "data": [{"title": "Curie", "paragraphs": [{"context": SQUAD_CONTEXT, "qas": qas}]}]}


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def make_fixtures(root):
    """Files the examples name, tiny: corpus/, vocab.txt, data/ records, BERT_BASE_DIR, GLUE /
    CSV / CoNLL / SQuAD sets, input.txt. Returns the environment variables that name them."""
    import bert_tf
    from bert_tf import interop
    from bert_tf.data.create_pretraining_data import (PretrainingDataOptions,
                                                      create_pretraining_data)
    from bert_tf.text.tokenization import basic_tokenize

    j = os.path.join
    for i, doc in enumerate(CORPUS):
        _write(j(root, "corpus", f"part-{i % 2}.txt"), "")
    for i in range(2):
        docs = [d for k, d in enumerate(CORPUS) if k % 2 == i] * 3
        _write(j(root, "corpus", f"part-{i}.txt"), "\n\n".join("\n".join(d) for d in docs) + "\n")
    mrpc_header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    _write(j(root, "glue", "MRPC", "train.tsv"), mrpc_header + "1\t11\t12\tHe said yes .\t"
           "He answered yes .\n0\t13\t14\tPrices rose .\tThe team won .\n")
    _write(j(root, "glue", "MRPC", "dev.tsv"), mrpc_header + "1\t15\t16\tIt rained .\t"
           "There was rain .\n0\t17\t18\tThe sky is blue .\tThe cat sat .\n")
    _write(j(root, "glue", "MRPC", "test.tsv"), "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
           "0\t19\t20\tA cat sat .\tA cat sat on the mat .\n")
    for name in ("train", "dev", "test"):
        _write(j(root, "reviews", f"{name}.csv"),
               "review,stars\nThe cat sat on the mat.,5\nIt rained all week.,1\n"
               "The team won the game.,4\n")
        _write(j(root, "my_data", f"{name}.csv"),
               "text,label\nThe team won the game.,pos\nIt rained all week.,neg\n"
               "The sky is blue.,pos\n")
        _write(j(root, "pairs", f"{name}.csv"),
               "text,text_pair,label\nThe cat sat on the mat.,Where is the cat?,neutral\n"
               "Prices rose.,The team won.,negative\nHe said yes.,He answered yes.,positive\n")
    conll = ("-DOCSTART- -X- -X- O\n\nMarie NNP B-NP B-PER\nCurie NNP I-NP I-PER\n"
             "was VBD B-VP O\nborn VBN I-VP O\nin IN B-PP O\nWarsaw NNP B-NP B-LOC\n. . O O\n\n"
             "She PRP B-NP O\nmoved VBD B-VP O\nto TO B-PP O\nParis NNP B-NP B-LOC\n. . O O\n")
    for name in ("train", "dev", "test"):
        _write(j(root, "conll", f"{name}.txt"), conll)
    for version_2, names in ((False, ("train-v1.1", "dev-v1.1")),
                             (True, ("train-v2.0", "dev-v2.0"))):
        for name in names:
            _write(j(root, "squad", f"{name}.json"), json.dumps(_squad(version_2)))
    _write(j(root, "input.txt"), "The cat sat on the mat.\nHe said yes. ||| He answered yes.\n")

    # A whole-word vocabulary of every fixture text, cased and lower-cased.
    texts = [open(p, encoding="utf-8").read()
             for p in glob.glob(j(root, "**", "*.*"), recursive=True)]
    words = set(VOCAB_WORDS)
    for text in texts:
        for lower in (True, False):
            words.update(basic_tokenize(text, do_lower_case=lower))
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = specials + sorted(w for w in words if w not in specials and "[" not in w)
    _write(j(root, "vocab.txt"), "\n".join(vocab) + "\n")

    # An original-format (TF1) checkpoint of a tiny BERT, as BERT_BASE_DIR would hold.
    config = bert_tf.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=64,
                                max_position_embeddings=128)
    base = j(root, "bert_base")
    os.makedirs(base)
    config.to_json_file(j(base, "bert_config.json"))
    _write(j(root, "bert_tiny.json"), open(j(base, "bert_config.json")).read())
    pretrainer = bert_tf.BertPretrainer(bert_tf.BertEncoder(config))
    interop.save_tf1_checkpoint(pretrainer, j(base, "bert_model.ckpt"),
                                vocab_file=j(root, "vocab.txt"))

    options = PretrainingDataOptions(max_seq_length=128, max_predictions_per_seq=20,
                                     dupe_factor=1, random_seed=1)
    create_pretraining_data(j(root, "corpus", "*.txt"),
                            [j(root, "data", "train-0.tfrecord"),
                             j(root, "data", "train-1.tfrecord")],
                            j(root, "vocab.txt"), do_lower_case=True, options=options,
                            num_workers=1)
    return {"FIXTURES": root, "BERT_BASE_DIR": base, "BERT_CASED_DIR": base,
            "GLUE_DIR": j(root, "glue"), "CONLL_DIR": j(root, "conll"),
            "SQUAD_DIR": j(root, "squad"), "TINY_CONFIG": j(root, "bert_tiny.json")}


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory):
    return make_fixtures(str(tmp_path_factory.mktemp("doc_fixtures")))


def _copy_official_configs(work):
    """official_configs/ in the page's directory, its /tmp/ paths moved under work/tmp/."""
    for path in glob.glob(os.path.join(REPO, "official_configs", "**", "*"), recursive=True):
        if os.path.isfile(path):
            rel = os.path.relpath(path, REPO)
            text = open(path, encoding="utf-8").read().replace("/tmp/", f"{work}/tmp/")
            _write(os.path.join(work, rel), text)


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if any(
    b.lang in ("bash", "python") for b in extract_blocks(p))])
def test_page_examples_run(page, fixtures, tmp_path):
    blocks = extract_blocks(page)
    for block in blocks:
        if block.lang in ("bash", "python"):
            recipe_of(block)
    work = tmp_path / "work"
    (work / "tmp").mkdir(parents=True)
    _copy_official_configs(str(work))
    script = page_script(page, blocks, work)
    (work / "_page.sh").write_text(script)
    env = dict(os.environ, **fixtures, REPO=REPO, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONUNBUFFERED="1")
    proc = subprocess.run(["bash", str(work / "_page.sh")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (
        f"{page}: an example failed (script {work / '_page.sh'}):\n"
        f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")


# ---------------------------------------------------------------------------------------------
# Recipes, page by page.

RECIPES = {}
