"""State shared by every replica through Redis (``--redis``): the client, keys, limits,
session locks and live session events. The session store itself is ``store/redis.py``."""
