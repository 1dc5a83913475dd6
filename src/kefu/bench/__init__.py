"""``kefu bench``: customer-service load testing of kefu's /chat or any OpenAI-compatible server.

Modules, from the bottom up: ``record`` (one request's raw timestamps), ``metrics`` and
``slo`` (pure maths), ``knee`` (the overload rule), ``workload`` and ``pools`` (simulated
customers), ``sse`` (stream parsing), ``client`` (HTTP), ``load`` (users and arrivals),
``runner`` (levels of a run), ``report``, ``plots``, ``html``, ``compare`` (output), and
``command`` (the argparse front end). Only ``client`` and ``runner`` do network I/O.
"""
