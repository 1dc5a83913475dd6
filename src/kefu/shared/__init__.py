"""State shared by every replica through Redis (``--redis``): the client, the session
store, keys, limits, session locks and live session events."""
