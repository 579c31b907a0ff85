"""Layer 4, adapters: the provider interface, the synthetic and replay providers, the HTTP ones, and the registry."""
