"""pyproject.toml's filterwarnings: a warning from hpcnn fails the test that triggers it, while
deprecations raised inside third-party packages do not fail the suite."""
import warnings

import pytest


def _warn_from(module, category, message="the policy under test"):
    warnings.warn_explicit(message, category, filename=module.replace(".", "/") + ".py", lineno=1, module=module)


@pytest.mark.parametrize("category", [UserWarning, RuntimeWarning, ResourceWarning, DeprecationWarning,
                                      PendingDeprecationWarning, FutureWarning])
def test_hpcnn_warnings_are_errors(category):
    with pytest.raises(category, match="the policy under test"):
        _warn_from("hpcnn.models", category)
    with pytest.raises(category):
        _warn_from("hpcnn", category)


@pytest.mark.parametrize("category", [UserWarning, RuntimeWarning])
def test_other_warnings_are_errors_too(category):
    """Anything nobody has looked at fails, wherever it comes from (a test expecting one uses pytest.warns)."""
    with pytest.raises(category):
        warnings.warn("the policy under test", category)
    with pytest.warns(category, match="the policy under test"):
        warnings.warn("the policy under test", category)


@pytest.mark.parametrize("module", ["numpy.core.fromnumeric", "h5py._hl.dataset", "matplotlib.cbook"])
@pytest.mark.parametrize("category", [DeprecationWarning, PendingDeprecationWarning, FutureWarning])
def test_third_party_deprecations_do_not_fail(module, category):
    with warnings.catch_warnings(record=True) as seen:  # keeps the configured filters, records what passes them
        _warn_from(module, category, f"{module} deprecates something")  # raises if the policy made it an error
    assert seen == []  # ignored, not merely shown
