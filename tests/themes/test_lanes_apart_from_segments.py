"""A lane's colour never stands for a segment kind: in every built-in theme each lane colour stays at least 15
CIEDE2000 from each segment colour, and in tokrace-cb also as a dichromat sees them (issue 11)."""

from __future__ import annotations

import pytest
from colour_vision import contrast_ratio, difference

from tokrace.themes.loader import LANE_VARIABLES, SEGMENT_VARIABLES, builtin_themes

BUILTINS = tuple(builtin_themes())
LANE_SEGMENT_MIN_DELTA_E = 15.0


def closest_lane_and_segment(name: str, vision: str | None) -> tuple[float, str, str]:
    variables = builtin_themes()[name].variables
    return min((difference(variables[lane], variables[seg], vision), lane, seg)
               for lane in LANE_VARIABLES for seg in SEGMENT_VARIABLES)


def test_every_built_in_theme_is_checked() -> None:
    assert {"tokrace-dark", "tokrace-light", "projector", "tokrace-cb"} <= set(BUILTINS)


@pytest.mark.parametrize("name", BUILTINS)
def test_lane_colours_stay_apart_from_segment_colours(name: str) -> None:
    delta, lane, seg = closest_lane_and_segment(name, None)
    assert delta >= LANE_SEGMENT_MIN_DELTA_E, f"{name}: {lane} and {seg} are only {delta:.1f} apart"


@pytest.mark.parametrize("vision", ["deuteranopia", "protanopia"])
def test_colour_blind_lane_colours_stay_apart_from_segment_colours_under_dichromacy(vision: str) -> None:
    delta, lane, seg = closest_lane_and_segment("tokrace-cb", vision)
    assert delta >= LANE_SEGMENT_MIN_DELTA_E, f"{vision}: {lane} and {seg} are only {delta:.1f} apart"


@pytest.mark.parametrize("name", BUILTINS)
def test_lane_names_stay_readable_on_the_background(name: str) -> None:
    theme = builtin_themes()[name]
    assert theme.background is not None
    for lane in LANE_VARIABLES:
        assert contrast_ratio(theme.variables[lane], theme.background) >= 4.5, f"{name}: {lane}"
