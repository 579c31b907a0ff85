"""``tokrace traces``: a folder mixing every format, its JSON, its exit codes, and our own recordings read back
with the figures of their replay."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from paths import TRACE_FIXTURES as FIXTURES

from tokrace.tui.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def traces_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(capsys, "traces", *argv, "--json", "-")
    return code, json.loads(out), err


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded scenario loop (three demo lanes), made once for the tests that read it back."""
    path = tmp_path_factory.mktemp("rec") / "incident.jsonl"
    assert main(["bench", "--fast-forward", "--scenario", "incident", "--record", str(path)]) == 0
    return path


def test_a_folder_mixing_every_format_reports_each_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                        recording: Path) -> None:
    folder = tmp_path / "mixed"
    shutil.copytree(FIXTURES, folder)
    shutil.copy(recording, folder / "incident.jsonl")
    code, doc, err = traces_json(capsys, str(folder))
    assert code == 0
    assert doc["tool"] == "tokrace" and doc["summary"]["original"]["traces"] == len(doc["traces"])
    by_file = {Path(f["file"]).relative_to(folder).as_posix(): f for f in doc["files"]}
    assert by_file["other/notes.txt"]["problem"].startswith("not a trace")
    assert by_file["other/config.json"]["problem"].startswith("not a trace")
    assert "read with its session" in by_file["claude-code/session-b/subagents/agent-a1.jsonl"]["problem"]
    assert {f["format"] for f in doc["files"] if f["traces"]} == {"claude-code", "codex", "otlp", "weka", "tokrace",
                                                                  "gemini-cli", "otel-sdk"}
    assert by_file["claude-code/session-a.jsonl"]["skipped"] == 1
    assert by_file["otlp/collector-export.jsonl"] == {**by_file["otlp/collector-export.jsonl"], "traces": 2,
                                                      "skipped": 2, "format": "otlp"}
    for t in doc["traces"]:
        assert sum(t["breakdown"].values()) == pytest.approx(t["e2e_s"], abs=1e-5)
    assert "other/notes.txt: not a trace" in err.replace(str(folder) + "/", "")


def test_the_summary_has_the_six_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = traces_json(capsys, str(FIXTURES / "codex"), str(FIXTURES / "weka" / "w-1.json"),
                               "--original-price", "5,30,0.5")
    s = doc["summary"]["original"]
    assert code == 0 and s["traces"] == 2
    assert s["total_task_s"] == pytest.approx(620.0 + 624.0)
    # on the critical path: WEKA's second sub-agent (3 s of model beside the first) is off it
    assert s["tool_wait_s"] == pytest.approx(17.5) and s["tool_share"] == pytest.approx(17.5 / 1244, abs=1e-6)
    assert s["human_steps"] == 2 and s["human_review_s"] == pytest.approx(1200.0)
    assert s["retry_rate"] == 0.0
    assert s["ttft_s"] == {"p50": pytest.approx(1.0), "p90": pytest.approx(1.16)}  # only WEKA records TTFT
    codex_cost = ((5400 - 3900) * 5 + 3900 * 0.5 + 162 * 30) / 1e6
    weka_cost = (3030 * 5 + 198 * 30) / 1e6
    assert s["total_cost_usd"] == pytest.approx(codex_cost + weka_cost)
    assert s["model_share"] == pytest.approx(26.5 / 1244, abs=1e-6)


def test_the_idle_cap_moves_time_between_human_and_away(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc, _ = traces_json(capsys, str(FIXTURES / "codex"), "--idle-cap", "60")
    t = doc["traces"][0]
    assert t["breakdown"]["human"] == 60.0 and t["away_s"] == 3540.0 and t["e2e_s"] == pytest.approx(80.0)


def test_nothing_readable_exits_2_with_one_line_per_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "traces", str(FIXTURES / "other"), str(tmp_path / "missing.jsonl"))
    assert code == 2 and out == ""
    assert "notes.txt: not a trace" in err and "missing.jsonl" in err and "no trace read from 3 files" in err
    assert "Traceback" not in err


