"""The grouped, stratified split (``splitting.py``) on hand-checked fixtures."""

from collections import Counter

from apps.datasets.splitting import (
    choose_validation,
    group_order,
    group_rows,
    row_group_key,
    row_order_key,
)

A, B, C, D, E = ("a" * 64, "b" * 64, "c" * 64, "d" * 64, "e" * 64)  # sha256 hex digests


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


def test_a_row_starts_in_its_revisions_group_else_in_its_own():
    assert row_group_key(A, C) == "spec:" + "a" * 64
    assert row_group_key("", C) == "transcript:" + "c" * 64  # no spec hash recorded


def test_row_order_hashes_the_content_not_a_database_id():
    # sha256("0:row:cccc…") = 29703ee2…, sha256("0:row:dddd…") = 9d297f19…
    assert row_order_key(0, C) == (
        "29703ee23dd97666e6ddcb8a8422fca380bafb81c997f2551b84a4cd4c26bc18"
    )
    assert row_order_key(0, D) == (
        "9d297f1967df433af92c4943fe77abbac9599930c96adc79efd8b4dbc7da9bd9"
    )


def _content_rows(env: dict[str, str]) -> list:
    """Rows as the build passes them: ``env`` maps this database's environment names to
    the identity it joins by (``env:<id>``: another database, other ids)."""
    return [
        (1, "spec:" + B, (env["ops"], "prompt:book the <name> review")),
        (2, "spec:" + A, (env["ops"],)),  # the same environment, a later revision
        (3, "spec:" + C, (env["finance"],)),
        (4, "spec:" + C, (env["finance-copy"],)),  # an identical revision: one environment
        (5, "transcript:" + D, (env["support"],)),  # recorded without a spec hash
        (6, "spec:" + E, (env["desk"], "prompt:book the <name> review")),  # leaks into ops
        (7, "spec:" + D, (env["support"],)),
    ]


def test_groups_join_an_environments_revisions_and_are_named_by_content():
    here = {"ops": "env:3", "finance": "env:4", "finance-copy": "env:5", "support": "env:6"}
    here["desk"] = "env:7"
    expected = {
        1: "spec:" + A,  # ops's revisions and the desk row that shares its masked prompt
        2: "spec:" + A,
        6: "spec:" + A,
        3: "spec:" + C,
        4: "spec:" + C,
        5: "spec:" + D,  # "spec:…" sorts before "transcript:…"
        7: "spec:" + D,
    }
    assert group_rows(_content_rows(here)) == expected
    # another database: other ids, in another order, the rows read in another order
    there = {"ops": "env:91", "finance": "env:12", "finance-copy": "env:40"}
    there |= {"support": "name:Acme Support", "desk": "env:2"}
    assert group_rows(reversed(_content_rows(there))) == expected


def test_group_order_is_the_seeded_hash():
    # sha256("0:a") = 9df3c5fa…, "0:b" = e02192fd…, "0:c" = be086d93…, "0:d" = 7d98c2ee…
    assert group_order(0, ["a", "b", "c", "d"]) == ["d", "a", "c", "b"]
    assert group_order(0, ["d", "c", "b", "a"]) == ["d", "a", "c", "b"]
    assert group_order(1, [f"g{i}" for i in range(10)])[:3] == ["g2", "g8", "g9"]


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
    # Which one is the seed's: the first of b and d in seeded order (seed 0: d, a, c, b).
    assert choose_validation(groups, seed=0, fraction=0.25) == {"d"}


def test_validation_share_tracks_the_fraction():
    # Ten groups of 2 rows, one shared capability: a 30% target is 6 rows, 3 groups.
    groups = _groups(**{f"g{i}": (2, {"c": 2}) for i in range(10)})
    chosen = choose_validation(groups, seed=1, fraction=0.3)
    assert chosen == {"g2", "g8", "g9"}  # the first three in seeded order


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


def test_every_capability_two_groups_hold_gets_validation_rows():
    # What a template family of one capability next to small, varied environments gave: the
    # big group alone is about the fraction, and it would leave twelve capabilities with no
    # validation row. Each of those is in two groups, so each sends its smaller one.
    spec = {"receipts-1": (20, {"receipts": 20}), "receipts-2": (20, {"receipts": 20})}
    for i in range(12):
        spec[f"cap{i}-a"] = (2, {f"cap{i}": 2})
        spec[f"cap{i}-b"] = (3, {f"cap{i}": 3})
    spec["lonely"] = (4, {"lonely": 4})  # one group: it must stay in train
    groups = _groups(**spec)
    for seed in range(5):
        chosen = choose_validation(groups, seed=seed, fraction=0.1)
        in_validation = {cap for key in chosen for cap in groups[key][1]}
        assert in_validation >= {f"cap{i}" for i in range(12)} | {"receipts"}, seed
        assert "lonely" not in chosen
        for i in range(12):
            assert f"cap{i}-a" in chosen and f"cap{i}-b" not in chosen  # the smaller goes


def test_coverage_never_takes_a_capabilitys_last_train_rows():
    # x is in a and b, but a holds all of y: x is covered by b (z keeps c's train rows).
    groups = _groups(
        a=(3, {"x": 1, "y": 3}),
        b=(5, {"x": 2, "z": 5}),
        c=(2, {"z": 2}),
        d=(10, {"w": 10}),
        e=(10, {"w": 10}),
    )
    for seed in range(5):
        chosen = choose_validation(groups, seed=seed, fraction=0.2)
        assert "b" in chosen and "a" not in chosen, (seed, chosen)
        assert len(chosen & {"d", "e"}) == 1, (seed, chosen)


def test_the_choice_does_not_depend_on_the_order_groups_come_in():
    spec = {f"g{i}": (1 + i % 4, {f"cap{i % 5}": 1 + i % 4, f"cap{i % 3}": 1}) for i in range(15)}
    forward = _groups(**spec)
    backward = _groups(**dict(reversed(spec.items())))
    for seed in range(10):
        chosen = choose_validation(forward, seed=seed, fraction=0.2)
        assert chosen and choose_validation(backward, seed=seed, fraction=0.2) == chosen
