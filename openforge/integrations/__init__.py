"""OpenForge inside other trainers: its episodes (any harness, any sandbox, recorded token for token by the
proxy) as their rollout source. `openforge.integrations.trl`: TRL's GRPO trainer (the `trl` extra). Importing
this package imports no trainer."""
