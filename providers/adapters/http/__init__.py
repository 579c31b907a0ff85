"""The HTTP providers: SSE parsing, the socket-stamped transport, the shared streaming provider, and one
adapter per protocol (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages), with server presets."""
