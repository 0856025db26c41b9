"""Errors flashsim raises on bad input. Each message names the fix (introduced in chapter 01)."""


class FlashsimError(ValueError):
    """Bad input to flashsim: the message says what was wrong and how to fix it."""


class SramCapacityError(FlashsimError):
    """A tile set does not fit in the simulated SRAM (chapter 03)."""


class MemoryBudgetError(FlashsimError):
    """Step mode was asked for a size whose host memory would exceed the budget (chapter 05)."""


class FlashsimWarning(UserWarning):
    """Input flashsim accepts but whose verdict cannot be ok: NaN/inf inputs, or finite inputs that overflow the
    storage dtype (fp16 saturates past 65504)."""
