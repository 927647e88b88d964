"""The org.opencontainers.image.source label ships in every pushed image, so a
Git remote's credentials (a CI job token, a user:password) never reach it, whatever the scheme;
`bake` prints the same build arguments and must not print them either."""

from __future__ import annotations

import json

import pytest

from tfgpu_kit import cli
from tfgpu_kit.image import build_args

SECRET = "glpat-SECRET0123"


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        (
            f"https://gitlab-ci-token:{SECRET}@gitlab.example.com/ml/tfgpu.git",
            "https://gitlab.example.com/ml/tfgpu",
        ),
        (f"https://{SECRET}@github.com/acme/tfgpu", "https://github.com/acme/tfgpu"),
        (f"http://dev:{SECRET}@git.local:8080/ml/tfgpu.git", "http://git.local:8080/ml/tfgpu"),
        (f"ssh://git:{SECRET}@github.com:22/acme/tfgpu.git", "https://github.com/acme/tfgpu"),
        (f"git://anon:{SECRET}@git.example.org/tfgpu.git", "https://git.example.org/tfgpu"),
        (f"git+ssh://u:{SECRET}@host.example/o/r.git", "https://host.example/o/r"),
        (f"deploy:{SECRET}@host.example:o/r.git", "https://host.example/o/r"),
        ("git@github.com:acme/tfgpu.git", "https://github.com/acme/tfgpu"),
        (
            f"https://host.example/o/r.git?private_token={SECRET}#{SECRET}",
            "https://host.example/o/r",
        ),
        ("https://host.example/o/r\nRUN id", None),
    ],
)
def test_source_url_keeps_no_userinfo(remote: str, url: str | None) -> None:
    result = build_args.source_url(remote)
    assert result == url
    assert SECRET not in (result or "")


def test_bake_prints_no_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    origin = f"https://gitlab-ci-token:{SECRET}@gitlab.example.com/ml/tfgpu.git"
    answers = {("rev-parse", "HEAD"): "c0ffee", ("remote", "get-url", "origin"): origin}
    monkeypatch.setattr(build_args, "_git", lambda *command: answers.get(command))
    assert cli.main(["bake", "2.21.0-gpu"]) == 0
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    args = json.loads(captured.out)["target"]["2_21_0-gpu"]["args"]
    assert args["TFGPU_SOURCE"] == "https://gitlab.example.com/ml/tfgpu"
