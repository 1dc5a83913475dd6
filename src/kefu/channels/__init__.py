"""Channels: a platform's message becomes a /chat turn, the turn's answer the platform's
reply, on the platform's own clock and with its retries de-duplicated."""
