"""The HTML report: well-formed, self-contained, every lane and the summary, the theme's colours, bottleneck bars."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from exporting import failing_tiers, record, replay_json, source_of

from tokrace.providers.export import tables
from tokrace.providers.export.html_report import NEUTRAL, to_html
from tokrace.providers.metrics.turn import DEFINITIONS
from tokrace.providers.race.summary import summary_of_run

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "source", "wbr"}
"""HTML elements without an end tag."""


class Checker(HTMLParser):
    """Checks that every element is closed, in order; collects the text, the tags and every attribute's name."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.text: list[str] = []
        self.tags: list[str] = []
        self.attributes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def check(page: str) -> Checker:
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert checker.problems == []
    assert checker.stack == []
    return checker


def test_page_is_well_formed_self_contained_and_holds_every_lane_and_the_summary(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl", failing_tiers())
    source = source_of(path)
    page = to_html(source)
    assert page.startswith("<!DOCTYPE html>")
    parsed = check(page)
    assert "http" not in page.lower()
    assert not {"script", "link", "img", "iframe", "object"} & set(parsed.tags)
    assert not {"src", "href", "xlink:href", "srcset", "data", "action"} & set(parsed.attributes)
    assert "url(" not in page and "@import" not in page  # nothing fetched from anywhere
    text = re.sub(r"\s+", " ", "".join(parsed.text))
    for tier in source.tiers:
        assert tier.name in text
    sentence = "".join(text for text, _ in tables.summary_pieces(summary_of_run(source.lanes(0))))
    assert sentence in text and "failed: Sol priority" in sentence
    for svg in re.findall(r"<svg\b.*?</svg>", page, flags=re.S):
        ET.fromstring(svg)  # every drawing is well-formed XML on its own


def test_table_and_timeline_show_the_numbers_of_replay_headless(tmp_path: Path) -> None:
    path = record(tmp_path / "race.jsonl")
    report = replay_json(path, tmp_path)
    page = to_html(source_of(path))
    for tier in report["tiers"]:
        run = tier["runs"][0]
        assert f"{run['ttft_s']:.3f} s" in page and f"{run['e2e_s']:.2f} s" in page
        assert f'title="{DEFINITIONS["ttft_s"]}">TTFT</abbr>' in page  # a heading's definition on hover
        for seg in run["segments"]:  # every segment drawn, its hover title saying what and when
            assert f"{seg['start_s']:.2f} s → {seg['end_s']:.2f} s" in page


def test_segments_wear_the_colours_given_and_fall_back_to_neutral(tmp_path: Path) -> None:
    source = source_of(record(tmp_path / "race.jsonl"))
    page = to_html(source, {"seg-model": "#123456", "seg-wait": "red; } body { display:none", "lane-0": "#ABCDEF"})
    assert "--seg-model:#123456" in page and "--lane-0:#ABCDEF" in page
    assert f"--seg-wait:{NEUTRAL['seg-wait']}" in page and "display:none" not in page
    assert 'class="seg seg-model"' in page and ".seg-model{fill:var(--seg-model)}" in page


def test_prints_on_white_and_scales_for_a_projector(tmp_path: Path) -> None:
    page = to_html(source_of(record(tmp_path / "race.jsonl")), {"background": "#000000"})
    media = page[page.index("@media print"):]
    assert "--background:#FFFFFF" in media and "print-color-adjust:exact" in media
    assert 'name="viewport"' in page and "viewBox=" in page and "clamp(" in page


def test_a_loop_gets_its_bottleneck_bars_and_table(tmp_path: Path) -> None:
    path = record(tmp_path / "loop.jsonl", scenario="incident")
    report = replay_json(path, tmp_path)
    page = to_html(source_of(path))
    check(page)
    assert page.count('<svg class="bars"') == 1
    for tier in report["tiers"]:
        run = tier["runs"][0]
        human = run["breakdown"]["human"]
        assert f"{tier['name']}: human {human:.1f} s ({human / run['e2e_s']:.0%} of the loop)" in page
    assert "where the time goes — incident" in page
    assert page.count('class="seg seg-tool"') >= sum(
        1 for tier in report["tiers"] for s in tier["runs"][0]["segments"] if s["kind"] == "tool")
