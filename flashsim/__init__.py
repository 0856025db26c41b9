"""flashsim: FlashAttention on a simulated GPU memory hierarchy, with every byte counted."""
from .errors import FlashsimError, MemoryBudgetError, SramCapacityError
from .hardware import Hardware, get_device

__version__ = "0.1.0"
