"""Fixtures of the perfabi tests: live writers (see support.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from support import Exportd, ScriptedWriter, live_writer


@pytest.fixture
def exportd(tmp_path: Path) -> Iterator[Exportd]:
    """perfabi-exportd writing ``tmp_path/perfabi.seg``."""
    e = Exportd(tmp_path / "perfabi.seg")
    yield e
    if e.child is not None:
        e.stop()


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Path]:
    """The test's own live writer; its segment's path."""
    path = tmp_path / "app.seg"
    child = live_writer(path)
    yield path
    child.stop()


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[ScriptedWriter]:
    """The test's own writer, doing what the test tells it."""
    w = ScriptedWriter(tmp_path / "scripted.seg")
    yield w
    w.stop()
