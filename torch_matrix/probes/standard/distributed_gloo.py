"""torch.distributed on loopback: gloo world size 2, all_reduce and one DDP step; NCCL where GPUs are present."""

from torch_matrix.probes.api import Fail, Unsupported, probe
from torch_matrix.probes.standard._util import free_port, run_in_children

REPRO = """import datetime, torch, torch.distributed as dist, torch.multiprocessing as mp
def worker(rank, port):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=30))
    t = torch.tensor([rank + 1.0]); dist.all_reduce(t); print(rank, t.item())   # 3.0
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    model(torch.randn(2, 4) + rank).sum().backward(); print(rank, model.module.weight.grad.sum().item())
    dist.destroy_process_group()
if __name__ == "__main__":
    mp.spawn(worker, args=(29512,), nprocs=2)
"""


def worker(backend, rank, world_size, port):
    """One rank: init, all_reduce, one DDP step; returns what the parent compares across ranks."""
    import datetime

    import torch
    import torch.distributed as dist

    device = "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = "cuda:%d" % rank
    dist.init_process_group(
        backend,
        init_method="tcp://127.0.0.1:%d" % port,
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=30),
    )
    try:
        value = torch.tensor([rank + 1.0], device=device)
        dist.all_reduce(value)
        torch.manual_seed(0)
        layer = torch.nn.Linear(4, 2).to(device)
        model = torch.nn.parallel.DistributedDataParallel(
            layer, device_ids=[rank] if backend == "nccl" else None
        )
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(100 + rank)  # different data on each rank: DDP must average the gradients
        model(torch.randn(3, 4, device=device)).pow(2).sum().backward()
        optimizer.step()
        dist.barrier()
        return {
            "all_reduce": float(value.item()),
            "weight": model.module.weight.detach().cpu().flatten().tolist(),
        }
    finally:
        dist.destroy_process_group()


def run_backend(backend, world_size, start_method):
    """Run ``world_size`` ranks with one retry on a fresh port (a free port can be taken between pick and bind)."""
    results = None
    for _ in range(2):
        port = free_port()
        results = run_in_children(
            worker,
            [[backend, rank, world_size, port] for rank in range(world_size)],
            timeout=150 if start_method == "spawn" else 45,
            start_method=start_method,
        )
        if all(kind == "ok" for kind, _ in results):
            return results, port
        if not any("address already in use" in str(detail).lower() for _, detail in results):
            break
    return results, None


def check(backend, world_size, results):
    problems = [
        ("rank %d" % rank, kind, str(detail)[:600])
        for rank, (kind, detail) in enumerate(results)
        if kind != "ok"
    ]
    if problems:
        raise Fail(
            "%s process group failed" % backend,
            observed=problems,
            expected="every rank reports",
            repro=REPRO,
        )
    expected_sum = float(sum(range(1, world_size + 1)))
    reduced = [detail["all_reduce"] for _, detail in results]
    if any(value != expected_sum for value in reduced):
        raise Fail(
            "%s all_reduce gave the wrong sum" % backend,
            observed=reduced,
            expected=expected_sum,
            repro=REPRO,
        )
    weights = [detail["weight"] for _, detail in results]
    if any(max(abs(a - b) for a, b in zip(weights[0], other)) > 1e-6 for other in weights[1:]):
        raise Fail(
            "%s DDP step left ranks with different weights" % backend,
            observed=weights,
            expected="identical weights on every rank",
            repro=REPRO,
        )
    return {"world_size": world_size, "all_reduce": reduced[0]}


@probe(
    "distributed_gloo",
    doc="init_process_group(gloo) world size 2 on loopback: all_reduce and one DDP step "
    "agree; NCCL too where GPUs are present",
    timeout=330,
)
def distributed_gloo(ctx):
    import torch
    import torch.distributed as dist

    if not dist.is_available():
        raise Unsupported("torch.distributed is not available in this build")
    if hasattr(dist, "is_gloo_available") and not dist.is_gloo_available():
        raise Unsupported("this build has no gloo backend")
    # Forking is cheap (torch is already imported); CUDA ranks need spawn, CUDA cannot be forked.
    results, port = run_backend("gloo", 2, None)
    facts = {"gloo_port": port}
    if any(kind in ("timeout", "died") for kind, _ in results):
        # Ranks forked from this already-initialised interpreter can hang where a user's own
        # ranks (mp.spawn, torchrun: fresh interpreters) do not; seen with pip's 2.13.0+cpu build.
        # That is our process model, not the release: judge gloo on freshly spawned ranks.
        facts["forked_ranks"] = [
            ("rank %d" % rank, kind, str(detail)[:200])
            for rank, (kind, detail) in enumerate(results)
            if kind != "ok"
        ]
        results, port = run_backend("gloo", 2, "spawn")
        facts.update(start_method="spawn", gloo_port=port)
    facts["gloo"] = check("gloo", 2, results)
    if ctx.cuda_available():
        if hasattr(dist, "is_nccl_available") and dist.is_nccl_available():
            world = min(2, torch.cuda.device_count())
            results, _ = run_backend("nccl", world, "spawn")
            facts["nccl"] = check("nccl", world, results)
            facts["nccl_version"] = (
                ".".join(str(v) for v in torch.cuda.nccl.version())
                if isinstance(torch.cuda.nccl.version(), tuple)
                else str(torch.cuda.nccl.version())
            )
        else:
            facts["nccl"] = "not available in this build"
    return facts
