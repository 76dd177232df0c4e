import torch

from tinytrain.model import TinyLinear


def test_training_reduces_the_loss():
    torch.manual_seed(0)
    x = torch.arange(8, dtype=torch.float32) / 8
    y = x * 3 + 1
    model = TinyLinear()
    losses = [model.train_step(x, y, lr=0.5) for _ in range(50)]
    assert losses[-1] < losses[0] / 10
