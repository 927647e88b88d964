"""tests/ci_policy.py: any true `CI` fails a missing prerequisite, anything else skips it."""

from __future__ import annotations

import pytest

from tests.ci_policy import ci_or_skip, in_ci

TRUE = ["true", "TRUE", "True", "1", "yes", "YES", "on", "On", " true "]
NOT_TRUE = ["", "false", "0", "no", "off", "2", "truthy"]


@pytest.mark.parametrize("value", TRUE)
def test_any_true_ci_fails_naming_the_value_and_the_reason(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci()
    with pytest.raises(pytest.fail.Exception) as failed:
        ci_or_skip("gcc is missing", in_ci_because="; CI machines have it")
    assert str(failed.value) == f"CI={value.strip()}: gcc is missing; CI machines have it"


@pytest.mark.parametrize("value", [*NOT_TRUE, None])
def test_elsewhere_the_test_is_skipped_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception) as skipped:
        ci_or_skip("gcc is missing", in_ci_because="; CI machines have it")
    assert str(skipped.value) == "gcc is missing (set CI=true to make this an error)"
