"""PyTorch's own distributed suite (TestDistBackend with DistributedTest._DistTestBase, as torch's
test/distributed/test_distributed_spawn.py runs it for gloo), for the backend named by BACKEND.

run.sh runs it for "coll" and for Gloo registered as a plugin under another name ("gloo_plugin",
sitecustomize.py), so that both meet the same tests: torch enables some only for the names
"gloo" and "nccl"."""

import os
import sys

from torch.testing._internal.common_utils import run_tests
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend

assert os.environ.get("BACKEND"), "set BACKEND (run.sh does)"


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    run_tests()
