"""The built-in offline demo: synthetic tiers modelled on the launch figures of GPT-5.6 Sol Ultrafast.

Standard Sol streams about 750/14 ≈ 54 tok/s at $5 / $30 per million tokens; priority about twice that;
Ultrafast up to 750 tok/s (price unpublished, so left empty rather than guessed). Re-timing a trace adds input
tokens ÷ ``prefill_tok_s`` to the TTFT: 40,000 input tokens a second on standard, twice that on priority and
400,000 on ultrafast, assumed (no figure is published) so a long context costs time (docs/traces.md).
"""

from __future__ import annotations

from typing import Final

from ..model.tiers import Price, TierSpec

DEMO_PROMPT: Final[str] = (
    "Our coding agent makes about 30 model calls per task, plus test runs and a human review. "
    "If we move it to a tier that streams 14x faster, how much sooner does a task finish? "
    "Explain why the bottleneck moves when the model gets fast."
)
"""The demo's prompt: the question tokrace exists to answer."""

DEMO_MAX_TOKENS: Final[int] = 400


def demo_tiers() -> list[TierSpec]:
    """Standard, priority and ultrafast Sol, as synthetic profiles (seeded, so every demo is the same)."""
    return [
        TierSpec(name="Sol standard", provider="synthetic", model="gpt-5.6-sol", service_tier="default",
                 price=Price(input=5.0, output=30.0),
                 options={"ttft_ms": 1000, "tok_s": 750 / 14, "prefill_tok_s": 40_000, "jitter": 0.15, "seed": 1}),
        TierSpec(name="Sol priority", provider="synthetic", model="gpt-5.6-sol", service_tier="priority",
                 options={"ttft_ms": 600, "tok_s": 2 * 750 / 14, "prefill_tok_s": 80_000, "jitter": 0.12, "seed": 2}),
        TierSpec(name="Sol ultrafast", provider="synthetic", model="gpt-5.6-sol", service_tier="ultrafast",
                 options={"ttft_ms": 180, "tok_s": 750, "prefill_tok_s": 400_000, "jitter": 0.1, "seed": 3,
                          "tokens_per_event": 3}),
    ]
