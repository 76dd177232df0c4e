import subprocess
import sys

import pytest

# A fresh interpreter each time: the point is what `import torch` already did to CUDA.
COUNT = "import torch; print(torch.cuda.device_count())"
AFTER_IMPORT = (
    "import torch\n"
    "from tinytrain.device import select_device\n"
    "select_device('cpu')  # sets CUDA_VISIBLE_DEVICES after import torch\n"
    "print(torch.cuda.device_count())\n"
)


def _run(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_cuda_visible_devices_set_after_import_torch_is_honoured():
    if _run(COUNT) == "0":
        pytest.skip("no CUDA device: this check needs a GPU runner")
    assert _run(AFTER_IMPORT) == "0", "CUDA_VISIBLE_DEVICES set after `import torch` was ignored"
