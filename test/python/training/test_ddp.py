"""DistributedDataParallel over a compiled model on the CPU (gloo): two
ranks, each on half the batch, end N SGD steps with the same parameters as
one process on the full batch, for 90% CSR, 2:4 and 2:4 runtime pruning.

Rank 1 starts from other weights than rank 0: DDP's broadcast at
construction must replace them, stored values included (the region's dense
copies and dx's W^T then follow them). The ranks are subprocesses running
this file (`python test_ddp.py --rank r ...`), bounded in time; the
single-process run happens first in the test's own process, which also puts
every kernel the ranks need into the disk cache."""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import sparse_mlir as sm

WORLD = 2
STEPS = 5
BATCH = 16   # the ranks take 8 each
TIMEOUT_S = 60
CASES = ("csr90", "nm24", "nm24-runtime")


def _encoding(case: str) -> sm.Encoding:
    return sm.CSR(sparsifier=sm.ScalarFraction(0.9)) if case == "csr90" else sm.NM(2, 4)


class Net(torch.nn.Module):
    """Two encoded linears around a dense one (which DDP averages as any parameter)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(32, 64)
        self.mid = torch.nn.Linear(64, 64)
        self.down = torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.mid(torch.nn.functional.gelu(self.up(x)))))


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, 32, generator=generator), torch.randn(BATCH, 16, generator=generator)


def _compiled(case: str, example: torch.Tensor) -> torch.nn.Module:
    torch.manual_seed(0)   # every process builds the same model
    update = sm.MaskUpdate(every=1) if case == "nm24-runtime" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sm.SparseFallbackWarning)
        fn = sm.compile(Net(), {"up.weight": _encoding(case), "down.weight": _encoding(case)}, (example,),
                        mode="regions", cost_model=False, mask_update=update)
    return fn.train()


def _train(model: torch.nn.Module, parameters, x: torch.Tensor, target: torch.Tensor) -> list[float]:
    optimizer = torch.optim.SGD(parameters, lr=0.05, momentum=0.9)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _result(fn: torch.nn.Module, x: torch.Tensor, losses: list[float]) -> dict:
    parameters = {name: p.detach().clone() for name, p in fn.named_parameters()}
    effective = fn.effective_state_dict()
    fn.eval()
    with torch.no_grad():
        output = fn(x)   # the kernels read the trained values
    return dict(parameters=parameters, effective=effective, output=output, losses=losses)


def _rank(rank: int, port: int, out: Path) -> None:
    """One DDP rank: every case on its half of the batch."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    x, target = _data()
    shard = slice(rank * BATCH // WORLD, (rank + 1) * BATCH // WORLD)
    results = {}
    for case in CASES:
        fn = _compiled(case, x[shard])
        if rank == 1:   # other starting weights: DDP's broadcast replaces them with rank 0's
            with torch.no_grad():
                for parameter in fn.parameters():
                    parameter.mul_(1.5)
        model = DistributedDataParallel(fn)
        losses = _train(model, model.parameters(), x[shard], target[shard])
        results[case] = _result(fn, x, losses)
    torch.save(results, out / f"rank{rank}.pt")
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[dict, list[dict]]:
    """(single-process results, each rank's) for every case."""
    x, target = _data()
    single = {}
    for case in CASES:
        fn = _compiled(case, x)
        single[case] = _result(fn, x, _train(fn, fn.parameters(), x, target))
        # The ranks' shapes (half the batch, forward and dx): kernels into the disk cache.
        half = _compiled(case, x[:BATCH // WORLD])
        half(x[:BATCH // WORLD]).sum().backward()
    out = tmp_path_factory.mktemp("ddp")
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ranks = [subprocess.Popen([sys.executable, __file__, "--rank", str(rank), "--port", str(port), "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for rank in range(WORLD)]
    logs = []
    try:
        for proc in ranks:
            logs.append(proc.communicate(timeout=TIMEOUT_S)[0])
    except subprocess.TimeoutExpired:
        for proc in ranks:
            proc.kill()
        pytest.fail(f"DDP ranks did not finish in {TIMEOUT_S} s")
    for rank, (proc, log) in enumerate(zip(ranks, logs)):
        assert proc.returncode == 0, f"rank {rank} failed:\n{log}"
    return single, [torch.load(out / f"rank{rank}.pt") for rank in range(WORLD)]


@pytest.mark.parametrize("case", CASES)
def test_ddp_matches_one_process_on_the_full_batch(runs, case):
    single, ranks = runs
    expected = single[case]
    for rank, result in enumerate(ranks):
        ours = result[case]
        assert list(ours["parameters"]) == list(expected["parameters"])
        for name, parameter in ours["parameters"].items():
            torch.testing.assert_close(parameter, expected["parameters"][name], rtol=1e-5, atol=1e-6,
                                       msg=lambda m: f"rank {rank}, {name}: {m}")
        for name, weight in ours["effective"].items():
            torch.testing.assert_close(weight, expected["effective"][name], rtol=1e-5, atol=1e-6)
            if case != "nm24-runtime":   # fixed masks: the compile-time one stayed
                assert torch.equal(weight != 0, expected["effective"][name] != 0)
        torch.testing.assert_close(ours["output"], expected["output"], rtol=1e-5, atol=1e-5)
    # The mean of the two half-batch losses is the full batch's (the broadcast took: same weights).
    mean = [(a + b) / 2 for a, b in zip(ranks[0][case]["losses"], ranks[1][case]["losses"])]
    assert mean == pytest.approx(expected["losses"], rel=1e-5)
    assert expected["losses"][-1] < expected["losses"][0]   # it trained


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args()
    _rank(options.rank, options.port, options.out)
