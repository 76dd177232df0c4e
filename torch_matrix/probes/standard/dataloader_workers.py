"""DataLoader with worker processes, a custom Dataset and collate_fn; pin_memory where CUDA is present."""

import multiprocessing

from torch_matrix.probes.api import Fail, probe
from torch_matrix.probes.standard._util import first_line

REPRO = """import torch
from torch.utils.data import DataLoader, Dataset
class Seqs(Dataset):
    def __len__(self): return 10
    def __getitem__(self, i): return torch.full((i % 3 + 1,), float(i)), i
def pad(batch):
    seqs, labels = zip(*batch); out = torch.zeros(len(seqs), max(len(s) for s in seqs))
    for row, s in enumerate(seqs): out[row, :len(s)] = s
    return out, torch.tensor(labels)
if __name__ == "__main__":
    print([b[1].tolist() for b in DataLoader(Seqs(), batch_size=3, num_workers=2, collate_fn=pad, timeout=30)])
"""


class VariableLengthSequences:
    """A map-style dataset of variable-length rows; plain class so the module imports without torch."""

    def __init__(self, size=10):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        import torch
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        try:
            import numpy as np

            draw = float(np.random.rand())
        except ImportError:
            draw = None
        return torch.full((index % 3 + 1,), float(index)), index, info.id if info else -1, draw


def pad_collate(batch):
    """Pads rows to the longest one, like collate functions for sequences do."""
    import torch

    seqs, labels, workers, draws = zip(*batch)
    out = torch.zeros(len(seqs), max(len(s) for s in seqs))
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = seq
    return out, torch.tensor(labels), list(workers), list(draws)


@probe(
    "dataloader_workers",
    doc="DataLoader num_workers=2 with a custom Dataset and padding collate_fn "
    "yields every item once; pin_memory on CUDA",
    timeout=120,
)
def dataloader_workers(ctx):
    import torch
    from torch.utils.data import DataLoader

    cuda = ctx.cuda_available()
    facts = {
        "start_method": multiprocessing.get_start_method(allow_none=True) or "default",
        "pin_memory": cuda,
    }
    loader = DataLoader(
        VariableLengthSequences(),
        batch_size=3,
        num_workers=2,
        collate_fn=pad_collate,
        timeout=60,
        pin_memory=cuda,
    )
    try:
        batches = list(loader)
    except Exception as exc:
        raise Fail(
            "iterating a DataLoader with num_workers=2 failed: %s" % first_line(exc),
            observed=first_line(exc),
            expected="4 batches",
            repro=REPRO,
        )
    labels = sorted(label for batch in batches for label in batch[1].tolist())
    workers = sorted({worker for batch in batches for worker in batch[2]})
    if labels != list(range(10)):
        raise Fail(
            "items lost or duplicated across workers",
            observed=labels,
            expected=list(range(10)),
            repro=REPRO,
        )
    if workers != [0, 1]:
        raise Fail(
            "batches did not come from both workers", observed=workers, expected=[0, 1], repro=REPRO
        )
    if [tuple(batch[0].shape) for batch in batches][0] != (3, 3):
        raise Fail(
            "collate_fn output has the wrong shape",
            observed=tuple(batches[0][0].shape),
            expected=(3, 3),
            repro=REPRO,
        )
    if cuda:
        facts["pinned"] = all(bool(batch[0].is_pinned()) for batch in batches)
        if not facts["pinned"]:
            raise Fail(
                "pin_memory=True gave unpinned batches", observed=False, expected=True, repro=REPRO
            )
        facts["non_blocking_copy"] = str(batches[0][0].to("cuda", non_blocking=True).device)
    draws = [draw for batch in batches for draw in batch[3]]
    if None not in draws:
        # Each worker gets its own numpy seed in torch >= 1.9; before that forked workers repeat the same draws.
        per_worker = {}
        for batch in batches:
            for worker, draw in zip(batch[2], batch[3]):
                per_worker.setdefault(worker, []).append(draw)
        facts["numpy_random_differs_across_workers"] = (
            per_worker.get(0, [None])[0] != per_worker.get(1, [None])[0]
        )
    facts["batches"] = len(batches)
    if hasattr(torch.utils.data, "get_worker_info"):
        facts["persistent_workers_param"] = (
            "persistent_workers" in DataLoader.__init__.__code__.co_varnames
        )
    return facts
