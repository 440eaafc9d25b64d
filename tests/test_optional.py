"""Optional dependencies: a missing one is named with the pip extra that installs it."""

import sys

import pytest

from bert_tf import optional


@pytest.mark.parametrize("module,extra", [("tensorflow_datasets", "tfds"),
                                          ("keras_hub", "keras-hub")])
def test_missing_optional_dependency_names_its_extra(monkeypatch, module, extra):
    # None in sys.modules makes the import fail as an uninstalled package's would.
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=rf"needs the {module} package, which bert_tf installs "
                       rf"only with an extra: pip install 'bert_tf\[{extra}\]'"):
        optional.require(module)


def test_present_optional_dependency_is_returned():
    assert optional.require("keras_hub").__name__ == "keras_hub"
