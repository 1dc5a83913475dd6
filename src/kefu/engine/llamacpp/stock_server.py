"""llama-cpp-python's own OpenAI server as the tests' upstream and the benchmarks' baseline.

It needs the one patch this machine needs: models load without the extra (AMX/repack)
buffer types, which crash in this VM. Run it as ``python -c LLAMA_SERVER_WITH_AMX_FIX ARGS``.
"""

LLAMA_SERVER_WITH_AMX_FIX = """
import sys
import llama_cpp.llama_cpp as lib
_default = lib.llama_model_default_params
def _no_repack():
    params = _default()
    params.use_extra_bufts = False
    return params
lib.llama_model_default_params = _no_repack
from llama_cpp.server.__main__ import main
sys.argv = ["llama_cpp.server", *sys.argv[1:]]
main()
"""
