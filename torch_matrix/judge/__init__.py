"""Judgement: why a probe failed (`causes`) and what a cell's results mean (`verdict`). Pure; may import `vocab`."""
