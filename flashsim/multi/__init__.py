"""Attention across real processes: :mod:`.distributed` runs ring attention with ``torch.distributed`` (chapter 13)."""
