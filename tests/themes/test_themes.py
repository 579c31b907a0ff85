"""Themes: built-ins as data, user themes that override or fail together, the remembered choice,
`tokrace themes`, and the colour science that proves the colour-blind-safe and projector themes keep
segments apart."""

from __future__ import annotations

import itertools
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from colour_vision import ciede2000, contrast_ratio, difference
from textual.app import App
from textual.color import Color
from textual.pilot import Pilot
from tui_harness import at, demo_app

from tokrace.themes.loader import (
    APP_VARIABLES,
    BUILTIN_DIR,
    COLOUR_VARIABLES,
    GAUGE_VARIABLES,
    LANE_VARIABLES,
    ROW_HEIGHT_VARIABLE,
    SEGMENT_VARIABLES,
    builtin_themes,
    builtin_variables,
    load_themes,
    parse_theme,
    timeline_row_height,
    user_themes_dir,
)
from tokrace.tui.app.theming import AppThemes, UnknownThemeError
from tokrace.tui.app.widgets.palette import palette
from tokrace.tui.app.widgets.timeline import LABEL_WIDTH, Row, Timeline, fitting_height
from tokrace.tui.cli.settings import Settings, SettingsError, settings_path
from tokrace.tui.main import build_parser, main

BUILTINS = ("tokrace-dark", "tokrace-light", "projector", "tokrace-cb")
DICHROMACIES = ("deuteranopia", "protanopia")
CVD_MIN_DELTA_E = 10.0
"""Least CIEDE2000 between two segment colours as a dichromat sees them: clearly different side by side."""


def write_user_theme(name: str, text: str) -> Path:
    folder = user_themes_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def colours(theme_name: str, keys: tuple[str, ...]) -> dict[str, str]:
    variables = builtin_themes()[theme_name].variables
    return {key: variables[key] for key in keys}


def closest_pair(palette: dict[str, str], vision: str | None) -> tuple[float, str, str]:
    pairs = itertools.combinations(palette, 2)
    return min((difference(palette[a], palette[b], vision), a, b) for a, b in pairs)


# Built-in themes


