"""The grouped, stratified split (``splitting.py``) on hand-checked fixtures."""

from collections import Counter

from apps.datasets.splitting import _key_hash, choose_validation, group_order, group_rows


def test_rows_join_their_groups_through_shared_leak_keys():
    rows = [
        (1, "family:finance-close", {"prompt:a"}),
        (2, "family:finance-close", {"prompt:b"}),
        (3, "env:7", {"reply:x"}),
        (4, "env:8", {"prompt:b", "reply:y"}),  # shares prompt:b with the finance family
        (5, "env:9", {"reply:y"}),  # shares reply:y with env:8, so with the family too
        (6, "env:10", {"reply:z"}),
        (7, "env:11", set()),
    ]
    assert group_rows(rows) == {
        1: "env:8",  # named by the smallest base group of the union
        2: "env:8",
        3: "env:7",
        4: "env:8",
        5: "env:8",
        6: "env:10",
        7: "env:11",
    }


def test_group_order_is_the_seeded_hash():
    keys = ["a", "b", "c"]
    expected = sorted(keys, key=lambda k: _key_hash(3, k))
    assert group_order(3, keys) == expected
    assert group_order(3, reversed(keys)) == expected


def _groups(**spec):
    return {key: (rows, Counter(caps)) for key, (rows, caps) in spec.items()}


def test_stratified_choice_keeps_every_capability_in_train_when_it_can():
    # Four groups of 5 rows; "b" and "d" each hold half of capability x, "a" holds all of y,
    # "c" all of z. A 25% validation target (5 rows) can be met by any one group; only
    # b or d leave every capability some train rows.
    groups = _groups(
        a=(5, {"y": 5}),
        b=(5, {"x": 5}),
        c=(5, {"z": 5}),
        d=(5, {"x": 5}),
    )
    for seed in range(20):
        chosen = choose_validation(groups, seed=seed, fraction=0.25)
        assert chosen in ({"b"}, {"d"}), (seed, chosen)
    # Which one is the seed's: the first of b and d in seeded order.
    order = group_order(0, groups)
    assert choose_validation(groups, seed=0, fraction=0.25) == {
        next(key for key in order if key in "bd")
    }


def test_validation_share_tracks_the_fraction():
    # Ten groups of 2 rows, one shared capability: a 30% target is 6 rows, 3 groups.
    groups = _groups(**{f"g{i}": (2, {"c": 2}) for i in range(10)})
    chosen = choose_validation(groups, seed=1, fraction=0.3)
    assert len(chosen) == 3
    assert chosen == set(group_order(1, groups)[:3])


def test_when_every_group_holds_a_capabilitys_last_rows_the_cheapest_goes():
    # a: 6 rows (caps p, q), b: 2 rows (cap r), c: 4 rows (cap s). Each is some capability's
    # only group, so any validation group makes one capability validation-only; b, the
    # smallest and closest to 10% of 12 rows, is the cheapest.
    groups = _groups(a=(6, {"p": 6, "q": 6}), b=(2, {"r": 2}), c=(4, {"s": 4}))
    for seed in range(10):
        assert choose_validation(groups, seed=seed, fraction=0.1) == {"b"}


def test_one_group_or_no_fraction_means_all_train():
    assert choose_validation(_groups(a=(9, {"x": 9})), seed=0, fraction=0.5) == set()
    assert choose_validation(_groups(a=(1, {}), b=(1, {})), seed=0, fraction=0.0) == set()


def test_at_least_one_group_stays_in_train():
    groups = _groups(a=(1, {}), b=(1, {}))
    for seed in range(10):
        chosen = choose_validation(groups, seed=seed, fraction=0.5)
        assert len(chosen) == 1
