"""Masking secrets: URLs, values, base64 (Basic-auth) forms, key shapes; never code or prose that merely looks
a little like them."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.events import Delta, Error, Extra, Request
from providers.masking import MASK, Masker, base64_forms, mask_url, redact, url_has_userinfo, url_secrets

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
