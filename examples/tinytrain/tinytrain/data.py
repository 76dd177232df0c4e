"""A dataset of squares and a DataLoader over it, with worker processes."""

from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return float(i * i)


def loader(n, batch_size=4, workers=2):
    return DataLoader(Squares(n), batch_size=batch_size, num_workers=workers)


def as_list(batches):
    return [value for batch in batches for value in batch.tolist()]
