"""``tokrace traces`` says missing data is missing: tokens a format does not record are null in the JSON and
"not recorded" in the tables and the Markdown; the notes of what a format cannot know are under the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokrace.tui.main import main


def bare_rollout(folder: Path) -> Path:
    """A Codex rollout from a build that writes no token_count events."""
    def line(ts: str, kind: str, payload: dict[str, object]) -> str:
        return json.dumps({"timestamp": f"2026-05-01T12:00:{ts}Z", "type": kind, "payload": payload})

    path = folder / "rollout-bare.jsonl"
    path.write_text("\n".join([
        line("00.000", "session_meta", {"id": "bare"}),
        line("00.100", "turn_context", {"model": "gpt-5.6-sol", "approval_policy": "never"}),
        line("00.200", "event_msg", {"type": "user_message", "message": "go"}),
        line("03.000", "response_item", {"type": "function_call", "call_id": "c1", "name": "shell"}),
        line("07.000", "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}),
        line("09.000", "response_item", {"type": "message", "role": "assistant", "content": []})]) + "\n")
    return path


def test_tokens_not_recorded_are_null_in_json_and_said_in_the_tables(capsys: pytest.CaptureFixture[str],
                                                                     tmp_path: Path) -> None:
    path = bare_rollout(tmp_path)
    assert main(["traces", str(path), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    trace = doc["traces"][0]
    assert trace["input_tokens"] is None and trace["output_tokens"] is None
    assert doc["summary"]["original"]["input_tokens"] is None
    md = tmp_path / "t.md"
    assert main(["traces", str(path), "--markdown", str(md)]) == 0
    out = capsys.readouterr().out
    assert "| tokens | not recorded |" in md.read_text()
    for text in (out, md.read_text()):
        assert "tokens not recorded" in text  # the detail table's caption
        assert "no token counts recorded" in " ".join(text.split())  # the note under the summary


def test_a_four_part_original_price_is_taken(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = bare_rollout(tmp_path)
    assert main(["traces", str(path), "--original-price", "3,15,0.3,3.75", "--json", "-"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["traces", str(path), "--original-price", "3,15,0.3,3.75,9"])
    assert "INPUT,OUTPUT[,CACHED[,CACHE_WRITE]]" in capsys.readouterr().err
