"""Options that follow the stepwise-ICoT reference: no removal offsets during pretraining, ..."""

from __future__ import annotations

import math

from hf_icot.schedules import Stepwise


def test_pretraining_removes_exactly_remove_start_from_without_offsets():
    schedule = Stepwise(remove_per_epoch=1, remove_start_from=3, removal_smoothing_lambda=4, pretrain_epochs=2)
    schedule.bind(100)
    ids = list(range(5000))
    # train.py: `if epoch < args.pretrain_epochs: to_remove.fill_(args.remove_start_from)`.
    for step in (0, 99, 199):
        assert {spec.count for spec in schedule.specs(step, ids)} == {3}
    # From then on each example adds an offset o with P(o) = (1 - e^-4) e^(-4 o): about 98.2% remove 3, 1.8% 4.
    after = [spec.count for spec in schedule.specs(200, ids)]
    assert set(after) <= {3, 4, 5, 6}
    assert abs(after.count(3) / len(ids) - (1 - math.exp(-4))) < 0.01
    assert after.count(4) > 0
