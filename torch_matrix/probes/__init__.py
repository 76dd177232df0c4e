"""The torch-matrix probe suite: ``python -m torch_matrix.probes`` inside a cell's interpreter.

Stdlib only and Python 3.8+, so that it runs in any cell's venv; importing this
package (or any probe module) never imports torch. See docs/probes.md.

Its modules: `runner` (the suite: select, run each probe, write ``--out``), `api` (``@probe``,
`Context`), `discovery` (find probes), `execute` (run one probe, record its result), `isolated`
(pristine and command probes, a process each), `zygote` (import torch once, fork a child per probe;
its client: `zygoteclient`), `importwatch` (what ``import torch`` does to CUDA), `facts` (an
interpreter's facts; also a script under ``python -I``), `installcheck` (every installed file
against its RECORD), `pytest_outcomes` (the plugin that records a command probe's tests),
`pytest_select` (an ecosystem retry keeps only the listed tests), `fixproof` and `safe_globals`
(a ``torch.load`` fix proven by rerunning the failing tests), `visible` (the terminal rule: control
characters shown, not sent; vocab.escaping applies it too), `standard` (the standard probes).
"""
