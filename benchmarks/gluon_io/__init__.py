"""The Gluon kernels' bytes against Nsight Compute (issue 28 item 2): configs.json, measure.py (device), report.py."""
