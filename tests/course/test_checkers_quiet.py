"""Every chapter's checkers take quiet=True: same verdict, nothing printed (chapters 05-08 gained it last)."""
import pytest

from flashsim import exercises
from flashsim.solutions import ch05, ch06, ch07, ch08

CASES = [
    (exercises.check_online_block_update, ch05.online_block_update, ch05.wrong_online_block_update_no_rescale),
    (exercises.check_fa1_hbm_bytes, ch05.fa1_hbm_bytes, ch05.wrong_fa1_hbm_bytes_floor),
    (exercises.check_max_context_length, ch06.max_context_length, ch06.wrong_max_context_length_one_head),
    (exercises.check_recompute_p_tile, ch07.recompute_p_tile, ch07.wrong_recompute_p_tile_local_softmax),
    (exercises.check_backward_tile, ch07.backward_tile, ch07.wrong_backward_tile_no_delta),
    (exercises.check_causal_tile_kind, ch08.causal_tile_kind, lambda i, j, br, bc, n: "full"),
]


@pytest.mark.parametrize("check,right,wrong", CASES, ids=[c[0].__name__ for c in CASES])
def test_quiet_checkers_print_nothing_and_still_judge(check, right, wrong, capsys):
    assert check(right, quiet=True) and not check(wrong, quiet=True)
    assert capsys.readouterr().out == ""
    loud = check(right)
    assert loud and loud.headline() in capsys.readouterr().out
