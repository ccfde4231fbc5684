# MODEL_ARGS of qwen2.5-3B, frozen at compile time by acrl 0.1.0.
# Source: args (the spec's [model.args] table)
# sha256 of the source: 1229b3ed4ccbf73ce5ddeb27091f575cd40f2e875c725d09e9b45a7095c3cbec
# shellcheck shell=bash disable=SC2034
MODEL_ARGS=(
  --swiglu
  --num-layers 36
  --hidden-size 2048
  --ffn-hidden-size 11008
  --num-attention-heads 16
  --use-rotary-position-embeddings
  --disable-bias-linear
  --add-qkv-bias
  --normalization RMSNorm
  --norm-epsilon 1e-6
  --rotary-base 1000000
  --group-query-attention
  --num-query-groups 2
  --vocab-size 151936
)
