"""``tokrace calibrate`` against ``tokrace serve`` with a known profile: the measured TTFT and decode rate match
the server's, and the profile lands in the tier's table with the rest of the config kept."""

from __future__ import annotations

import queue
import re
import statistics
from pathlib import Path

import pytest
from serving import base_url, fast_source, serve_in_thread

from tokrace.providers.config.load import load_config
from tokrace.providers.race.calibrate import Calibration, CalibrationError, write_profile
from tokrace.providers.serve import Served
from tokrace.providers.traces.retime import tier_profile
from tokrace.tui.main import main

TTFT_MS, TOK_S = 120.0, 250.0


def config_text(url: str) -> str:
    return (
        "# my tiers\n"
        "[defaults]\nmax_tokens = 100\n\n"
        '[[tiers]]\nname = "other"\nprovider = "synthetic"\njitter = 0.1\n\n'
        '[[tiers]]  # the one to measure\nname = "served"\nprovider = "openai"\nmodel = "m"\n'
        f'base_url = "{url}"   # loopback\n'
        'price = { input = 1.0, output = 2.0 }\n\n'
        "# trailing comment\n"
    )


def test_calibrate_measures_the_served_profile_and_writes_it_next_to_the_tier(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    served: queue.Queue[Served] = queue.Queue()
    with serve_in_thread(fast_source(ttft_ms=TTFT_MS, tok_s=TOK_S, ttfb_ms=None), on_served=served.put) as server:
        path = tmp_path / "tokrace.toml"
        before = config_text(base_url(server, "openai"))
        path.write_text(before, encoding="utf-8")
        code = main(["calibrate", "--config", str(path), "--tiers", "served", "--runs", "5", "--max-tokens", "150"])
        # Each record as the server hands it over, its kernel stamps in: the client has the answer's end before
        # the server's thread gets to its last stamps (on a busy box, well before). The time out is a hang guard.
        records = [served.get(timeout=10) for _ in range(6)] if code == 0 else []
        started = len(server.served)
    out = capsys.readouterr().out
    assert code == 0, out
    tier = load_config(path).select("served")[0]
    # Held to what the server did (its own stamps), not to its profile: on a busy machine the server's thread
    # wakes late and serves slower than planned, and calibrate must measure what was served. The first request
    # is the unmeasured warm-up.
    assert started == len(records) == 6
    assert all(s.ttft_s is not None and s.decode_tok_s is not None for s in records)
    truth_ttft_ms = statistics.median(s.ttft_s or 0.0 for s in records[1:]) * 1000.0
    truth_tok_s = statistics.median(s.decode_tok_s or 0.0 for s in records[1:])
    assert abs(tier.options["ttft_ms"] - truth_ttft_ms) <= 5.0, (tier.options, truth_ttft_ms)
    assert abs(tier.options["tok_s"] - truth_tok_s) <= 0.02 * truth_tok_s, (tier.options, truth_tok_s)
    after = path.read_text(encoding="utf-8")
    # everything that was there is still there, in order; the profile follows the tier's last key
    assert [line for line in after.splitlines() if not re.match(r"(ttft_ms|tok_s) =|# measured by", line)] \
        == before.splitlines()
    lines = after.splitlines()
    price = lines.index("price = { input = 1.0, output = 2.0 }")
    assert lines[price + 1].startswith("# measured by tokrace calibrate on ")
    profile = [f"ttft_ms = {tier.options['ttft_ms']:g}", f"tok_s = {tier.options['tok_s']:g}"]
    assert lines[price + 2:price + 4] == profile
    assert "wrote ttft_ms = " in out and "served" in out
    assert tier_profile(tier).tok_s == tier.options["tok_s"]


def test_calibrate_print_shows_the_toml_lines_and_leaves_the_file_alone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serve_in_thread(fast_source(ttft_ms=50, tok_s=400, ttfb_ms=None)) as server:
        path = tmp_path / "tokrace.toml"
        text = config_text(base_url(server, "openai"))
        path.write_text(text, encoding="utf-8")
        code = main(["calibrate", "--config", str(path), "--tiers", "served", "--runs", "1", "--print",
                     "--max-tokens", "40"])
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"^# served: paste into its \[\[tiers\]\] table\nttft_ms = [0-9.]+\ntok_s = [0-9.]+$", out, re.M)
    assert path.read_text(encoding="utf-8") == text


def test_calibrating_again_replaces_the_profile_and_its_comment(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[[tiers]]\nname = "a"\nprovider = "anthropic"\nmodel = "m"\n'
                    '# measured by tokrace calibrate on an old day\nttft_ms = 999\ntok_s = 1\n'
                    '\n[tiers.price]\ninput = 1.0\n', encoding="utf-8")
    calibration = Calibration(tier="a", runs=2, ttft_s=[0.2, 0.3], decode_tok_s=[80.0, 90.0])
    changed = write_profile(path, 0, calibration, "on today")
    text = path.read_text(encoding="utf-8")
    assert text == ('[[tiers]]\nname = "a"\nprovider = "anthropic"\nmodel = "m"\n'
                    "# measured by tokrace calibrate on today\nttft_ms = 250\ntok_s = 85\n"
                    "\n[tiers.price]\ninput = 1.0\n")
    assert changed == [5, 6, 7]


def test_a_synthetic_tier_is_not_calibrated(capsys: pytest.CaptureFixture[str], in_tmp: Path) -> None:
    assert main(["calibrate", "--tiers", "Sol ultrafast", "--print"]) == 2
    assert "synthetic: its ttft_ms and tok_s are its profile already" in capsys.readouterr().err


def test_a_tier_that_cannot_be_reached_fails_with_one_line_and_changes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tokrace.toml"
    text = config_text("http://127.0.0.1:9/v1")
    path.write_text(text, encoding="utf-8")
    code = main(["calibrate", "--config", str(path), "--tiers", "served", "--runs", "1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "served: no successful run; its profile is unchanged" in err
    assert "Traceback" not in err
    assert path.read_text(encoding="utf-8") == text


def test_write_profile_refuses_a_missing_table(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[defaults]\n", encoding="utf-8")
    with pytest.raises(CalibrationError, match="cannot find the tier's"):
        write_profile(path, 0, Calibration(tier="a", runs=1, ttft_s=[0.1], decode_tok_s=[9.0]), "x")


def test_a_config_whose_tiers_are_not_tables_gets_the_lines_to_paste(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serve_in_thread(fast_source(ttft_ms=20, tok_s=200, ttfb_ms=None)) as server:  # 0.1 s of tokens: read
        # in more than one piece on a busy box (at 2,000 tok/s all 20 could come in one read: no rate to measure)
        path = tmp_path / "tokrace.toml"
        url = base_url(server, "openai")
        text = f'tiers = [{{ name = "inline", provider = "openai", model = "m", base_url = "{url}" }}]\n'
        path.write_text(text, encoding="utf-8")
        code = main(["calibrate", "--config", str(path), "--tiers", "inline", "--runs", "1", "--max-tokens", "20"])
    out, err = capsys.readouterr()
    err = " ".join(err.split())  # the console wraps long lines (the path's length varies)
    assert code == 1
    assert "cannot find the tier's [[tiers]] table" in err and "paste these lines" in err
    assert re.search(r"^# inline\nttft_ms = [0-9.]+\ntok_s = [0-9.]+$", out, re.M)
    assert path.read_text(encoding="utf-8") == text
