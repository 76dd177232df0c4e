"""The standard probes: one module per probe, discovered by ``torch_matrix.probes.discovery``.

Modules whose names start with ``_`` are helpers, not probes. A probe module must
not import torch at module level: probes import it inside their function.
"""
