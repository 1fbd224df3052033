#!/usr/bin/env bash
# Installs the solcjs adapter as a native-looking solc, with no download (the
# compiler is the `solc` npm package in node_modules):
#   .solc/solc-v<version>  for py-solc-x / ape-solidity (the Makefile exports SOLCX_BINARY_PATH=.solc,
#                          so every checkout uses its own)
#   .solc/solc             for forge and slither (foundry.toml names it)
#   ~/.solcx/solc-v<version> (or $SOLCX_BINARY_PATH) for ape run by hand outside make
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
node_bin="$(command -v node)"
version="$("$node_bin" -e "process.stdout.write(require('$root/node_modules/solc').version().split('+')[0])")"
wrapper="#!/usr/bin/env bash
exec \"$node_bin\" \"$root/scripts/toolchain/solc-adapter.cjs\" \"\$@\""
user_dir="${SOLCX_BINARY_PATH:-$HOME/.solcx}"
mkdir -p "$root/.solc" "$user_dir"
for target in "$root/.solc/solc-v$version" "$root/.solc/solc" "$user_dir/solc-v$version"; do
  printf '%s\n' "$wrapper" > "$target.tmp" && chmod +x "$target.tmp" && mv "$target.tmp" "$target"
done
echo "solc $version adapter -> $root/.solc/{solc,solc-v$version}, $user_dir/solc-v$version"
