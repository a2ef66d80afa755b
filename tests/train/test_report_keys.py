"""report.json names GRPO's steps one way in both evaluations: `grpo_steps` their number, `grpo_step_records`
their records; reports of earlier versions (`rl_steps` a list with `evaluation: policies`, a number beside a
`steps` list with `evaluation: curve`) are still read."""

from __future__ import annotations

from openforge.train.records import GRPO_STEP_RECORDS, GRPO_STEPS, report_step_records

RECORDS = [{"step": 0, "reward": 0.5}, {"step": 1, "reward": 0.75}]


def test_the_step_records_are_read_from_this_and_earlier_reports():
    assert report_step_records({GRPO_STEPS: 2, GRPO_STEP_RECORDS: RECORDS}) == RECORDS
    assert report_step_records({"heldout_pass_at_1": {"rl": 0.5}, "rl_steps": RECORDS}) == RECORDS  # policies
    assert report_step_records({"heldout_pass_at_1": [], "rl_steps": 2, "steps": RECORDS}) == RECORDS  # curve
    assert report_step_records({"heldout_pass_at_1": []}) == []
    assert report_step_records({GRPO_STEP_RECORDS: "garbled", "steps": [RECORDS[0], 3]}) == [RECORDS[0]]
