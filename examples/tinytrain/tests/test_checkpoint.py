import argparse

import torch

from tinytrain.checkpoint import resume, save_checkpoint
from tinytrain.model import TinyLinear


def test_resume_from_checkpoint(tmp_path):
    model = TinyLinear()
    x = torch.arange(4, dtype=torch.float32)
    model.train_step(x, x * 2)
    opt = argparse.Namespace(epochs=10, lr=0.01, device="cpu")
    save_checkpoint(tmp_path / "last.pt", model, epoch=3, opt=opt)

    restored = TinyLinear()
    epoch, saved_opt = resume(tmp_path / "last.pt", restored)
    assert epoch == 4 and saved_opt.lr == 0.01
    assert restored.w.tolist() == model.w.tolist()
