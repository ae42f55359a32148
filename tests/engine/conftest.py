"""Fixtures for the engine tests: plain functions, no database."""

from __future__ import annotations

import pytest

from coworkenv_engine.spec import load_spec

from .helpers import mini_doc


@pytest.fixture
def doc() -> dict:
    return mini_doc()


@pytest.fixture
def spec(doc):
    return load_spec(doc)
