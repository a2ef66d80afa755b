"""Look at runs: a read-only trajectory viewer in the browser (`openforge view`) and ATIF export.

- `discover` finds a run's trajectory stores (any layout) and the files written next to them;
- `library` opens them read-only for the web app (`app`, pages in `pages` / `episode_pages`, templates/);
- `conversation` reads an episode's calls back as the conversation the harness sent, call by call (shared by
  the episode page and the ATIF export); `tokens` shows the assembler's samples token by token; `groups` a
  GRPO group with its advantages; `summary` pass@k from the store; `training` and `charts` the curves;
- `atif` writes one ATIF `trajectory.json` per episode (`openforge export --format atif`).

    openforge view runs/eval-oracle runs/train --port 8321
"""
