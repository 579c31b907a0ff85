"""Layer 4, adapters: the provider interface, the synthetic and replay providers, the HTTP ones, and the registry.

Other layers import the adapter API from here; the adapters themselves load only when a tier asks for one.
"""

from .base import Provider
from .registry import FACTORIES, create_provider, known_providers, provider_options

__all__ = ["FACTORIES", "Provider", "create_provider", "known_providers", "provider_options"]
