"""llama-cpp-python's own OpenAI server as the tests' upstream and the benchmarks' baseline.

It needs the one patch this machine needs: models load without the extra (AMX/repack)
buffer types, which crash in this VM. Run it as ``python -c LLAMA_SERVER_WITH_AMX_FIX ARGS``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def without_extra_buffers() -> Iterator[None]:
    """Models llama-cpp-python loads meanwhile skip the extra (AMX/repack) buffer types,
    as kefu's own engine does (``LlamaModel``).

    ``Llama.__init__`` builds its model params from ``llama_model_default_params()`` and
    has no argument for this field (extra keyword arguments are swallowed), so the only
    way in is to patch that function while the model loads.
    """
    import llama_cpp.llama_cpp as lib

    default_params = lib.llama_model_default_params

    def no_repack() -> Any:
        params = default_params()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = no_repack
    try:
        yield
    finally:
        lib.llama_model_default_params = default_params


LLAMA_SERVER_WITH_AMX_FIX = """
import sys
from llama_cpp.server.__main__ import main
from kefu.engine.llamacpp.stock_server import without_extra_buffers
sys.argv = ["llama_cpp.server", *sys.argv[1:]]
with without_extra_buffers():
    main()
"""