def test_a_forced_format_reads_what_detection_would_not(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text('{"t": 0, "api_time": 1.5, "in": 10, "out": 3}\n{"t": 4, "api_time": 1, "in": 20, "out": 4}\n')
    code, doc, _ = traces_json(capsys, str(path), "--format", "weka")
    assert code == 0 and doc["traces"][0]["e2e_s"] == 5.0 and doc["traces"][0]["calls"] == 2


def test_bad_options_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--idle-cap", "-1"], ["--format", "nope"], ["--original-price", "5"]):
        with pytest.raises(SystemExit) as exc:
            main(["traces", str(FIXTURES), *argv])
        assert exc.value.code == 2
    capsys.readouterr()


def test_the_tables_name_each_trace_and_the_checklist(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "traces", str(FIXTURES / "claude-code/session-a.jsonl"))
    assert code == 0
    assert "session-a.jsonl" in out and "tool (+approval)" in out and "human review burden" in out
    assert "away (past the idle cap, left out)" in out and "3000.0" in out


def test_a_recording_reads_back_with_the_figures_of_its_replay(capsys: pytest.CaptureFixture[str],
                                                               recording: Path) -> None:
    code, out, _ = run(capsys, "replay", str(recording), "--headless", "--fast-forward", "--json", "-")
    assert code == 0
    replayed = json.loads(out)["tiers"]
    _, doc, _ = traces_json(capsys, str(recording))
    assert [t["format"] for t in doc["traces"]] == ["tokrace"] * len(replayed)
    for tier, trace in zip(replayed, doc["traces"], strict=True):
        run0 = tier["runs"][0]
        assert trace["e2e_s"] == pytest.approx(run0["e2e_s"], abs=1e-5)
        loop = run0["breakdown"]
        b = trace["breakdown"]
        # model_share is written to 6 decimals: its product with e2e_s is good to ~1e-4 s
        assert b["model"] == pytest.approx(run0["model_share"] * run0["e2e_s"], abs=2e-4)
        for kind in ("tool", "human", "retry"):
            assert b[kind] == pytest.approx(loop.get(kind, 0.0), abs=1e-5)
        assert trace["calls"] == len(run0["turns"])
        assert trace["output_tokens"] == run0["output_tokens"]


def test_many_files_show_a_progress_bar_on_stderr_when_it_is_a_terminal(capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    for n in range(12):
        shutil.copy(FIXTURES / "weka" / "w-1.json", tmp_path / f"w-{n}.json")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich takes stderr for a terminal
    code, out, err = run(capsys, "traces", str(tmp_path), "--json", "-")
    assert code == 0 and len(json.loads(out)["traces"]) == 12
    assert "reading traces" in err and "12/12" in err
    monkeypatch.delenv("TTY_COMPATIBLE")
    _, _, err = run(capsys, "traces", str(tmp_path), "--json", "-")
    assert "reading traces" not in err


def test_replay_of_a_trace_headless_gives_the_trace_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "replay", str(FIXTURES / "claude-code/session-a.jsonl"), "--headless",
                       "--fast-forward", "--json", "-")
    assert code == 0
    run0 = json.loads(out)["tiers"][0]["runs"][0]
    assert run0["ok"] and run0["e2e_s"] == pytest.approx(629.0)
    assert run0["breakdown"]["tool"] == pytest.approx(8.5) and run0["breakdown"]["human"] == pytest.approx(600.0)
    assert run0["breakdown"]["retry"] == pytest.approx(2.0)
    assert run0["model_share"] == pytest.approx(18.5 / 629.0, abs=1e-6)


def test_replay_of_a_file_that_holds_no_trace_is_one_clear_line(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text('{"resourceSpans": []}\n')
    code, _, err = run(capsys, "replay", str(path), "--headless")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_json_to_a_file_keeps_the_tables_on_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    code, out, _ = run(capsys, "traces", str(FIXTURES / "weka" / "w-1.json"), "--json", str(target))
    assert code == 0 and "summary over 1 trace" in out
    assert json.loads(target.read_text())["traces"][0]["format"] == "weka"


def test_a_sub_agent_beside_the_person_is_off_the_critical_path(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "claude-code" / "session-background.jsonl")
    code, doc, _ = traces_json(capsys, path, "--on", "Sol standard,Sol ultrafast")
    t = doc["traces"][0]
    assert code == 0 and t["e2e_s"] == pytest.approx(68.0)
    assert t["breakdown"] == pytest.approx({"model": 7.0, "tool": 1.0, "human": 60.0, "retry": 0.0, "wait": 0.0})
    assert t["parallel_s"] == pytest.approx({"model": 10.0, "tool": 0.0, "human": 0.0})
    for name, on in t["on"].items():  # the person's minute is recorded time: the same on every tier
        assert on["breakdown"]["human"] == pytest.approx(60.0), name
    code, out, _ = run(capsys, "traces", path)
    assert code == 0 and "off the critical path (in parallel)" in out and "model 10.0" in out


def test_traces_and_traces_on_give_one_total_cost_with_one_source(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --original-price, both price the original at the demo tier with its model and name that tier;
    with no tier of the traces' model, both say so in the same words."""
    monkeypatch.chdir(tmp_path)
    traces = str(Path(__file__).parents[3] / "examples" / "traces")

    def cost_lines(on: str) -> tuple[str, str]:
        assert main(["traces", traces, "--json", str(tmp_path / "t.json")]) == 0
        plain = next(line for line in capsys.readouterr().out.splitlines() if "total cost" in line)
        assert main(["traces", traces, "--on", on, "--json", str(tmp_path / "c.json")]) == 0
        capsys.readouterr()
        compared = json.loads((tmp_path / "c.json").read_text())
        plain_cost = json.loads((tmp_path / "t.json").read_text())["summary"]["original"]["total_cost_usd"]
        assert plain_cost == pytest.approx(compared["summary"]["original"]["total_cost_usd"], abs=1e-6) \
            if plain_cost is not None else compared["summary"]["original"]["total_cost_usd"] is None
        return " ".join(plain.split()), compared["original_price"]

    plain, source = cost_lines("Sol ultrafast")
    assert source == "Sol standard's, a built-in demo tier with the same model"
    assert f"(original price: {source})" in plain and "$" in plain
    (tmp_path / "tokrace.toml").write_text('[[tiers]]\nname = "fast"\nprovider = "synthetic"\nmodel = "other"\n')
    plain, source = cost_lines("fast")
    assert source.startswith("none for the traces' model; give --original-price")
    assert f"— (original price: {source})" in plain
