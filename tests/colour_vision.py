"""Colour science for the theme tests: simulated colour-vision deficiency and CIEDE2000 colour difference.

Dichromacy is simulated with the matrices of Machado, Oliveira and Fernandes (2009) at severity 1.0, applied
in linear sRGB; differences are CIEDE2000 (Sharma, Wu and Dalal 2005) between CIELAB colours under D65.
"""

from __future__ import annotations

import math
from typing import Final

RGB = tuple[float, float, float]
Lab = tuple[float, float, float]
Matrix = tuple[RGB, RGB, RGB]

MACHADO: Final[dict[str, Matrix]] = {
    "protanopia": ((0.152286, 1.052583, -0.204868),
                   (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968),
                     (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
}
"""Machado et al. 2009, severity 1.0: linear sRGB in, linear sRGB out."""

_D65: Final[RGB] = (0.95047, 1.0, 1.08883)


def _to_linear(channel: float) -> float:
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


def _to_gamma(channel: float) -> float:
    channel = min(1.0, max(0.0, channel))
    return channel * 12.92 if channel <= 0.0031308 else 1.055 * channel ** (1 / 2.4) - 0.055


def hex_to_linear(text: str) -> RGB:
    """``#RRGGBB`` as linear sRGB in 0..1."""
    text = text.lstrip("#")
    r, g, b = (int(text[i:i + 2], 16) / 255 for i in (0, 2, 4))
    return _to_linear(r), _to_linear(g), _to_linear(b)


def simulate(text: str, deficiency: str) -> RGB:
    """What a dichromat with ``deficiency`` sees of ``#RRGGBB``, as linear sRGB clipped to the gamut."""
    rgb = hex_to_linear(text)
    matrix = MACHADO[deficiency]
    out = tuple(sum(m * c for m, c in zip(row, rgb, strict=True)) for row in matrix)
    r, g, b = (_to_linear(_to_gamma(c)) for c in out)
    return r, g, b


def linear_to_lab(rgb: RGB) -> Lab:
    """Linear sRGB to CIELAB (D65)."""
    r, g, b = rgb
    x = 0.4124564 * r + 0.3575761 * g + 0.1804375 * b
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = 0.0193339 * r + 0.1191920 * g + 0.9503041 * b

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x / _D65[0]), f(y / _D65[1]), f(z / _D65[2])
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(lab1: Lab, lab2: Lab) -> float:
    """The CIEDE2000 difference between two CIELAB colours (kL = kC = kH = 1)."""
    l1, a1, b1 = lab1
    l2, a2, b2 = lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar ** 7 / (c_bar ** 7 + 25 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dl = l2 - l1
    dc = c2p - c1p
    if c1p * c2p == 0:
        dh = 0.0
    elif abs(h2p - h1p) <= 180:
        dh = h2p - h1p
    elif h2p - h1p > 180:
        dh = h2p - h1p - 360
    else:
        dh = h2p - h1p + 360
    dh_big = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    l_bar = (l1 + l2) / 2
    cp_bar = (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_bar = (h1p + h2p) / 2
    elif h1p + h2p < 360:
        h_bar = (h1p + h2p + 360) / 2
    else:
        h_bar = (h1p + h2p - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_bar - 30)) + 0.24 * math.cos(math.radians(2 * h_bar))
         + 0.32 * math.cos(math.radians(3 * h_bar + 6)) - 0.20 * math.cos(math.radians(4 * h_bar - 63)))
    d_theta = 30 * math.exp(-(((h_bar - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(cp_bar ** 7 / (cp_bar ** 7 + 25 ** 7))
    s_l = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    s_c = 1 + 0.045 * cp_bar
    s_h = 1 + 0.015 * cp_bar * t
    r_t = -math.sin(math.radians(2 * d_theta)) * r_c
    return math.sqrt((dl / s_l) ** 2 + (dc / s_c) ** 2 + (dh_big / s_h) ** 2
                     + r_t * (dc / s_c) * (dh_big / s_h))


def difference(colour1: str, colour2: str, deficiency: str | None = None) -> float:
    """CIEDE2000 between two ``#RRGGBB`` colours as seen with normal vision, or by a dichromat."""
    def lab(colour: str) -> Lab:
        return linear_to_lab(hex_to_linear(colour) if deficiency is None else simulate(colour, deficiency))

    return ciede2000(lab(colour1), lab(colour2))


def contrast_ratio(colour1: str, colour2: str) -> float:
    """The WCAG 2 contrast ratio between two ``#RRGGBB`` colours (1 to 21)."""
    def luminance(text: str) -> float:
        r, g, b = hex_to_linear(text)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(colour1), luminance(colour2)), reverse=True)
    return (high + 0.05) / (low + 0.05)
