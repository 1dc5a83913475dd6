"""kefu (客服): a latency-first LLM customer-service server."""

__version__ = "0.1.0"
