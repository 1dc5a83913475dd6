"""Long conversations: the context builder, which fits a turn's prompt to its
budget by leaving the oldest turns out, and what a session keeps of the turns that left."""
