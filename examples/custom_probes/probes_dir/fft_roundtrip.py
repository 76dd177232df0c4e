"""Example custom probe file: a downstream repository's own check, in the suite's protocol."""

from torch_matrix.probes.api import Fail, Unsupported, probe

REPRO = """import torch
x = torch.arange(8.0)
print(torch.fft.irfft(torch.fft.rfft(x), n=8))  # expected: tensor([0., 1., ..., 7.])
"""


@probe("fft_roundtrip", doc="irfft(rfft(x)) gives x back (our spectral loss relies on it)")
def fft_roundtrip(ctx):
    import torch  # inside the function: importing a probe file must never import torch

    if not hasattr(torch, "fft") or not hasattr(torch.fft, "rfft"):
        raise Unsupported("torch.fft.rfft does not exist in torch %s" % torch.__version__)
    x = torch.arange(8.0)
    y = torch.fft.irfft(torch.fft.rfft(x), n=8)
    error = float((x - y).abs().max())
    ctx.note("max_abs_err", error)
    if error > 1e-5:
        raise Fail(
            "roundtrip differs by %g" % error, observed=y.tolist(), expected=x.tolist(), repro=REPRO
        )
    return {"max_abs_err": error}


@probe("channels_last_conv", doc="a conv in channels_last memory format matches the contiguous one")
def channels_last_conv(ctx):
    import torch

    if not hasattr(torch, "channels_last"):
        raise Unsupported("torch.channels_last does not exist in torch %s" % torch.__version__)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3)
    x = torch.randn(2, 3, 8, 8)
    expected = conv(x)
    observed = conv.to(memory_format=torch.channels_last)(x.to(memory_format=torch.channels_last))
    diff = float((expected - observed).abs().max())
    if diff > 1e-4:
        raise Fail(
            "channels_last conv differs by %g" % diff,
            observed=diff,
            expected="<= 1e-4",
            repro="import torch; torch.manual_seed(0); c = torch.nn.Conv2d(3, 4, 3); "
            "x = torch.randn(2, 3, 8, 8); "
            "print((c(x) - c.to(memory_format=torch.channels_last)"
            "(x.to(memory_format=torch.channels_last))).abs().max())",
        )
    return {"max_abs_diff": diff}
