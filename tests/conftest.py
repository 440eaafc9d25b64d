"""Shared pytest set-up: quiet TensorFlow, the helper modules, and fixtures several folders use.

tests/ mirrors the package: tests/<subpackage>/ tests bert_tf/<subpackage>/, tests/test_<module>.py
a top-level module, tests/finetuning/ the fine-tuning driver and tasks (bert_tf.jobs) and its
notebook. Test modules need unique basenames (the folders have no
__init__.py). Helper modules shared across folders (finetuning_helpers, interop_reference,
serving_cases, text_samples, glue_files, and command_batch here, which runs several CLI runs in
one process) are importable from every test.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import pytest  # noqa: E402

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS)
for _folder in ("data", "finetuning", "interop", "serving", "text"):
    if os.path.join(TESTS, _folder) not in sys.path:
        sys.path.append(os.path.join(TESTS, _folder))


@pytest.fixture
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def pretrained_dir(tmp_path_factory):
    """A tiny pre-trained run directory (bert_config.json, vocab.txt, checkpoint)."""
    from finetuning_helpers import make_pretrained_dir

    directory = tmp_path_factory.mktemp("pretrained")
    make_pretrained_dir(str(directory))
    return directory
