"""A synthetic loop's figures on every path (issue 26, done when): raced twice on the real clock, on
``--fast-forward``, replayed, and exported to OTLP and read back by ``tokrace traces``, each lane has the same
end-to-end time and breakdown to 1 ms. Real processes on the real clock: a tiny loop of a few seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

TINY = """
name = "tiny"
description = "a tiny loop for the clock test"
seed = 3
max_tokens = 20

[[steps]]
kind = "model"
prompt = "Plan the fix."

[[steps]]
kind = "tool"
tool = "run_tests"
latency_s = 0.3

[[steps]]
kind = "model"
prompt = "Read the failure."

[[steps]]
kind = "human"
label = "review"
latency_s = 0.4

[[steps]]
kind = "model"
prompt = "Fix it."
"""
MODEL_KINDS = ("pending", "think", "model")
"""What ``tokrace traces`` counts as one model call's time (to its first token, thinking, streaming)."""


def tokrace(*args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tokrace.tui.main", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def lanes(path: Path) -> list[tuple[str, float, dict[str, float]]]:
    """Each lane's name, e2e and breakdown from bench's (or replay's) JSON."""
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for tier in doc["tiers"]:
        [run] = tier["runs"]
        assert run["ok"], run["error"]
        out.append((tier["name"], run["e2e_s"], {k: v for k, v in run["breakdown"].items() if v}))
    return out


def same(a: list[tuple[str, float, dict[str, float]]], b: list[tuple[str, float, dict[str, float]]]) -> None:
    assert [name for name, _, _ in a] == [name for name, _, _ in b]
    for (name, e2e_a, parts_a), (_, e2e_b, parts_b) in zip(a, b, strict=True):
        assert abs(e2e_a - e2e_b) < 0.001, name
        assert parts_a.keys() == parts_b.keys(), name
        for kind, seconds in parts_a.items():
            assert abs(seconds - parts_b[kind]) < 0.001, (name, kind)


def test_a_loop_has_one_set_of_figures_on_every_clock_and_every_path(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(TINY, encoding="utf-8")
    race = ["bench", "--scenario", "tiny.toml"]
    tokrace(*race, "--json", "real1.json", "--record", "real1.jsonl", cwd=tmp_path)
    tokrace(*race, "--json", "real2.json", "--no-record", cwd=tmp_path)
    tokrace(*race, "--fast-forward", "--json", "ff.json", "--no-record", cwd=tmp_path)
    tokrace("replay", "real1.jsonl", "--headless", "--fast-forward", "--json", "replay.json", cwd=tmp_path)
    tokrace("export", "real1.jsonl", "--to", "otlp", "-o", "real1.otlp.json", cwd=tmp_path)
    tokrace("traces", "real1.otlp.json", "--json", "traces.json", cwd=tmp_path)
    real = lanes(tmp_path / "real1.json")
    assert len(real) == 3 and all(parts.get("tool") and parts.get("human") for _, _, parts in real)
    same(lanes(tmp_path / "real2.json"), real)  # two runs on the real clock: identical
    same(lanes(tmp_path / "ff.json"), real)
    same(lanes(tmp_path / "replay.json"), real)
    traces = json.loads((tmp_path / "traces.json").read_text(encoding="utf-8"))["traces"]
    assert len(traces) == len(real)
    for (name, e2e, parts), trace in zip(real, traces, strict=True):
        assert abs(trace["e2e_s"] - e2e) < 0.001, name
        got = trace["breakdown"]
        assert abs(got["model"] - sum(parts.get(k, 0.0) for k in MODEL_KINDS)) < 0.001, name
        for kind in ("tool", "human"):
            assert abs(got[kind] - parts[kind]) < 0.001, (name, kind)
        assert got["wait"] < 0.001 and got["retry"] < 0.001, name
