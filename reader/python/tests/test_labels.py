"""Label values through the Python writer (spec/PERFABI.md §9.2): two to
four values make a member instance by the writer's one escape, so values
with commas never collide, a series is the same member in every process
(and merges across a directory), and a value the member labels cannot
hold is refused on its own."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import perfabi
import pytest

_native: Any = importlib.import_module("perfabi._perfabi")

VECTOR = Path(__file__).resolve().parents[3] / "spec" / "vectors" / "label_series.jsonl"


def test_the_label_series_vector() -> None:
    """Every line the vector accepts maps as it says; the Python classes
    pass labels in their declared order, the vector's in key order."""
    checked = 0
    for line in VECTOR.read_text().splitlines():
        v = json.loads(line)
        if "refused" in v:
            continue
        labels = sorted((k, x) for k, x in v["labels"])
        dimension, instance, member_labels = _native.series_member(labels)
        assert dimension == v["dimension"], line
        assert instance == v["instance"], line
        assert [list(p) for p in member_labels] == v["member_labels"], line
        checked += 1
    assert checked >= 8


def values(path: str, name: str) -> dict[tuple[str, ...], Any]:
    """Family `name`'s totals by its member labels' values (its writer has
    exited: its segment is read as it was left)."""
    with perfabi.Segment(path, require_live=False) as seg:
        fam = seg.read(name)
    return {tuple(v.instance.labels.values()): v.total for v in fam.values}


def test_values_with_commas_and_escapes_never_collide(tmp_path: Path) -> None:
    # A process of its own: client.configure() is once per process.
    script = f"""
import sys
from perfabi import client
from perfabi.client import Counter
client.configure(directory={str(tmp_path)!r}, name="labels")
hits = Counter("hits", "Hits", ["a", "b"])
hits.labels("x,y", "z").inc(3)
hits.labels("x", "y,z").inc(4)
hits.labels("50%", "k=v").inc(5)
hits.labels("%2C", "a b").inc(6)
hits.labels("v" * 40, "w" * 40).inc(7)
hits.labels("v" * 40, "w" * 39 + "x").inc(8)
refused = 0
for bad in ("back\\\\slash", 'say "hi"', "two\\nlines", "", "z" * 48):
    try:
        hits.labels("x", bad).inc(100)
    except (perfabi.WriterError, ValueError) as e:
        print("refused", repr(bad), e, file=sys.stderr)
        refused += 1
print(client.segment_path())
print(refused)
"""
    out = subprocess.run(
        [sys.executable, "-c", "import perfabi\n" + script],
        capture_output=True,
        text=True,
        check=True,
    )
    path, refused = out.stdout.split()
    assert int(refused) == 5, out.stderr
    assert values(path, "hits") == {
        ("x,y", "z"): 3,
        ("x", "y,z"): 4,
        ("50%", "k=v"): 5,
        ("%2C", "a b"): 6,
        ("v" * 40, "w" * 40): 7,
        ("v" * 40, "w" * 39 + "x"): 8,
    }


WORKER = """
import sys
from perfabi import client
from perfabi.client import Counter
directory, name = sys.argv[1], sys.argv[2]
client.configure(directory=directory, name=name)
hits = Counter("hits", "Hits", ["a", "b"])
for a in sys.argv[3:]:
    hits.labels(a, "w" * 40).inc(1)
"""


def test_a_series_is_one_member_in_every_process(tmp_path: Path) -> None:
    """Two processes make the same long series in opposite orders: each
    is one merged series of both (an instance numbered by creation order
    would make two series of the same labels)."""
    d = tmp_path / "segs"
    long_a, long_b = "p" * 40, "q" * 40
    for name, order in (("one", [long_a, long_b]), ("two", [long_b, long_a])):
        subprocess.run([sys.executable, "-c", WORKER, str(d), name, *order], check=True)
    # (The second one's start folds the first, dead, into the kept file:
    # its series still merge there, by instance and labels.)
    r = perfabi.Directory(d).read()
    assert r.problems == (), r.problems
    got = {tuple(v.instance.labels.values()): v.total for v in r.family("hits").values}
    assert got == {(long_a, "w" * 40): 2, (long_b, "w" * 40): 2}


def test_the_writers_rule_is_the_metrics_recorders() -> None:
    """The Python classes and the `metrics` recorder call one rule: the
    instance depends on the values alone, not on a process's history."""
    labels = [("a", "x,y"), ("b", "z")]
    assert _native.series_member(labels)[1] == "x%2Cy,z"
    assert _native.series_member(labels) == _native.series_member(labels)
    with pytest.raises(perfabi.WriterError) as e:
        _native.series_member([("a", "1"), ("a", "2")])
    assert e.value.code == "bad-labels"
