"""Fixtures of the fine-tuning tests."""

import pytest

from finetuning_helpers import make_pretrained_dir


@pytest.fixture(scope="session")
def pretrained_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pretrained")
    make_pretrained_dir(str(directory))
    return directory
