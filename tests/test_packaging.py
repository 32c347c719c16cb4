"""pyproject.toml says what setuptools expects today: installing attnlab prints no deprecation notice."""

import tomllib
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_licence_is_an_spdx_expression():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "MIT"  # not the deprecated table {text = "MIT"}
    assert "setuptools>=77" in project["build-system"]["requires"]  # the first setuptools to read an SPDX licence


def test_setuptools_reads_the_project_without_a_warning(monkeypatch):
    pytest.importorskip("setuptools", minversion="77")
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    monkeypatch.chdir(ROOT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # setuptools' deprecation notice is a warning: it fails the test
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert dist.metadata.license_expression == "MIT"
