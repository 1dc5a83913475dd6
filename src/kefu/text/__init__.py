"""Text below every package that reads it: the one normaliser, words and tokens, the
entities (numbers, ids, places, names, negations), order numbers, and ``Message``,
a customer's message read once. Of kefu it imports only ``plugins``, which finds its
language packs."""
