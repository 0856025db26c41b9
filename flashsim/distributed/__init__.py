"""Attention across real processes, not simulated: :mod:`.ring` runs ring attention with ``torch.distributed``
(chapter 13). The simulated cluster of devices is :mod:`flashsim.model.multi`."""
