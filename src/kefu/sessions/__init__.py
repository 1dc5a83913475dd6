"""What one process keeps of a session while it is being answered: the lock that serialises
its turns, the agents' claims on it and its live events. Below service/, which uses them,
and shared/, which keeps the same across replicas in Redis (``--redis``)."""
