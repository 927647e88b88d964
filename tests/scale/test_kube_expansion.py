"""`plan` expands `$(NAME)` in a container's env as the kubelet does. The cases are Kubernetes'
own (kubernetes/kubernetes, third_party/forked/golang/expansion/expand_test.go at commit
490ffa432a878f5a75e5b5906d820d06e672556e, doExpansionTest), with its context."""

from __future__ import annotations

import pytest

from tfgpu_kit.plan.envvars import kube_expand

CONTEXT = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}

CASES = [
    ("$(VAR_A)", "A"),
    ("$(VAR_A)-$(VAR_A)", "A-A"),
    ("___$(VAR_B)___", "___B___"),
    ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
    ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
    ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
    ("f000-$$VAR_A", "f000-$VAR_A"),
    ("foo\\$(VAR_C)bar", "foo\\Cbar"),
    ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
    ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
    ("$(VAR_REF)", "$(VAR_A)"),
    ("%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"),
    ("foo$(VAR_EMPTY)bar", "foobar"),
    ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
    ("f00__(VAR_A)__", "f00__(VAR_A)__"),
    ("$?_boo_$!", "$?_boo_$!"),
    ("$VAR_A", "$VAR_A"),
    ("$(VAR_DNE)", "$(VAR_DNE)"),
    ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
    ("$$$$$$(VAR_A)", "$$$(VAR_A)"),
    ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
    ("$$$$$$$(VAR_A)", "$$$A"),
    ("$VAR_A)", "$VAR_A)"),
    ("${VAR_A}", "${VAR_A}"),
    ("$(VAR_B)_______$(A", "B_______$(A"),
    ("$(VAR_C)_______$(", "C_______$("),
    ("$(VAR_A)foobarzab$", "Afoobarzab$"),
    ("--$($($($($--", "--$($($($($--"),
    ("$(foo$$var)", "$(foo$$var)"),
    ("\n", "\n"),
]


@pytest.mark.parametrize(("given", "expanded"), CASES)
def test_expansion_is_the_kubelets(given: str, expanded: str) -> None:
    assert kube_expand(given, CONTEXT)[0] == expanded


@pytest.mark.parametrize(
    ("given", "known"),
    [("$(VAR_A)", True), ("$$(VAR_DNE)", True), ("x$(VAR_DNE)", False), ("$(VAR_A$(VAR_B)", False)],
)
def test_a_reference_to_an_undefined_name_is_unknown(given: str, known: bool) -> None:
    """The kubelet leaves it as written; plan calls the value unknown rather than judge it."""
    assert kube_expand(given, CONTEXT)[1] is known
