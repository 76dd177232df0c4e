"""The torch-matrix probe suite: ``python -m torch_matrix.probes`` inside a cell's interpreter.

Stdlib only and Python 3.8+, so that it runs in any cell's venv; importing this
package (or any probe module) never imports torch. See docs/probes.md.
"""
