"""What the stages choose on their own: GRPO's share of the train environments."""

from hypothesis import given
from hypothesis import strategies as st

from apps.experiments.stages import spread


@given(st.lists(st.integers(), unique=True, max_size=200), st.integers(min_value=1, max_value=40))
def test_spread_keeps_at_most_the_limit_in_order(ids, limit):
    chosen = spread(ids, limit)
    assert len(chosen) == min(len(ids), limit)
    assert len(set(chosen)) == len(chosen)
    assert chosen == [i for i in ids if i in set(chosen)]  # a subsequence, in order


@given(st.integers(min_value=1, max_value=10), st.integers(min_value=1, max_value=50))
def test_spread_gives_every_cell_its_share(cells, per_cell):
    ids = [cell * 1000 + n for cell in range(cells) for n in range(per_cell)]
    chosen = spread(ids, 20)
    counts = [sum(1 for i in chosen if i // 1000 == cell) for cell in range(cells)]
    if len(ids) > 20:
        assert max(counts) - min(counts) <= 1
    else:
        assert counts == [per_cell] * cells
