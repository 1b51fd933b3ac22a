"""The CPU build's expand kernel, corrected: by hand, and inside vLLM's own rejection sampler.

vLLM's ``expand_batch_to_tokens`` spreads each request's temperature over its draft tokens; on the
CPU build its stand-in leaves the float output unwritten. Each vLLM check runs in a fresh Python
process, since vLLM's kernel registry is process-wide.
"""

import json
import subprocess
import sys

import pytest
import torch

from speclab.vllm_layer import vllm_cpu_fixes, vllm_features


def test_expand_by_hand():
    # three requests with 2, 0 and 3 draft tokens; 0 (vLLM's mark of a greedy request) reads as 1
    out = torch.full((5,), 9.0, dtype=torch.float32)
    vllm_cpu_fixes.expand(out, torch.tensor([0.5, 0.7, 0.0]), torch.tensor([2, 2, 5], dtype=torch.int32), 0, 1)
    assert out.tolist() == [0.5, 0.5, 1.0, 1.0, 1.0]
    top_k = torch.zeros(4, dtype=torch.int32)
    vllm_cpu_fixes.expand(top_k, torch.tensor([5, 7], dtype=torch.int32), torch.tensor([1, 4]), 0, 0)
    assert top_k.tolist() == [5, 7, 7, 7] and top_k.dtype == torch.int32


PROBE = """
import json, sys
import torch
from vllm.platforms import current_platform
current_platform.import_kernels()  # the CPU ops built for this processor (vllm._C needs AVX-512; AVX2 has its own)
if sys.argv[1] == "fixed":
    from speclab.vllm_layer import vllm_cpu_fixes
    assert vllm_cpu_fixes.install()
current_platform.register_triton_kernel_overrides()
from vllm.v1.sample import rejection_sampler as rs
out = rs.expand_batch_to_tokens(torch.tensor([0.5, 1.5, 0.0]), torch.tensor([3, 4, 6], dtype=torch.int64), 6,
                                replace_from=rs.GREEDY_TEMPERATURE, replace_to=1)
print(json.dumps(out.tolist()))
"""


def expanded(mode: str) -> list[float]:
    proc = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not vllm_features.is_cpu_build(), reason="vLLM's CPU build only")
def test_vllms_sampler_spreads_temperatures_with_the_fix():
    assert expanded("fixed") == [0.5, 0.5, 0.5, 1.5, 1.0, 1.0]


@pytest.mark.skipif(not vllm_features.is_cpu_build(), reason="vLLM's CPU build only")
def test_without_the_fix_the_cpu_build_leaves_them_unwritten():
    """If this fails, the installed vLLM has mended its stand-in, and the fix can go."""
    assert expanded("as shipped") != [0.5, 0.5, 0.5, 1.5, 1.0, 1.0]


ONCE_PROBE = """
import json
from vllm.platforms import current_platform
current_platform.import_kernels()
from speclab.vllm_layer import vllm_cpu_fixes
assert vllm_cpu_fixes.register_kernels_once() and vllm_cpu_fixes.register_kernels_once()  # idempotent
from vllm.v1.worker import block_table
current_platform.register_triton_kernel_overrides()
first = block_table.ComputeSlotMappingKernel.kernel
current_platform.register_triton_kernel_overrides()  # a second engine in this process
print(json.dumps([type(first).__name__, block_table.ComputeSlotMappingKernel.kernel is first]))
"""


@pytest.mark.skipif(not vllm_features.is_cpu_build(), reason="vLLM's CPU build only")
def test_a_second_engine_in_one_process_keeps_the_first_kernel_registration():
    proc = subprocess.run([sys.executable, "-c", ONCE_PROBE], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["KernelOverride", True]
