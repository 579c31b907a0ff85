"""Masking secrets: URLs, values, base64 (Basic-auth) forms, key shapes; never code or prose that merely looks
a little like them."""

from __future__ import annotations

import base64
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokrace.providers.model import masking
from tokrace.providers.model.events import Delta, Error, Extra, Request
from tokrace.providers.model.masking import (
    MASK,
    Masker,
    base64_forms,
    mask_url,
    redact,
    url_has_userinfo,
    url_secrets,
)

SECRET = "s3cr3t-Value-0123456789"


@pytest.mark.parametrize(("url", "shown"), [
    ("https://api.example.com/v1", "https://api.example.com/v1"),
    ("https://h/v1?key=abc123&x=1", f"https://h/v1?key={MASK}&x=1"),
    ("https://h/v1?api_key=abc&token=def&sig=ghi&mode=fast", f"https://h/v1?api_key={MASK}&token={MASK}&sig={MASK}"
                                                             "&mode=fast"),
    ("https://h/v1?X-Amz-Signature=abc&X-Amz-Date=1", f"https://h/v1?X-Amz-Signature={MASK}&X-Amz-Date=1"),
    ("http://user:pw@h:8080/v1", f"http://{MASK}@h:8080/v1"),
])
def test_a_url_is_shown_with_its_secrets_masked_and_nothing_else_changed(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_userinfo_and_secret_parameters_are_found() -> None:
    assert url_has_userinfo("http://u:p@h/v1") and not url_has_userinfo("http://h/v1?a=b@c")
    assert url_secrets(f"http://u:{SECRET}@h/v1?key={SECRET}2&q=plain") == [f"{SECRET}2", SECRET]


@pytest.mark.parametrize("before", ["", "u", "us", "user:", "a much longer user name:"])
def test_the_base64_forms_of_a_secret_hide_it_whatever_came_before(before: str) -> None:
    encoded = base64.b64encode(f"{before}{SECRET}".encode()).decode()
    masked = redact(encoded, base64_forms(SECRET))
    prefix, _, suffix = masked.partition(MASK)
    readable = base64.b64decode(prefix[: len(prefix) // 4 * 4])
    assert MASK in masked and SECRET[:4].encode() not in readable
    assert len(suffix) <= 4  # only the padding and the last characters, which the secret shares with what follows


@pytest.mark.parametrize("text", ["pk_user_id_2023_field_name", "or_more_than_100_tokens", "a basic understanding",
                                  "hf_model_name_v2", "key = value", "the token budget is 4096",
                                  "https://example.com/search?q=rust&page=2"])
def test_code_and_prose_are_left_alone(text: str) -> None:
    assert redact(text, ()) == text


@pytest.mark.parametrize("text", ["sk-proj-abcdEFGH1234ijklMNOP", "Authorization: Bearer abc123def456ghi",
                                  "Basic dXNlcjpzay0xMjM0NTY3OA==", "gsk_abcdefghij0123456789abcd",
                                  "AIzaSyA1234567890abcdefghijklmnopqrstu"])
def test_credential_shapes_are_masked(text: str) -> None:
    assert MASK in redact(text, ())


def test_a_masker_masks_every_text_field_a_server_can_fill() -> None:
    masker = Masker([SECRET])
    assert masker(Delta(t=1.0, text=f"echo {SECRET}")).text == f"echo {MASK}"  # type: ignore[union-attr]
    assert SECRET not in masker(Error(t=1.0, error="http", message=SECRET)).message  # type: ignore[union-attr]
    assert SECRET not in masker(Request(t=0.0, endpoint=f"https://h/v1?key={SECRET}")).endpoint  # type: ignore[union-attr]
    extra = masker(Extra(t=1.0, source="x", data={"a": [SECRET, 1]}))
    assert extra.data == {"a": [MASK, 1]}  # type: ignore[union-attr]
    untouched = Delta(t=1.0, text="nothing here")
    assert masker(untouched) is untouched
    assert Masker([], shapes=False)(Delta(t=1.0, text="sk-proj-abcdEFGH1234ijklMNOP")).text.startswith("sk-")  # type: ignore[union-attr]


@settings(max_examples=100, deadline=None)
@given(before=st.text(max_size=30), after=st.text(max_size=30))
def test_a_known_secret_never_survives_masking_whatever_surrounds_it(before: str, after: str) -> None:
    assert SECRET not in redact(before + SECRET + after, [SECRET])


def _redact_every_check(text: str) -> str:
    """``redact`` as it was before its one-search gate: every check tried on every text."""
    lowered = text.lower()
    if any(w in lowered for w in masking._CREDENTIAL_WORDS) or any(c in text for c in masking._I_LOOKALIKES):
        for pattern in masking._CREDENTIALS:
            text = pattern.sub(rf"\g<1>\g<2>{MASK}", text)
    if any(hint in text for hint in masking._KEY_PREFIX_HINTS):
        text = masking._KEY_SHAPE.sub(MASK, text)
    if "://" in text or "=" in text:
        text = mask_url(text)
    return text


_TRICKY = st.sampled_from(["API", "aPi", "BeArEr ", "BASIC ", "authoriZATION: ", "İ", "ı", "K", "sk-", "sk_", "gh",
                           "AIza", "aiza", "hf_", "=", "://", "Bearer abc123def456ghi", "sk-proj-abcdEFGH1234ijkl",
                           "x", " ", "0", "?key=v", "ſ", "ß"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(_TRICKY, st.text(max_size=6)), max_size=8))
def test_the_one_search_gate_masks_exactly_what_every_check_would(parts: list[str]) -> None:
    text = "".join(parts)
    assert redact(text, ()) == _redact_every_check(text)


@pytest.mark.parametrize("text", [" streams", " fifty", " tokens", ",", "\n\n", "When"])
def test_plain_streamed_pieces_come_back_as_they_were(text: str) -> None:
    assert redact(text, ()) is text



_PIECES = ["When a model streams", " fifty tokens", " ask", " through", " rapid", " Basic ", "baſic ", "BEARER ",
           "Authorization: ", "apİ", "ı", "K", " sk-proj-", "abcDEF0123456789xyzXYZ", "gsk_", "hf_", "AIza", "gh",
           "https://u:p@h/x?key=", "a=b", ":/", "/", "\n", " 12345678", "x-api-key=", "token ", "s3cr3t-Value"]
_OLD_TRIGGERS = re.compile("(?i:authorization|api|bearer|basic)|[\u0130\u0131]|sk|fw_|csk-|xai-|pplx-|nvapi-|glpat-"
                           "|gh|hf_|AIza|://|=")


def _redact_as_before(text: str, secrets: list[str]) -> str:
    """:func:`redact` as it was: one search of every trigger let a text through, else every check ran."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text if _OLD_TRIGGERS.search(text) is None else _redact_every_check(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12))
def test_redact_lets_text_through_by_substring_scans_and_masks_as_before(parts: list[str]) -> None:
    """Most text is let through by substring scans, not a search of every trigger: every text, let through or
    not (lookalikes of a trigger's letters included), is masked exactly as before."""
    text = "".join(parts)
    assert redact(text, ["s3cr3t-Value"]) == _redact_as_before(text, ["s3cr3t-Value"])


@pytest.mark.parametrize("shapes", [True, False])
def test_deltas_handed_over_together_are_masked_as_one_at_a_time(shapes: bool) -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"
    rng = random.Random(4)
    words = [" the", " fox", ",", secret, " api_key=hunter2", " https://u:p@h.io/x?token=q", " é", "",
             " password: swordfish", secret[:8], " ok"] + [f" w{i}" for i in range(masking.CLEAN_TEXTS_KEPT + 50)]
    masker = Masker([secret], shapes=shapes)
    alone = Masker([secret], shapes=shapes)
    for _ in range(60):  # the same texts again and again (remembered as clean), new ones past the limit
        deltas = [Delta(0.1, rng.choice(words[:11]) if rng.random() < 0.7 else rng.choice(words), "content")
                  for _ in range(rng.randint(1, 400))]
        together = masker.deltas(deltas)
        assert list(together) == [alone(d) for d in deltas]
        assert all(secret not in d.text for d in together)
        if all(alone(d) is d for d in deltas):
            assert together is deltas  # nothing masked: the same list, no copy


@pytest.mark.parametrize("hint", ["", "API", "Authorization", "bEaReR", "basic", "\u0130", "\u0131", "sk", "AIza",
                                  "hf_", "://", "=", "nothing"])
def test_a_long_text_is_searched_for_hints_in_place_as_a_short_one_is_lower_cased(hint: str) -> None:
    from tokrace.providers.model.masking import LONG_TEXT_CHARS, shapes_free

    short = "some words " + hint + " more"
    long = "y" * LONG_TEXT_CHARS + short
    assert shapes_free(long) == shapes_free(short)


@pytest.mark.parametrize("hint", ["Authorization", "bEaReR", "\u0130", "nvapi-", "AIza", "://", "="])
def test_a_hint_cut_by_a_long_texts_window_is_still_found(hint: str) -> None:
    """A long text is looked at a window at a time (the one regular expression of every hint took half a second
    for a 4 MB answer): a hint across a window's end, at every cut, is found as in a short text."""
    from tokrace.providers.model.masking import LONG_TEXT_CHARS, shapes_free

    for cut in range(len(hint) + 1):
        text = "y" * (LONG_TEXT_CHARS - cut) + hint + "y" * LONG_TEXT_CHARS
        assert not shapes_free(text), (hint, cut)
    assert shapes_free("y" * (3 * LONG_TEXT_CHARS + 5))