def test_the_four_built_ins_exist_with_the_dark_one_first() -> None:
    names = list(builtin_themes())
    assert names[0] == "tokrace-dark"
    assert sorted(names) == sorted(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_every_built_in_theme_loads_and_defines_every_app_variable(name: str) -> None:
    theme = builtin_themes()[name]
    assert theme.name == name
    assert set(APP_VARIABLES) <= set(theme.variables)
    for key in COLOUR_VARIABLES:
        Color.parse(theme.variables[key])
    assert theme.variables[ROW_HEIGHT_VARIABLE] in ("1", "2", "3")


@pytest.mark.parametrize(("name", "height"), [("tokrace-dark", 1), ("tokrace-light", 1), ("tokrace-cb", 1),
                                              ("projector", 2)])
def test_every_built_in_file_sets_its_timeline_row_height_itself(name: str, height: int) -> None:
    data = tomllib.loads((BUILTIN_DIR / f"{name}.toml").read_text(encoding="utf-8"))
    assert data["variables"][ROW_HEIGHT_VARIABLE] == height
    assert timeline_row_height(builtin_themes()[name].variables) == height


@pytest.mark.parametrize("name", ["tokrace-dark", "tokrace-light"])
def test_base_themes_define_every_app_variable_themselves(name: str) -> None:
    assert set(APP_VARIABLES) <= set(builtin_variables(name))


def test_light_themes_are_marked_light() -> None:
    themes = builtin_themes()
    assert themes["tokrace-dark"].dark and themes["tokrace-cb"].dark
    assert not themes["tokrace-light"].dark and not themes["projector"].dark


@pytest.mark.parametrize("name", BUILTINS)
def test_segment_colours_are_distinct_for_normal_vision(name: str) -> None:
    delta, a, b = closest_pair(colours(name, SEGMENT_VARIABLES), None)
    assert delta >= 20, f"{name}: {a} and {b} are only {delta:.1f} apart"


@pytest.mark.parametrize("name", BUILTINS)
def test_lane_colours_are_distinct_for_normal_vision(name: str) -> None:
    delta, a, b = closest_pair(colours(name, LANE_VARIABLES), None)
    assert delta >= 15, f"{name}: {a} and {b} are only {delta:.1f} apart"


# Colour science: the instruments first, then the themes


@pytest.mark.parametrize(("lab1", "lab2", "expected"), [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((2.0776, 0.0795, -1.135), (0.9033, -0.0636, -0.5514), 0.9082),
])
def test_ciede2000_matches_sharmas_reference_pairs(lab1: tuple[float, float, float],
                                                   lab2: tuple[float, float, float], expected: float) -> None:
    assert ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(("red", "green", "vision"), [
    ("#E0584A", "#6E9B34", "deuteranopia"),
    ("#E0584A", "#008040", "protanopia"),
])
def test_simulated_dichromacy_makes_a_red_and_a_green_hard_to_tell_apart(red: str, green: str,
                                                                         vision: str) -> None:
    assert difference(red, green) > 50
    assert difference(red, green, vision) < 5


def test_contrast_ratio_of_black_on_white_is_21() -> None:
    assert contrast_ratio("#000000", "#FFFFFF") == pytest.approx(21.0)


@pytest.mark.parametrize("vision", DICHROMACIES)
@pytest.mark.parametrize("keys", [SEGMENT_VARIABLES, LANE_VARIABLES, GAUGE_VARIABLES],
                         ids=["segments", "lanes", "gauges"])
def test_colour_blind_theme_stays_distinct_under_dichromacy(keys: tuple[str, ...], vision: str) -> None:
    delta, a, b = closest_pair(colours("tokrace-cb", keys), vision)
    assert delta >= CVD_MIN_DELTA_E, f"{vision}: {a} and {b} are only {delta:.1f} apart"


@pytest.mark.parametrize("name", ["tokrace-cb", "projector"])
@pytest.mark.parametrize("vision", DICHROMACIES)
def test_segments_stand_out_from_the_background_under_dichromacy(name: str, vision: str) -> None:
    background = builtin_themes()[name].background
    assert background is not None
    palette = colours(name, SEGMENT_VARIABLES)
    assert min(difference(c, background, vision) for c in palette.values()) >= 2 * CVD_MIN_DELTA_E


@pytest.mark.parametrize("vision", DICHROMACIES)
def test_projector_segments_also_stay_distinct_for_the_colour_blind_in_the_room(vision: str) -> None:
    delta, a, b = closest_pair(colours("projector", SEGMENT_VARIABLES), vision)
    assert delta >= CVD_MIN_DELTA_E, f"{vision}: {a} and {b} are only {delta:.1f} apart"


def test_projector_is_high_contrast() -> None:
    theme = builtin_themes()["projector"]
    assert theme.background is not None and theme.foreground is not None
    assert contrast_ratio(theme.foreground, theme.background) >= 15
    for key, colour in colours("projector", SEGMENT_VARIABLES).items():
        assert contrast_ratio(colour, theme.background) >= 3, key
    for key, colour in colours("projector", LANE_VARIABLES).items():
        assert contrast_ratio(colour, theme.background) >= 4.5, key
    delta, a, b = closest_pair(colours("projector", SEGMENT_VARIABLES), None)
    assert delta >= 24, f"{a} and {b} are only {delta:.1f} apart"


# User themes


def test_a_theme_needs_only_a_name_and_a_primary_colour() -> None:
    theme = parse_theme('name = "mine"\nprimary = "#336699"\n')
    assert theme.dark
    assert {key: theme.variables[key] for key in APP_VARIABLES} == dict(builtin_variables("tokrace-dark"))
    assert theme.to_color_system().generate()["secondary"] == "#336699"


def test_a_theme_with_a_light_background_is_light_and_takes_the_light_app_colours() -> None:
    theme = parse_theme('name = "paper"\nprimary = "#336699"\nbackground = "#FAFAF0"\n'
                        '[variables]\nseg-model = "rgb(0, 0, 255)"\n')
    assert not theme.dark
    assert theme.variables["seg-model"] == "#0000FF"
    assert theme.variables["lane-0"] == builtin_variables("tokrace-light")["lane-0"]


def test_a_theme_that_leaves_out_the_row_height_gets_thin_rows_and_one_may_ask_for_thick_ones() -> None:
    assert parse_theme('name = "mine"\nprimary = "#336699"\n').variables[ROW_HEIGHT_VARIABLE] == "1"
    assert parse_theme('name = "paper"\nprimary = "#336699"\ndark = false\n').variables[ROW_HEIGHT_VARIABLE] == "1"
    theme = parse_theme('name = "big"\nprimary = "#336699"\n[variables]\ntimeline-row-height = 3\n')
    assert theme.variables[ROW_HEIGHT_VARIABLE] == "3"  # Textual's theme variables are strings
    assert timeline_row_height(theme.variables) == 3


@pytest.mark.parametrize(("variables", "height"), [({}, 1), ({ROW_HEIGHT_VARIABLE: "2"}, 2),
                                                   ({ROW_HEIGHT_VARIABLE: "9"}, 1), ({ROW_HEIGHT_VARIABLE: "x"}, 1)])
def test_the_row_height_read_back_from_the_app_is_one_unless_the_theme_asks_for_a_valid_other(
        variables: dict[str, str], height: int) -> None:
    assert timeline_row_height(variables) == height


def test_a_user_theme_may_set_textual_variables() -> None:
    theme = parse_theme('name = "mine"\nprimary = "#336699"\n[variables]\n'
                        'footer-key-foreground = "#FF0000 50%"\nblock-cursor-text-style = "bold"\n')
    assert theme.variables["footer-key-foreground"] == "#FF0000 50%"
    assert theme.variables["block-cursor-text-style"] == "bold"


def test_a_user_theme_may_tune_textual_shading() -> None:
    theme = parse_theme('name = "mine"\nprimary = "#336699"\nluminosity_spread = 0.3\ntext_alpha = 1\n')
    assert (theme.luminosity_spread, theme.text_alpha) == (0.3, 1.0)


def test_a_user_theme_named_like_a_built_in_overrides_it() -> None:
    path = write_user_theme("my-dark.toml", 'name = "tokrace-dark"\nprimary = "#FF00FF"\n'
                                            '[variables]\nseg-model = "#00FF00"\n')
    catalog = load_themes()
    loaded = catalog.themes["tokrace-dark"]
    assert loaded.source == path and loaded.origin == str(path)
    assert loaded.theme.primary == "#FF00FF"
    assert loaded.theme.variables["seg-model"] == "#00FF00"
    assert loaded.theme.variables["seg-wait"] == builtin_variables("tokrace-dark")["seg-wait"]
    assert list(catalog.themes)[:4] == list(builtin_themes())
    assert catalog.problems == []


def test_a_new_user_theme_comes_after_the_built_ins() -> None:
    path = write_user_theme("a.toml", 'name = "aardvark"\nprimary = "#123456"\n')
    catalog = load_themes()
    assert list(catalog.themes)[-1] == "aardvark"
    assert catalog.themes["aardvark"].origin == str(path)


def test_no_user_themes_folder_is_no_problem() -> None:
    catalog = load_themes()
    assert catalog.problems == [] and catalog.report() is None
    assert all(loaded.origin == "built-in" for loaded in catalog.themes.values())


@pytest.mark.parametrize(("text", "problem"), [
    ("name = \"x\"\nprimary = \n", "not valid TOML"),
    ('primary = "#123456"\n', "name: missing"),
    ('name = "x"\n', "primary: missing"),
    ('name = "my theme"\nprimary = "#123456"\n', "line 1: name: expected letters, digits"),
    ('name = "x"\nprimary = "blu"\n', "line 2: primary: failed to parse 'blu' as a color"),
    ('name = "x"\nprimary = 7\n', "primary: expected a colour string"),
    ('name = "x"\nprimary = "#123456"\nprimay = "#123456"\n',
     "line 3: primay: unknown key; did you mean 'primary'?"),
    ('name = "x"\nprimary = "#123456"\ndark = "yes"\n', "dark: expected true or false"),
    ('name = "x"\nprimary = "#123456"\ntext_alpha = 2\n', "text_alpha: expected a number from 0 to 1"),
    ('name = "x"\nprimary = "#123456"\nvariables = 3\n', "variables: expected a table"),
    ('name = "x"\nprimary = "#123456"\n[variables]\nlane0 = "#FFFFFF"\n',
     "line 4: lane0: unknown variable; did you mean 'lane-0'?"),
    ('name = "x"\nprimary = "#123456"\n[variables]\nseg-tool = "orangey"\n', "seg-tool: failed to parse"),
    ('name = "x"\nprimary = "#123456"\n[variables]\nborder = "thick"\n', "border: expected a colour"),
    ('name = "x"\nprimary = "#123456"\n[variables]\ntimeline-row-height = 4\n',
     "line 4: timeline-row-height: expected a whole number from 1 to 3, got 4"),
    ('name = "x"\nprimary = "#123456"\n[variables]\ntimeline-row-height = 0\n',
     "line 4: timeline-row-height: expected a whole number from 1 to 3, got 0"),
    ('name = "x"\nprimary = "#123456"\n[variables]\ntimeline-row-height = 1.5\n',
     "timeline-row-height: expected a whole number from 1 to 3, got 1.5"),
    ('name = "x"\nprimary = "#123456"\n[variables]\ntimeline-row-height = "2"\n',
     "timeline-row-height: expected a whole number from 1 to 3, got '2'"),
    ('name = "x"\nprimary = "#123456"\n[variables]\ntimeline-row-height = true\n',
     "timeline-row-height: expected a whole number from 1 to 3, got True"),
    ('name = "x"\nprimary = "#123456"\n[variables]\ntimeline-row-heigth = 2\n',
     "timeline-row-heigth: unknown variable; did you mean 'timeline-row-height'?"),
])
def test_a_broken_file_yields_a_message_naming_the_file_and_the_problem(text: str, problem: str) -> None:
    path = write_user_theme("broken.toml", text)
    catalog = load_themes()
    assert len(catalog.problems) == 1
    assert catalog.problems[0].path == path
    assert problem in catalog.problems[0].problem
    assert str(catalog.problems[0]).startswith(f"{path}: ")


def test_a_file_that_is_not_utf8_is_reported() -> None:
    folder = user_themes_dir()
    folder.mkdir(parents=True)
    (folder / "latin1.toml").write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    assert load_themes().problems[0].problem == "not UTF-8 text"


def test_every_broken_file_is_reported_together_and_the_good_ones_still_load() -> None:
    bad_colour = write_user_theme("bad-colour.toml", 'name = "a"\nprimary = "nope"\n')
    good = write_user_theme("good.toml", 'name = "good"\nprimary = "#123456"\n')
    no_name = write_user_theme("no-name.toml", 'primary = "#123456"\n')
    write_user_theme("notes.txt", "not a theme")
    catalog = load_themes()
    assert [problem.path for problem in catalog.problems] == [bad_colour, no_name]
    assert catalog.themes["good"].source == good
    report = catalog.report()
    assert report is not None
    assert report.splitlines()[0] == "2 theme files could not be loaded:"
    assert f"{bad_colour}: line 2: primary:" in report
    assert f"{no_name}: name: missing" in report


def test_a_second_file_with_the_same_theme_name_is_reported() -> None:
    first = write_user_theme("a.toml", 'name = "twin"\nprimary = "#111111"\n')
    second = write_user_theme("b.toml", 'name = "twin"\nprimary = "#222222"\n')
    catalog = load_themes()
    assert catalog.themes["twin"].source == first
    assert [(p.path, p.problem) for p in catalog.problems] == [
        (second, f"name: 'twin' is already the name of {first}")]


# The remembered choice


def test_the_chosen_theme_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "config" / "settings.json"
    assert Settings(path).theme is None
    Settings(path).set_theme("projector")
    assert Settings(path).theme == "projector"


def test_settings_live_in_the_user_config_dir(isolated_user_dirs: Path) -> None:
    assert settings_path() == isolated_user_dirs / "config" / "tokrace" / "settings.json"
    Settings().set_theme("tokrace-cb")
    assert Settings(settings_path()).theme == "tokrace-cb"


def test_a_corrupt_settings_file_reads_as_nothing_chosen_and_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{not json", encoding="utf-8")
    settings = Settings(path)
    assert settings.theme is None
    settings.set_theme("tokrace-light")
    assert Settings(path).theme == "tokrace-light"
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_settings_that_cannot_be_saved_raise_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"cannot save settings"):
        Settings(blocker / "settings.json").set_theme("projector")


# tokrace themes


def test_themes_command_lists_every_theme_with_where_it_comes_from(
        capsys: pytest.CaptureFixture[str]) -> None:
    path = write_user_theme("mine.toml", 'name = "mine"\nprimary = "#123456"\n')
    assert main(["themes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [*builtin_themes(), "mine"]
    assert lines[0] == "tokrace-dark   built-in"
    assert lines[-1] == f"mine           {path}"


def test_themes_command_reports_broken_files_after_the_themes(capsys: pytest.CaptureFixture[str]) -> None:
    one = write_user_theme("one.toml", 'name = "one"\n')
    two = write_user_theme("two.toml", "name = \n")
    assert main(["themes"]) == 1
    out = capsys.readouterr().out
    themes, broken = out.split("\n\n")
    assert len(themes.splitlines()) == len(BUILTINS)
    lines = broken.splitlines()
    assert lines[0] == "broken theme files:"
    assert lines[1] == f"{one}: primary: missing; every theme needs a primary colour"
    assert lines[2].startswith(f"{two}: not valid TOML: ")


# In the app


class ThemedApp(App[None]):
    """The least app that uses tokrace's themes the way the race app does."""

    def __init__(self, themes: AppThemes) -> None:
        super().__init__()
        self.themes = themes
        self.notes: list[tuple[str, str, bool]] = []
        themes.install(self)

    def on_mount(self) -> None:
        self.themes.mount(self)

    def notify(self, message: str, *, title: str = "", markup: bool = True, **kwargs: Any) -> None:
        self.notes.append((title, message, markup))


def test_start_theme_is_requested_then_chosen_then_configured_then_default(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    assert AppThemes(settings=settings).start == "tokrace-dark"
    assert AppThemes(settings=settings, configured="tokrace-light").start == "tokrace-light"
    settings.set_theme("tokrace-cb")
    assert AppThemes(settings=settings, configured="tokrace-light").start == "tokrace-cb"
    assert AppThemes(settings=settings, requested="projector").start == "projector"


def test_an_unknown_requested_theme_is_a_one_line_error_listing_the_themes() -> None:
    with pytest.raises(UnknownThemeError, match=r"no theme named 'nope' \(themes: tokrace-dark, projector"):
        AppThemes(requested="nope")


def test_a_chosen_theme_that_is_gone_falls_back_to_the_default_with_a_note(tmp_path: Path) -> None:
    settings = Settings(tmp_path / "settings.json")
    settings.set_theme("deleted")
    themes = AppThemes(settings=settings)
    assert themes.start == "tokrace-dark"
    assert themes.notes == ["the theme 'deleted' chosen last no longer exists; using tokrace-dark"]


def test_the_app_offers_exactly_the_themes_tokrace_lists() -> None:
    write_user_theme("mine.toml", 'name = "mine"\nprimary = "#123456"\n')
    app = ThemedApp(AppThemes())
    assert set(app.available_themes) == {*builtin_themes(), "mine"}
    assert app.theme == "tokrace-dark"


async def test_broken_theme_files_are_reported_in_one_notification_at_start() -> None:
    one = write_user_theme("one.toml", 'name = "one"\n')
    two = write_user_theme("two.toml", 'name = "two"\nprimary = "#123456"\nvariables = 1\n')
    app = ThemedApp(AppThemes())
    async with app.run_test():
        pass
    assert len(app.notes) == 1
    title, message, markup = app.notes[0]
    assert title == "Themes"
    assert f"{one}: primary: missing" in message
    assert f"{two}: line 3: variables: expected a table [variables]" in message
    assert not markup, "paths and TOML are shown as written, never read as Rich markup"


async def test_a_theme_chosen_while_running_is_remembered_but_the_start_theme_is_not() -> None:
    app = ThemedApp(AppThemes(requested="projector"))
    async with app.run_test() as pilot:
        await pilot.pause()
        assert Settings().theme is None
        app.theme = "tokrace-cb"
        await pilot.pause()
    assert Settings().theme == "tokrace-cb"
    assert AppThemes().start == "tokrace-cb"


# The race app


async def choose_in_palette(pilot: Pilot[Any], text: str) -> None:
    """Type ``text`` into the open command palette and take the first match."""
    await pilot.press(*text)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.press("enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_a_theme_chosen_in_the_command_palette_is_used_on_the_next_start() -> None:
    app, _ = demo_app()
    async with app.run_test() as pilot:
        assert app.theme == "tokrace-dark"
        await pilot.press("ctrl+p")
        await choose_in_palette(pilot, "theme")
        await choose_in_palette(pilot, "projector")
        assert app.theme == "projector"
    restarted, _ = demo_app()
    async with restarted.run_test():
        assert restarted.theme == "projector"


async def test_the_race_screen_draws_with_the_themes_colours() -> None:
    write_user_theme("mine.toml", 'name = "mine"\nprimary = "#123456"\n[variables]\nseg-model = "#FF0000"\n')
    Settings().set_theme("mine")
    app, _ = demo_app()
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.theme == "mine"
        assert palette(app).segment("model").color == Color.parse("#FF0000").rich_color
        app.theme = "tokrace-cb"
        await pilot.pause()
        assert palette(app).segment("model").color == Color.parse("#81D5F6").rich_color


def test_an_unknown_theme_on_the_command_line_stops_before_the_screen_opens(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["demo", "--theme", "nope"]) == 2
    assert capsys.readouterr().err.startswith("tokrace: no theme named 'nope' (themes: tokrace-dark, ")


@pytest.mark.parametrize("argv", [["--theme", "projector"], ["demo", "--theme", "projector"],
                                  ["replay", "run.jsonl", "--theme", "projector"]])
def test_every_screen_command_takes_a_theme(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).theme == "projector"


# Thick timeline rows


def rows(*tracks: int) -> list[Row]:
    """Timeline rows with these tracks (0 starts a lane, 1 and 2 are its parallel tool rows)."""
    lane = -1
    out = []
    for track in tracks:
        lane += track == 0
        out.append(Row(lane, track, []))
    return out


@pytest.mark.parametrize(("wanted", "tracks", "screen_height", "height"), [
    (2, (0, 0, 0), 45, 2),
    (2, (0, 0, 0), 28, 2),  # 3 lanes of 2 and the axis: 7 lines, a quarter of 28
    (2, (0, 0, 0), 24, 1),  # 80x24: the lanes, the summary and the footer need the rest
    (3, (0, 0, 0), 28, 2),  # too short for 3, thick enough for 2
    (3, (0, 0, 0), 40, 3),
    (2, (0, 1, 0, 1, 0, 1), 45, 2),  # parallel rows stay one line: 3 * 2 + 3 + 1 = 10
    (2, (0, 1, 0, 1, 0, 1), 36, 1),
    (1, (0, 0, 0), 200, 1),
    (2, (), 24, 2),
])
def test_lanes_are_as_thick_as_the_theme_asks_while_the_timeline_fits_a_quarter_of_the_screen(
        wanted: int, tracks: tuple[int, ...], screen_height: int, height: int) -> None:
    assert fitting_height(wanted, rows(*tracks), screen_height) == height


def lines_of(timeline: Timeline) -> list[str]:
    return [timeline.render_line(y).text for y in range(timeline.size.height)]


async def test_the_projector_theme_draws_every_lane_two_rows_tall() -> None:
    Settings().set_theme("projector")
    app, clock = demo_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await at(pilot, clock, 10.0)
        timeline = app.screen.timeline
        assert app.theme == "projector" and app.theme_variables[ROW_HEIGHT_VARIABLE] == "2"
        assert timeline.row_height == 2
        lines = lines_of(timeline)
        assert len(lines) == 3 * 2 + 1 and timeline.region.height == 3 * 2 + 1 + 1  # and the border above
        names = [tier.name for tier in app.runner.tiers]
        for lane, name in enumerate(names):
            first, second = lines[2 * lane], lines[2 * lane + 1]
            assert first.startswith(name) and "✓" in first and "█" in first
            assert second[:LABEL_WIDTH].strip() == "" and "▀" in second and "✓" not in second
            assert first.index("█") == second.index("▀")  # one bar, two rows tall
        assert "0 s" in lines[-1]


async def test_the_projector_theme_keeps_one_row_per_lane_on_an_80x24_terminal() -> None:
    Settings().set_theme("projector")
    app, clock = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await at(pilot, clock, 10.0)
        timeline = app.screen.timeline
        assert timeline.row_height == 1
        assert timeline.size.height == 3 + 1
        for view in app.screen.views:  # every lane keeps its least height: nothing is cut
            assert view.size.height >= 4


async def test_choosing_a_thick_theme_while_running_grows_the_timeline_and_the_default_shrinks_it() -> None:
    app, clock = demo_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await at(pilot, clock, 10.0)
        timeline = app.screen.timeline
        assert timeline.size.height == 3 + 1
        app.theme = "projector"
        await pilot.pause()
        assert timeline.size.height == 3 * 2 + 1
        assert "▀" in lines_of(timeline)[1]
        app.theme = "tokrace-dark"
        await pilot.pause()
        assert timeline.size.height == 3 + 1
        assert "▀" not in "".join(lines_of(timeline))


def test_every_problem_of_a_file_is_reported_not_only_the_first() -> None:
    # Reported: only the first error of a theme file was reported; fixing it revealed the next, one run at a time.
    path = write_user_theme("many.toml", 'primary = "blu"\nprimay = "#123456"\ntext_alpha = 2\n'
                                         '[variables]\nlane0 = "#FFFFFF"\nseg-tool = "orangey"\n')
    (problem,) = load_themes().problems
    assert problem.path == path and "\n" not in problem.problem
    for part in ("name: missing", "line 1: primary: failed to parse 'blu'", "line 2: primay: unknown key",
                 "line 3: text_alpha: expected a number", "line 5: lane0: unknown variable",
                 "line 6: seg-tool: failed to parse"):
        assert part in problem.problem, part
